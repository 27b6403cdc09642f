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

// The own-relay fill sends several filters in one REQ: a fill of one
// chunk of roots is three filters (#e, #E, #q), the first fill after a
// start thousands, and each filter paged alone costs a REQ and a CLOSE per
// page (one page more than it has events for, to see its end).
//
// Each filter of a batch is paged backwards as Pager.pageFilter pages one
// (its own until, the ids seen at its boundary second), the filters that
// had events sent together in one REQ per round. The own relay may cap
// results per filter or per REQ, silently: a filter that got nothing in a
// round may have been starved by the others, so it is asked again once
// they are at their ends, and the batch ends only when a REQ carrying
// every unfinished filter brings nothing. Either way a
// relay returns the newest events of each filter first, so a filter's
// page is the top of what it holds below its until, as with one filter.

const (
	// fillBatchFilters is the most filters in one fill REQ (strfry refuses
	// more than 200; ngit-relay answers 50 without de-duplicating).
	fillBatchFilters = 8
	// fillBatchBytes bounds the JSON of one batch's filters (strfry's
	// messages: 131,072 bytes).
	fillBatchBytes = 64 << 10
)

// fillPaging is one filter of a fill batch, paged backwards.
type fillPaging struct {
	f        nostr.Filter
	match    func(*nostr.Event) bool
	until    *nostr.Timestamp
	boundary map[string]struct{} // ids seen at created_at == *until
	done     bool
	hot      bool           // it had events in the last REQ it was in
	page     []*nostr.Event // this round's events
}

// syncFill reads every own-relay event matching fs and emits it, the
// filters sent in batches of up to fillBatchFilters (fillBatchBytes).
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
		if err := o.pageFills(ctx, c, fs[start:end], emit); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
		start = end
	}
	return errors.Join(errs...)
}

// pageFills pages the filters of one batch to their ends.
func (o *OwnLocalSet) pageFills(ctx context.Context, c *relay.Conn, fs []nostr.Filter, emit Emit) error {
	if len(fs) == 1 || o.noBatch.Load() {
		return o.pager.Sync(ctx, c, fs, 1, emit)
	}
	pageSize := o.pager.pageSize(c.URL())
	ps := make([]*fillPaging, len(fs))
	for i, f := range fs {
		f.LimitZero = false
		p := &fillPaging{f: f, match: newFilterMatcher([]nostr.Filter{f}, nil).Match, boundary: map[string]struct{}{}}
		if f.Until != nil {
			u := *f.Until
			p.until = &u
		}
		ps[i] = p
	}
	var errs []error
	all := true // the next REQ carries every unfinished filter
	for {
		var active []*fillPaging
		var req nostr.Filters
		for _, p := range ps {
			if p.done || !all && !p.hot {
				continue
			}
			pf := p.f
			pf.Until, pf.Limit = p.until, pageSize
			active = append(active, p)
			req = append(req, pf)
			p.page = p.page[:0]
		}
		if len(active) == 0 {
			return errors.Join(errs...)
		}
		matched, outside, err := o.fetchFills(ctx, c, req, active, pageSize, emit)
		if errors.Is(err, ErrSubscriptionClosed) && !errors.Is(err, relay.ErrAuthRequired) && ctx.Err() == nil {
			// Refused (too many filters in one REQ, or too many
			// values): each goes on alone, from where it is, and the
			// own relay's fills are not batched any more.
			o.noBatch.Store(true)
			rest := make([]nostr.Filter, len(active))
			for i, p := range active {
				rest[i] = p.f
				rest[i].Until = p.until
			}
			return errors.Join(append(errs, o.pager.Sync(ctx, c, rest, 1, emit))...)
		}
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if matched == 0 && !all {
			// The filters that had events are at their ends: the next
			// REQ asks every unfinished one again.
			all = true
			continue
		}
		if matched == 0 {
			// Nothing for any unfinished filter, so none was starved by
			// a cap on the REQ: every one is at its end.
			if outside > 0 {
				return errors.Join(append(errs, fmt.Errorf("%w: %d events matching none of %d fill filters", ErrFilterIgnored, outside, len(req)))...)
			}
			return errors.Join(errs...)
		}
		all = false
		for _, p := range active {
			// One that got nothing is asked again with the others at
			// the end (they may have taken a cap on the REQ's results);
			// meanwhile the REQs carry those that had events.
			p.hot = len(p.page) > 0
			if !p.hot {
				continue
			}
			if err := o.stepFill(ctx, c, p, pageSize, emit); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				errs = append(errs, err)
			}
		}
	}
}

// stepFill moves p's until below the page it got, as Pager.pageFilter
// does for one filter.
func (o *OwnLocalSet) stepFill(ctx context.Context, c *relay.Conn, p *fillPaging, pageSize int, emit Emit) error {
	page := p.page
	minTS := pageBottom(page, pageSize)
	newCount := 0
	for _, ev := range page {
		if _, ok := p.boundary[ev.ID]; !ok {
			newCount++
		}
	}
	if newCount == 0 {
		// Only events already seen at the boundary second came back.
		if p.until == nil || p.f.Since != nil && *p.until <= *p.f.Since {
			p.done = true
			return nil
		}
		if len(page) >= pageSize {
			// The second may hold more than a page: the one-filter pager
			// splits it by kind and goes on below it.
			p.done = true
			pf := p.f
			pf.Until = p.until
			return o.pager.Sync(ctx, c, []nostr.Filter{pf}, 1, emit)
		}
		if *p.until == 0 {
			p.done = true
			return nil
		}
		next := *p.until - 1
		p.until = &next
		clear(p.boundary)
		return nil
	}
	if p.until == nil || minTS != *p.until {
		clear(p.boundary)
	}
	for _, ev := range page {
		if ev.CreatedAt == minTS {
			p.boundary[ev.ID] = struct{}{}
		}
	}
	t := minTS
	p.until = &t
	if p.f.Since != nil && minTS < *p.f.Since {
		p.done = true
	}
	return nil
}

// fetchFills runs one REQ of the batch's active filters to EOSE: every
// event is emitted once and counted in the page of each filter it matches
// (a relay may send an event once per filter it matches). It returns how
// many distinct events matched a filter, and how many matched none.
func (o *OwnLocalSet) fetchFills(ctx context.Context, c *relay.Conn, req nostr.Filters, active []*fillPaging, pageSize int, emit Emit) (matched, outside int, err error) {
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
				hit, kept := false, false
				for _, p := range active {
					if !p.match(ev) {
						continue
					}
					hit = true
					// Up to twice the limit per filter, as Pager.fetchOnce
					// keeps (live deliveries come on top); beyond that the
					// relay floods.
					if len(p.page) < 2*pageSize {
						p.page = append(p.page, ev)
						kept = true
					}
				}
				if !hit {
					outside++
					continue
				}
				if !kept {
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
