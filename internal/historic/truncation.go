package historic

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// Kinds of truncation a relay is caught at (the metric's kind label).
const (
	// TruncNegentropy: a NIP-77 set held fewer events than the relay serves
	// (khatru on its slicestore: the 500 newest).
	TruncNegentropy = "negentropy"
	// TruncReq: a REQ returned fewer events than asked although the relay
	// held more below them (ngit-relay: 250 for any limit above 1000).
	TruncReq = "req"
	// TruncTie: a second held more events than a REQ returns, and
	// neither NIP-77 nor a split filter read it whole (resolveSecond).
	TruncTie = "tie"
)

// truncKinds are the kinds, in the order Describe lists them.
var truncKinds = []string{TruncNegentropy, TruncReq, TruncTie}

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
	return n >= limit || isCommonCap(n, maxLimit) || p.Truncation.truncates(url, TruncReq)
}

// Truncation remembers relays caught returning less than they hold: it
// warns once per relay and kind, counts every detection
// (ngit_sync_truncation_detected_total) and describes it for /status. The
// zero value of a nil *Truncation records nothing.
type Truncation struct {
	log     *zap.Logger
	counter *prometheus.CounterVec

	mu   sync.Mutex
	seen map[string]map[string]string // relay → kind → what was seen
	// cut are the seconds of each relay that stay cut (TruncTie), with
	// what was seen, until a later sweep reads them whole.
	cut map[string]map[nostr.Timestamp]string
}

func NewTruncation(counter *prometheus.CounterVec, log *zap.Logger) *Truncation {
	return &Truncation{log: log, counter: counter, seen: map[string]map[string]string{}, cut: map[string]map[nostr.Timestamp]string{}}
}

// detected records that url truncated (kind) as described by what.
func (t *Truncation) detected(url, kind, what string) {
	if t == nil {
		return
	}
	t.counter.WithLabelValues(url, kind).Inc()
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.seen[url]
	if m == nil {
		m = map[string]string{}
		t.seen[url] = m
	}
	if _, warned := m[kind]; !warned && kind == TruncTie {
		t.log.Warn("a second of the relay's history holds more events than it returns per REQ, and neither NIP-77 nor splitting the filter read it whole; the events beyond are not seen, and the relay is not reported synced",
			zap.String("relay", url), zap.String("detected", what))
	} else if !warned {
		t.log.Warn("relay silently truncates results; fetching the rest below the cut",
			zap.String("relay", url), zap.String("kind", kind), zap.String("detected", what))
	}
	m[kind] = what
}

// truncates tells whether url was caught truncating kind.
func (t *Truncation) truncates(url, kind string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.seen[url][kind]
	return ok
}

// tieCut records that second ts of url stays cut (what: the error).
func (t *Truncation) tieCut(url string, ts nostr.Timestamp, what string) {
	if t == nil {
		return
	}
	t.detected(url, TruncTie, what)
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.cut[url]
	if m == nil {
		m = map[nostr.Timestamp]string{}
		t.cut[url] = m
	}
	m[ts] = what
}

// tieResolved records that second ts of url was read whole.
func (t *Truncation) tieResolved(url string, ts nostr.Timestamp) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.cut[url]; m != nil {
		delete(m, ts)
		if len(m) == 0 {
			delete(t.cut, url)
		}
	}
}

// TiesCut returns how many seconds of url's history stay cut: more events
// at one created_at than it returns, not read whole (0 when none).
func (t *Truncation) TiesCut(url string) int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cut[url])
}

// AnyTiesCut returns how many relays have seconds that stay cut.
func (t *Truncation) AnyTiesCut() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cut)
}

// Describe returns what was detected on url ("" when nothing).
func (t *Truncation) Describe(url string) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, k := range truncKinds {
		if w, ok := t.seen[url][k]; ok {
			parts = append(parts, k+": "+w)
		}
	}
	return strings.Join(parts, "; ")
}

// Track creates url's series at 0, one per kind, so the first truncation
// caught on a newly tracked relay shows in a rate.
func (t *Truncation) Track(url string) {
	for _, k := range truncKinds {
		if t != nil {
			t.counter.WithLabelValues(url, k)
		}
	}
}

func (t *Truncation) Forget(url string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	delete(t.seen, url)
	delete(t.cut, url)
	t.mu.Unlock()
	for _, k := range truncKinds {
		t.counter.DeleteLabelValues(url, k)
	}
}

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
	if rs.count == 0 || !(isCommonCap(rs.count, maxLimit) || rs.haveBelow || s.pager.Truncation.truncates(url, TruncNegentropy)) {
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
	s.pager.Truncation.detected(url, TruncNegentropy,
		fmt.Sprintf("a NIP-77 set of %d events ended at created_at %d, a REQ found more at or below it", rs.count, oldest))
	return s.pager.pageFilter(ctx, c, pf, emit)
}
