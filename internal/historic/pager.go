package historic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/filtermatch"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sweepcursor"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
)

// Sentinel errors of historic sync.
var (
	// ErrEOSETimeout: a historic REQ got no EOSE in time.
	ErrEOSETimeout = errors.New("no EOSE before timeout")
	// ErrSubscriptionClosed: the relay closed a historic REQ (CLOSED).
	ErrSubscriptionClosed = errors.New("relay closed the subscription")
	// ErrFilterIgnored: a REQ page held only events outside its filter
	// (a relay ignoring until or since): paging cannot go past them.
	ErrFilterIgnored = errors.New("relay returned only events outside the filter")
	// ErrSaturatedSecond: more events share one created_at than the relay
	// returns per REQ, and neither NIP-77 nor a split filter read them
	// whole (resolveSecond); the paging went on past them.
	ErrSaturatedSecond = errors.New("too many events share one created_at for REQ paging")
)

// Emit hands one received event to the shared handler.
type Emit func(ctx context.Context, in ingest.Incoming) error

// HistoricSyncer fetches every stored event matching filters from one
// relay and emits it. slots is how many subscriptions it may hold open at
// once on the connection.
type HistoricSyncer interface {
	Sync(ctx context.Context, c *relay.Conn, fs []nostr.Filter, slots int, emit Emit) error
}

// Pager is the REQ+EOSE historic syncer: it pages backwards with `until`
// until the relay has nothing older, which is correct against relays that
// silently cap results (strfry: 500) and when many events share one
// created_at (it reads that second by NIP-77 or splits its filter:
// resolveSecond).
type Pager struct {
	PageSize    int
	EOSETimeout time.Duration
	// WaitAllowed, when set, is called before every REQ; it blocks while the
	// relay is cooling down after a rate limit.
	WaitAllowed func(ctx context.Context) error
	// OnClosed, when set, is told the reason of every CLOSED.
	OnClosed func(reason string)
	// MaxLimit, when set, returns the relay's announced max_limit (NIP-11;
	// 0 when unknown): pages are never asked bigger than that.
	MaxLimit func(url string) int
	// Truncation, when set, records relays caught returning fewer events
	// than asked while holding more.
	Truncation *Truncation
	// Auth, when set, answers "auth-required:" CLOSEDs (NIP-42) so the REQ
	// can be sent again.
	Auth *ReadAuth
	// Budget, when set, bounds the events this pager's REQs hold at once
	// (eventBudget).
	Budget *eventBudget
	// Clock times EOSETimeout (clock.Real{} when nil).
	Clock clock.Clock
	// Ties, when set, reads a tied second (a page all of one created_at)
	// by NIP-77 where the relay speaks it (resolveSecond).
	Ties *TieNeg
	// Resume, when set, keeps where each sweep of a filter got to on each
	// relay, for the sweeps in a context sweepcursor.With: such a sweep
	// continues where the last one got to.
	Resume *sweepcursor.Cursors
	// Covered, when set, tells a filter whose events all come in another
	// filter of the same sync (twinfilter): it is not swept.
	Covered func(ctx context.Context, c *relay.Conn, f nostr.Filter) bool

	seq atomic.Uint64
}

func (p *Pager) clock() clock.Clock {
	if p.Clock == nil {
		return clock.Real{}
	}
	return p.Clock
}

