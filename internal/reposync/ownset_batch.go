package reposync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// The own-relay fill asks several filters in one REQ whether they match
// anything: a fill of one chunk of roots is three filters (#e, #E, #q),
// the first fill after a start thousands, most of them match nothing
// (#q above all), and each filter paged alone costs a REQ and a CLOSE per
// page, one page more than it has events for, to see its end.
//
// A probe REQ carries a batch's filters with limit 1 each. The own relay
// may cap results per filter or per REQ, silently, and one REQ's events
// do not say which filter they were returned for, so the only thing a
// probe proves is that nothing matches any of its filters when it brings
// no event at all. A filter that matched an event is paged alone
// (Pager.pageFilter, which copes with caps); the others are probed again
// without it, until a probe brings nothing.

const (
	// fillBatchFilters is the most filters in one fill REQ (strfry refuses
	// more than 200; ngit-relay answers 50 without de-duplicating).
	fillBatchFilters = 8
	// fillBatchBytes bounds the JSON of one batch's filters (strfry's
	// messages: 131,072 bytes).
	fillBatchBytes = 64 << 10
)

// fillProbe is one filter of a fill batch.
type fillProbe struct {
	f     nostr.Filter
	match func(*nostr.Event) bool
	hit   bool // the last probe brought an event it matches
}

// syncFill reads every own-relay event matching fs and emits it, the
// filters probed in batches of up to fillBatchFilters (fillBatchBytes).
func (o *OwnLocalSet) syncFill(ctx context.Context, c *relay.Conn, fs []nostr.Filter, emit Emit) error {
	if err := o.pager.Auth.Failed(c); err != nil {
		return err
	}
	var errs []error
	for start := 0; start < len(fs); {
		end, size := start, 0
		for end < len(fs) && end-start < fillBatchFilters {
			n := filterBytes(fs[end])
			if end > start && size+n > fillBatchBytes {
				break
			}
			size += n
			end++
		}
		if err := o.probeFills(ctx, c, fs[start:end], emit); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
		start = end
	}
	return errors.Join(errs...)
}

// probeFills reads what the filters of one batch match: the filters a
// probe finds matching are paged alone, the rest probed again.
func (o *OwnLocalSet) probeFills(ctx context.Context, c *relay.Conn, fs []nostr.Filter, emit Emit) error {
	if len(fs) == 1 || o.noBatch.Load() {
		return o.pager.Sync(ctx, c, fs, 1, emit)
	}
	pending := make([]*fillProbe, len(fs))
	for i, f := range fs {
		f.LimitZero = false
		pending[i] = &fillProbe{f: f, match: newFilterMatcher([]nostr.Filter{f}, nil).Match}
	}
	var errs []error
	for len(pending) > 1 {
		req := make(nostr.Filters, len(pending))
		for i, p := range pending {
			req[i] = p.f
			req[i].Limit = 1
		}
		matched, outside, err := o.fetchFills(ctx, c, req, pending, emit)
		if errors.Is(err, ErrSubscriptionClosed) && !errors.Is(err, relay.ErrAuthRequired) && ctx.Err() == nil {
			// Refused (too many filters in one REQ, or too many values):
			// each goes alone, and the own relay's fills are not
			// batched any more.
			o.noBatch.Store(true)
			break
		}
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if matched == 0 {
			if outside > 0 {
				errs = append(errs, fmt.Errorf("%w: %d events matching none of %d fill filters", ErrFilterIgnored, outside, len(req)))
			}
			return errors.Join(errs...) // nothing matches any of them
		}
		rest := pending[:0]
		for _, p := range pending {
			if !p.hit {
				rest = append(rest, p)
				continue
			}
			if err := o.pager.Sync(ctx, c, []nostr.Filter{p.f}, 1, emit); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				errs = append(errs, err)
			}
		}
		pending = rest
	}
	rest := make([]nostr.Filter, len(pending))
	for i, p := range pending {
		rest[i] = p.f
	}
	return errors.Join(append(errs, o.pager.Sync(ctx, c, rest, 1, emit))...)
}

// fetchFills runs one probe REQ to EOSE: every event is emitted once (a
// relay may send one per filter it matches) and marks the probes it
// matches. It returns how many distinct events matched a probe, and how
// many matched none.
func (o *OwnLocalSet) fetchFills(ctx context.Context, c *relay.Conn, req nostr.Filters, probes []*fillProbe, emit Emit) (matched, outside int, err error) {
	for _, p := range probes {
		p.hit = false
	}
	id := fmt.Sprintf("f%d", o.pager.seq.Add(1))
	sub, err := c.Subscribe(ctx, id, req)
	if err != nil {
		return 0, 0, err
	}
	defer sub.Close()
	timer := time.NewTimer(o.pager.EOSETimeout)
	defer timer.Stop()
	seen := map[string]bool{}
	progressed := false
	for {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-timer.C:
			if progressed || c.Stalled() {
				progressed = false
				timer.Reset(o.pager.EOSETimeout)
				continue
			}
			return 0, 0, fmt.Errorf("%w (%s)", ErrEOSETimeout, o.pager.EOSETimeout)
		case m, ok := <-sub.Messages():
			if !ok {
				if err := c.Err(); err != nil {
					return 0, 0, err
				}
				return 0, 0, ErrSubscriptionClosed
			}
			switch m.Type {
			case relay.MsgEvent:
				ev := m.Event
				if seen[ev.ID] {
					continue
				}
				seen[ev.ID] = true
				hit := false
				for _, p := range probes {
					if p.match(ev) {
						p.hit, hit = true, true
					}
				}
				if !hit {
					outside++
					continue
				}
				matched++
				progressed = true
				if err := emit(ctx, ingest.Incoming{Event: ev, Size: m.Size, Relay: c.URL(), Raw: m.Raw}); err != nil {
					return 0, 0, err
				}
			case relay.MsgClosed:
				if o.pager.OnClosed != nil {
					o.pager.OnClosed(m.Reason)
				}
				if relay.ReasonPrefix(m.Reason) == relay.ReasonAuthRequired {
					return 0, 0, fmt.Errorf("%w: %w: %s", ErrSubscriptionClosed, relay.ErrAuthRequired, m.Reason)
				}
				return 0, 0, fmt.Errorf("%w: %s", ErrSubscriptionClosed, m.Reason)
			case relay.MsgEOSE:
				return matched, outside, nil
			}
		}
	}
}
