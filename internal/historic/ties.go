package historic

import (
	"context"
	"errors"
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
)

// TieNeg lets a Pager read a tied second (more events at one created_at
// than a REQ returns) by NIP-77 where the relay speaks it.
type TieNeg struct {
	// Options are the sessions' options.
	Options neg.Options
	// Support, when set, tells what is known of a relay's NIP-77 support
	// ("supported", "unsupported", "unknown": NegSyncer.Support); a relay
	// known not to speak it is not asked.
	Support func(url string) string
	// SetSupport, when set, is told what a session learnt of it.
	SetSupport func(url string, ok bool)
}

// maxTieDepth bounds how often one tied second is split (each split
// narrows the filter: parts of a tag's values or of the authors, one kind
// each); it is a guard, the narrowing ends first.
const maxTieDepth = 24

// resolveSecond reads every event of f at second ts after a REQ page of
// limit events all at ts came back (the relay may hold more there than it
// returns per REQ; page is that page). It first reconciles that second by
// NIP-77 where the relay speaks it; a set that may be cut too (its size a
// common cap) or a relay without NIP-77 makes it split the filter —
// parts of a tag's values, one kind each, parts of the authors, the
// authors seen at that second when f names none — and read each part the
// same way (by REQ alone once a NIP-77 set was cut), until no part is
// cut. Every step asks a narrower filter than
// the one before, so it ends, and each part is asked once: it can neither
// loop nor skip a part. What stays cut (one kind, one tag value and one
// author still more than a page, or events by authors never seen, which
// no REQ can name) is ErrSaturatedSecond, and the relay's cut second is
// recorded (Truncation.TiesCut) until a later sweep reads it whole.
func (p *Pager) resolveSecond(ctx context.Context, c *relay.Conn, f nostr.Filter, ts nostr.Timestamp, page []*nostr.Event, limit int, emit Emit) error {
	sf := f
	sf.Since, sf.Until = &ts, &ts
	sf.Limit, sf.LimitZero = 0, false
	var atTS []*nostr.Event
	for _, ev := range page {
		if ev.CreatedAt == ts {
			atTS = append(atTS, ev)
		}
	}
	err := p.resolveTie(ctx, c, sf, atTS, limit, emit, 0, false)
	switch {
	case err == nil:
		p.Truncation.TieResolved(c.URL(), ts)
	case errors.Is(err, ErrSaturatedSecond) && ctx.Err() == nil:
		p.Truncation.TieCut(c.URL(), ts, err.Error())
	}
	return err
}

// resolveTie reads every event of sf (one second) given known, events of
// sf already received (a REQ page of limit events: possibly cut). noNeg:
// a wider filter's NIP-77 set at this second came back cut (or the relay
// does not speak it); a narrower one's would be cut the same way, so it is
// not asked.
func (p *Pager) resolveTie(ctx context.Context, c *relay.Conn, sf nostr.Filter, known []*nostr.Event, limit int, emit Emit, depth int, noNeg bool) error {
	if !noNeg {
		done, err := p.tieByNeg(ctx, c, sf, known, limit, emit)
		if err != nil || done {
			return err
		}
		noNeg = true
	}
	children, lossy := truncation.SplitTie(sf, known)
	if len(children) == 0 || depth >= maxTieDepth {
		return fmt.Errorf("%w: at least %d events at %d for %s, which cannot be split further", ErrSaturatedSecond, len(known), int64(*sf.Since), truncation.FilterText(sf))
	}
	var errs []error
	for _, cf := range children {
		cf.Limit = limit
		page, err := p.fetch(ctx, c, cf, emit)
		if err != nil {
			return err
		}
		if len(page) < limit {
			continue // the whole part
		}
		cf.Limit = 0
		if err := p.resolveTie(ctx, c, cf, page, limit, emit, depth+1, noNeg); err != nil {
			if !errors.Is(err, ErrSaturatedSecond) {
				return err
			}
			errs = append(errs, err)
		}
	}
	// Every kind asked read whole: events of other kinds at that second,
	// which no REQ can ask for apart, are not known to exist, so the
	// second is not counted as cut for them.
	if lossy != "" && (lossy != truncation.OtherKindsUnasked || len(errs) > 0) {
		errs = append(errs, fmt.Errorf("%w: at least %d events at %d for %s; %s", ErrSaturatedSecond, len(known), int64(*sf.Since), truncation.FilterText(sf), lossy))
	}
	return errors.Join(errs...)
}

// tieByNeg reconciles sf (one second) by NIP-77 against known and fetches
// what the relay holds beyond it. It reports done when the relay's set
// was read whole: the session ended, every id it named arrived, and its
// size is not one a cut set would have (no larger than the full REQ page,
// a common cap, or the relay was caught cutting NIP-77 sets). Any failure leaves the second to splitting.
func (p *Pager) tieByNeg(ctx context.Context, c *relay.Conn, sf nostr.Filter, known []*nostr.Event, limit int, emit Emit) (bool, error) {
	t := p.Ties
	url := c.URL()
	if t == nil || t.Support != nil && t.Support(url) == "unsupported" {
		return false, nil
	}
	items := make([]neg.Item, 0, len(known))
	for _, ev := range known {
		if it, err := neg.ItemFromHex(ev.CreatedAt, ev.ID); err == nil {
			items = append(items, it)
		}
	}
	opts := t.Options
	if opts.Clock == nil {
		opts.Clock = p.clock()
	}
	res, err := neg.Reconcile(ctx, c, fmt.Sprintf("t%d", p.seq.Add(1)), sf, neg.NewStorage(items), opts)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if errors.Is(err, neg.ErrUnsupported) && t.SetSupport != nil {
			t.SetSupport(url, false)
		}
		return false, nil
	}
	if t.SetSupport != nil {
		t.SetSupport(url, true)
	}
	got := 0
	for s := 0; s < len(res.Need); s += limit {
		ids := res.Need[s:min(s+limit, len(res.Need))]
		page, err := p.fetch(ctx, c, nostr.Filter{IDs: ids, Limit: len(ids)}, emit)
		if err != nil {
			return false, err
		}
		got += len(page)
	}
	maxLimit := 0
	if p.MaxLimit != nil {
		maxLimit = p.MaxLimit(url)
	}
	size := len(items) - len(res.Have) + len(res.Need)
	// A set no larger than the REQ page, which was full, may be cut at
	// the same size (khatru on its slicestore caps both at 500).
	if got < len(res.Need) || size <= len(known) || isCommonCap(size, maxLimit) || p.Truncation.Truncates(url, truncation.Negentropy) {
		return false, nil
	}
	return true, nil
}

// OnlyCutTies tells whether err consists of ErrSaturatedSecond alone
// (joined and wrapped any number of times): every filter was read but for
// seconds that stay cut. Retrying would ask the same again.
func OnlyCutTies(err error) bool {
	if err == nil {
		return false
	}
	if err == ErrSaturatedSecond {
		return true
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		for _, e := range errs {
			if !OnlyCutTies(e) {
				return false
			}
		}
		return len(errs) > 0
	}
	if u := errors.Unwrap(err); u != nil {
		return OnlyCutTies(u)
	}
	return false
}
