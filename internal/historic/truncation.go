package historic

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
)

// isCommonCap tells whether n is the size a silently cut set would have:
// a common cap or the relay's announced max_limit.
func isCommonCap(n, maxLimit int) bool {
	if n > 0 && n == maxLimit {
		return true
	}
	for _, c := range relay.CommonCaps {
		if n == c {
			return true
		}
	}
	return false
}

// ReachedCap tells whether a REQ answer of n stored events asked with
// limit may have been cut by the relay: n reached the limit, is the size
// of a common cap or of the relay's max_limit (isCommonCap), or the relay
// was caught truncating REQs before.
func (p *Pager) ReachedCap(url string, n, limit int) bool {
	if n == 0 {
		return false
	}
	maxLimit := 0
	if p.MaxLimit != nil {
		maxLimit = p.MaxLimit(url)
	}
	return n >= limit || isCommonCap(n, maxLimit) || p.Truncation.Truncates(url, truncation.Req)
}

// Truncation is the tracker of relays caught cutting results.
type Truncation = truncation.Tracker

// NewTruncation returns a Truncation tracker.
var NewTruncation = truncation.New

// remoteSet is what a finished reconciliation says the relay holds for a
// filter: the local items it did not report missing, plus the ids it had
// that we fetched.
type remoteSet struct {
	count    int
	oldest   nostr.Timestamp
	atOldest map[string]bool // ids at created_at == oldest
	// haveBelow: every id we hold that the relay lacks is older than its
	// oldest event (the set ends at a boundary while older events exist).
	haveBelow bool
	// other are ids of the set fetched from another relay or already
	// had (fetchclaims.go): counted, their created_at unknown.
	other map[string]bool
}

func (rs *remoteSet) add(ts nostr.Timestamp, id func() string) {
	switch {
	case rs.count == 0 || ts < rs.oldest:
		rs.oldest = ts
		rs.atOldest = map[string]bool{id(): true}
	case ts == rs.oldest:
		rs.atOldest[id()] = true
	}
	rs.count++
}

// buildRemoteSet derives the relay's set from our storages (one per
// reconciled window), the ids we have that it lacks, the items fetched and
// the ids of its set not fetched from it (other, created_at unknown).
func buildRemoteSet(local []*neg.Storage, have []string, fetched []neg.Item, other map[string]bool) remoteSet {
	haveSet := make(map[event.ID]struct{}, len(have))
	for _, h := range have {
		if id, ok := event.DecodeID(h); ok {
			haveSet[id] = struct{}{}
		}
	}
	var rs remoteSet
	var newestHave nostr.Timestamp
	haveSeen := false
	for _, st := range local {
		for i := range st.Size() {
			it := st.Item(i)
			if _, ok := haveSet[it.ID]; ok {
				newestHave = max(newestHave, it.CreatedAt)
				haveSeen = true
				continue
			}
			rs.add(it.CreatedAt, func() string { return hex.EncodeToString(it.ID[:]) })
		}
	}
	for _, it := range fetched {
		rs.add(it.CreatedAt, func() string { return hex.EncodeToString(it.ID[:]) })
	}
	rs.haveBelow = haveSeen && rs.count > 0 && newestHave < rs.oldest
	rs.count += len(other)
	rs.other = other
	return rs
}

// confirmSet checks a reconciled set that looks cut — its size is a common
// cap or the relay's max_limit, it ends above events we hold that the relay
// "lacks", or the relay was caught truncating before — with one REQ at and
// below its oldest event. Events there that the set did not hold mean the
// set was truncated: the rest of the filter is paged, and the relay is
// recorded. A set that does not look cut costs nothing.
func (s *NegSyncer) confirmSet(ctx context.Context, c *relay.Conn, f nostr.Filter, rs remoteSet, emit Emit) error {
	url := c.URL()
	maxLimit := 0
	if s.pager.MaxLimit != nil {
		maxLimit = s.pager.MaxLimit(url)
	}
	if rs.count == 0 || !(isCommonCap(rs.count, maxLimit) || rs.haveBelow || s.pager.Truncation.Truncates(url, truncation.Negentropy)) {
		return nil
	}
	s.m.probes.WithLabelValues(url).Inc()
	pf := f
	oldest := rs.oldest
	pf.Until = &oldest
	if len(rs.atOldest) == 0 {
		// Only other ids: no created_at known, the probe asks for the
		// newest events; one beyond the set means it was cut.
		pf.Until, oldest = nil, nostr.Timestamp(1<<62)
	}
	// The other ids may lie at or below the oldest known one: room for
	// them too.
	pf.Limit, pf.LimitZero = len(rs.atOldest)+1+len(rs.other), false
	page, err := s.pager.fetch(ctx, c, pf, emit)
	if err != nil {
		return fmt.Errorf("confirming a NIP-77 set of %d events: %w", rs.count, err)
	}
	beyond := 0
	for _, ev := range page {
		if rs.other[ev.ID] {
			continue
		}
		if ev.CreatedAt < oldest || !rs.atOldest[ev.ID] {
			beyond++
		}
	}
	if beyond == 0 {
		if len(rs.atOldest) == 0 || len(page) < min(pf.Limit, s.pager.PageSizeFor(url)) {
			return nil
		}
		// The probe came back full of the set's own events at its oldest
		// second: the relay may cut REQs there at the same size as the set
		// (khatru on its slicestore: 500 both). That second is read from
		// the top, which resolves a tie (resolveSecond).
		return s.pager.pageFilter(ctx, c, pf, emit)
	}
	s.pager.Truncation.Detected(url, truncation.Negentropy,
		fmt.Sprintf("a NIP-77 set of %d events ended at created_at %d, a REQ found more at or below it", rs.count, oldest))
	return s.pager.pageFilter(ctx, c, pf, emit)
}