// Sync runs every filter to the end, one after another (slots is not used:
// paging is sequential per filter, and filters of one batch are few).
func (p *Pager) Sync(ctx context.Context, c *relay.Conn, fs []nostr.Filter, slots int, emit Emit) error {
	if err := p.Auth.Failed(c); err != nil {
		return err
	}
	var errs []error
	for _, f := range fs {
		if p.Covered != nil && p.Covered(ctx, c, f) {
			continue
		}
		if err := p.pageFilter(ctx, c, f, emit); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// untilText renders a page's upper bound for an error: the timestamp, not
// the pointer holding it.
func untilText(until *nostr.Timestamp) string {
	if until == nil {
		return "(no bound)"
	}
	return fmt.Sprint(int64(*until))
}

// pageFilter pages one filter backwards. A second holding more events of
// one kind than a page (ErrSaturatedSecond) is reported at the end; the
// paging goes on past it, so the rest of the history still arrives. In a
// context sweepcursor.With, with Resume set, a filter the relay was swept
// for before continues where that sweep got to, after the range the relay
// stored since it began.
func (p *Pager) pageFilter(ctx context.Context, c *relay.Conn, f nostr.Filter, emit Emit) error {
	f.LimitZero = false
	sw := p.Resume.Open(ctx, c.URL(), f, p.clock().Now())
	var until *nostr.Timestamp
	if f.Until != nil {
		u := *f.Until
		until = &u
	}
	boundary := map[string]struct{}{} // ids seen at created_at == *until
	if sw != nil && sw.Prev != nil {
		top := f
		since := sw.TopUpSince(f)
		top.Since = &since
		if f.Until == nil || since <= *f.Until {
			if err := p.sweepRange(ctx, c, top, until, map[string]struct{}{}, nil, emit); err != nil {
				return err
			}
		}
		sw.ToppedUp()
		if whole := f.Since != nil && since == *f.Since; whole || sw.Prev.Done {
			sw.Finish()
			return nil
		}
		u := sw.Prev.Until
		until = &u
		for _, id := range sw.Prev.Boundary {
			boundary[id] = struct{}{}
		}
	}
	err := p.sweepRange(ctx, c, f, until, boundary, sw, emit)
	if err == nil {
		sw.Finish()
	}
	return err
}

// sweepRange pages f backwards from until (nil: the newest), the ids of
// boundary at until seen already, to the bottom of f, recording its
// progress in sw (nil: nowhere). Progress past a saturated second is not
// recorded: a resumed sweep meets it again rather than report the filter
// complete.
func (p *Pager) sweepRange(ctx context.Context, c *relay.Conn, f nostr.Filter, until *nostr.Timestamp, boundary map[string]struct{}, sw *sweepcursor.Sweep, emit Emit) error {
	var saturated []error
	short, reported := 0, false // the first page cut below pageSize
	pageSize := p.PageSizeFor(c.URL())
	advance := func() {
		if len(saturated) == 0 && until != nil {
			sw.Advance(*until, boundary)
		}
	}
	for {
		pf := f
		pf.Until = until
		pf.Limit = pageSize
		page, outside, err := p.fetchPage(ctx, c, pf, emit)
		if err != nil {
			// What arrived before the REQ ended was handed on; the cursor
			// goes below it when it came newest first.
			var part *partialPage
			if errors.As(err, &part) && part.ordered && (until == nil || part.bottom <= *until) {
				if until == nil || part.bottom < *until {
					clear(boundary)
				}
				for _, id := range part.ids {
					boundary[id] = struct{}{}
				}
				b := part.bottom
				until = &b
				advance()
			}
			return err
		}
		if len(page) == 0 {
			if outside > 0 {
				// The relay should have gone past this boundary.
				return errors.Join(append(saturated, fmt.Errorf("%w: %d events, none below created_at %s", ErrFilterIgnored, outside, untilText(until)))...)
			}
			return errors.Join(saturated...)
		}
		minTS := pageBottom(page, pageSize)
		newCount := 0
		for _, ev := range page {
			if _, ok := boundary[ev.ID]; !ok {
				newCount++
			}
		}
		if newCount > 0 && short > 0 {
			// The previous page was cut below its limit: the relay held
			// more. Paging goes on regardless; this is for the operator.
			p.Truncation.Detected(c.URL(), truncation.Req, fmt.Sprintf("a REQ with limit %d returned %d events while more were stored below them", pageSize, short))
			short = 0
		}
		if len(page) < pageSize && !reported {
			short, reported = len(page), true
		}
		// A full page all of one second: that second may hold more than
		// the relay returns (a bulk import); it is read at once, without
		// asking the same page again.
		tied := newCount > 0 && len(page) >= pageSize && oneSecond(page)
		if newCount == 0 || tied {
			// Only already-seen events at the boundary second came back, or
			// a tied page.
			ts := minTS
			if !tied {
				if until == nil {
					return errors.Join(saturated...)
				}
				ts = *until
			}
			if len(page) >= pageSize {
				// The relay may hold more at this second than it returns.
				if err := p.resolveSecond(ctx, c, f, ts, page, pageSize, emit); err != nil {
					if !errors.Is(err, ErrSaturatedSecond) {
						return err
					}
					saturated = append(saturated, err)
				}
			}
			if ts == 0 || f.Since != nil && ts <= *f.Since {
				return errors.Join(saturated...)
			}
			next := ts - 1
			until = &next
			clear(boundary)
			advance()
			continue
		}
		if until == nil || minTS != *until {
			clear(boundary)
		}
		for _, ev := range page {
			if ev.CreatedAt == minTS {
				boundary[ev.ID] = struct{}{}
			}
		}
		t := minTS
		until = &t
		advance()
		if f.Since != nil && minTS < *f.Since {
			return errors.Join(saturated...)
		}
	}
}

// oneSecond tells whether every event of page has one created_at.
func oneSecond(page []*nostr.Event) bool {
	for _, ev := range page {
		if ev.CreatedAt != page[0].CreatedAt {
			return false
		}
	}
	return len(page) > 0
}

// pageBottom is the created_at down to which a page is known complete. The
// relay returns at most limit stored events, the newest first; events it
// delivers live during the page (published meanwhile, possibly with an old
// created_at) come on top. With more than limit events, the limit-th newest
// created_at is at or above the oldest stored one, so taking it never steps
// over a stored event (at worst the next page repeats a few). With fewer,
// the relay returned everything up to the page's until, and the oldest
// event is the bottom.
func pageBottom(page []*nostr.Event, limit int) nostr.Timestamp {
	ts := make([]nostr.Timestamp, len(page))
	for i, ev := range page {
		ts[i] = ev.CreatedAt
	}
	return truncation.BottomOf(ts, limit)
}

// pageSize is PageSize, lowered to the relay's announced max_limit.
func (p *Pager) PageSizeFor(url string) int {
	size := p.PageSize
	if p.MaxLimit != nil {
		if l := p.MaxLimit(url); l > 0 && l < size {
			size = l
		}
	}
	return max(size, 1)
}

// fetch runs one REQ to EOSE, emitting its events in dependency order
// (announcements, then roots, then the rest, oldest first).
func (p *Pager) fetch(ctx context.Context, c *relay.Conn, f nostr.Filter, emit Emit) ([]*nostr.Event, error) {
	page, _, err := p.fetchPage(ctx, c, f, emit)
	return page, err
}

// fetchPage is fetch that also counts the events dropped for not matching
// f. A REQ closed with "auth-required:" is sent again once the connection
// authenticated (NIP-42).
func (p *Pager) fetchPage(ctx context.Context, c *relay.Conn, f nostr.Filter, emit Emit) ([]*nostr.Event, int, error) {
	page, outside, err := p.fetchOnce(ctx, c, f, emit)
	if errors.Is(err, relay.ErrAuthRequired) && p.Auth != nil {
		if aerr := p.Auth.Ensure(ctx, c); aerr != nil {
			return nil, 0, errors.Join(err, aerr)
		}
		page, outside, err = p.fetchOnce(ctx, c, f, emit)
	}
	return page, outside, err
}

// reqProgressKey carries, in a REQ's context, whom fetchOnce tells how
// the REQ is getting on: progress(false) when it is sent, receives an
// event or has handed one on; progress(true) while it waits for the
// sidecar's own pipeline (the event budget, the handler taking an event),
// which is not the relay's doing. Fetch claims time out on it
// (waitClaims).
type reqProgressKey struct{}

// withReqProgress returns ctx telling fetchOnce's REQs' progress to f.
func withReqProgress(ctx context.Context, f func(held bool)) context.Context {
	return context.WithValue(ctx, reqProgressKey{}, f)
}

// reqProgressFrom returns the progress function ctx carries, or one that
// does nothing.
func reqProgressFrom(ctx context.Context) func(held bool) {
	if f, ok := ctx.Value(reqProgressKey{}).(func(bool)); ok {
		return f
	}
	return func(bool) {}
}

func (p *Pager) fetchOnce(ctx context.Context, c *relay.Conn, f nostr.Filter, emit Emit) ([]*nostr.Event, int, error) {
	if p.WaitAllowed != nil {
		if err := p.WaitAllowed(ctx); err != nil {
			return nil, 0, err
		}
	}
	units := f.Limit
	if units <= 0 {
		units = max(len(f.IDs), p.PageSizeFor(c.URL()))
	}
	progress := reqProgressFrom(ctx)
	progress(true)
	held, err := p.Budget.acquire(ctx, units)
	if err != nil {
		return nil, 0, err
	}
	defer p.Budget.release(held)
	id := fmt.Sprintf("h%d", p.seq.Add(1))
	sub, err := c.Subscribe(ctx, id, nostr.Filters{f})
	if err != nil {
		return nil, 0, err
	}
	defer sub.Close()
	progress(false)
	timer := p.clock().NewTimer(p.EOSETimeout)
	defer timer.Stop()
	var page []*nostr.Event
	var arrived []event.Incoming // the page's events as the read loop decoded them (forwarded as is)
	seen := map[string]bool{}
	match := filtermatch.New([]nostr.Filter{f}, nil).Match
	progressed := false
	outside := 0
	// handOn emits what arrived, in dependency order (and so reorders
	// page).
	handOn := func() error {
		slices.SortStableFunc(arrived, func(a, b event.Incoming) int { return publishOrder(a.Event, b.Event) })
		for i, in := range arrived {
			page[i] = in.Event
			progress(true)
			if err := emit(ctx, in); err != nil {
				return err
			}
			progress(false)
		}
		return nil
	}
	// ended hands on what arrived of a REQ that ended before its EOSE
	// and returns err as a partialPage.
	ended := func(err error) ([]*nostr.Event, int, error) {
		if len(page) == 0 {
			return nil, 0, err
		}
		part := newPartialPage(err, page)
		if eerr := handOn(); eerr != nil {
			return nil, 0, eerr
		}
		return page, outside, part
	}
	for {
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-timer.C():
			// The timeout is for a silent relay: it does not run while this
			// subscription receives events, nor while the connection waits
			// for one of our own slow consumers.
			if progressed || c.Stalled() {
				progressed = false
				timer.Reset(p.EOSETimeout)
				continue
			}
			return ended(fmt.Errorf("%w (%s)", ErrEOSETimeout, p.EOSETimeout))
		case m, ok := <-sub.Messages():
			if !ok {
				if err := c.Err(); err != nil {
					return ended(err)
				}
				return ended(ErrSubscriptionClosed)
			}
			switch m.Type {
			case relay.MsgEvent:
				// Events we did not ask for are dropped. More than the
				// limit is normal: a relay may deliver newly published
				// events live to the subscription before its EOSE (khatru
				// does), mixed into the stored results. Up to twice the
				// limit is kept (they are real events; pageBottom keeps
				// them from steering the paging); beyond that a relay is
				// flooding, and the rest is dropped.
				if !match(m.Event) {
					outside++
					continue
				}
				if f.Limit > 0 && len(page) >= 2*f.Limit {
					continue
				}
				if seen[m.Event.ID] {
					continue
				}
				seen[m.Event.ID] = true
				page = append(page, m.Event)
				arrived = append(arrived, sub.Incoming(m))
				p.Budget.hold(held, m.Size)
				progressed = true
				progress(false)
			case relay.MsgClosed:
				if p.OnClosed != nil {
					p.OnClosed(m.Reason)
				}
				if relay.ReasonPrefix(m.Reason) == relay.ReasonAuthRequired {
					return ended(fmt.Errorf("%w: %w: %s", ErrSubscriptionClosed, relay.ErrAuthRequired, m.Reason))
				}
				return ended(fmt.Errorf("%w: %s", ErrSubscriptionClosed, m.Reason))
			case relay.MsgEOSE:
				if err := handOn(); err != nil {
					return nil, 0, err
				}
				return page, outside, nil
			}
		}
	}
}

// partialPage is the error of a REQ that ended before its EOSE (the
// connection dropped, the relay closed the subscription, the EOSE timeout)
// after some of its events arrived; they were handed on. When they came
// newest first, as NIP-01 asks of a relay answering a REQ with a limit,
// the relay has sent every event of the REQ above bottom, and those of
// ids at it: a sweep goes on from there (ordered). The last event to
// arrive is not trusted for it (one published meanwhile with an old
// created_at may come live among the stored ones: it would set the
// bottom below stored events not yet sent).
type partialPage struct {
	err     error
	ordered bool
	bottom  nostr.Timestamp
	ids     []string
}

func (e *partialPage) Error() string { return e.err.Error() }
func (e *partialPage) Unwrap() error { return e.err }

// newPartialPage describes page, in the order its events arrived, ended
// by err.
func newPartialPage(err error, page []*nostr.Event) *partialPage {
	part := &partialPage{err: err}
	if len(page) < 2 {
		return part
	}
	for i := 1; i < len(page); i++ {
		if page[i].CreatedAt > page[i-1].CreatedAt {
			return part
		}
	}
	part.ordered, part.bottom = true, page[len(page)-2].CreatedAt
	for _, ev := range page {
		if ev.CreatedAt == part.bottom {
			part.ids = append(part.ids, ev.ID)
		}
	}
	return part
}

// PublishRank orders kinds so dependencies go first.
func PublishRank(kind int) int {
	switch kind {
	case 30617:
		return 0
	case 1617, 1618, 1621:
		return 1
	case 1619, 30618:
		return 2
	}
	return 3
}

// publishOrder orders a page so an announcement precedes what tags it
// and a root precedes its replies (older first within a rank).
func publishOrder(a, b *nostr.Event) int {
	if ra, rb := PublishRank(a.Kind), PublishRank(b.Kind); ra != rb {
		return ra - rb
	}
	return int(a.CreatedAt) - int(b.CreatedAt)
}

// JobMerger is a HistoricSyncer that saves round trips when one job
// carries several filters.
type JobMerger interface{ MergesJobs() bool }
