package truncation

import (
	"cmp"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// CapCount counts the stored events a subscription opened with since
// receives per filter until its EOSE, and times that EOSE out as the REQ
// pager does: Rest tells which filters' answers may have been cut at the
// relay's cap and where to page on below them. The subscription's reader
// owns it; a nil *CapCount counts nothing.
type CapCount struct {
	filters    []nostr.Filter // as sent: since, and limit the page size
	n          []int
	ts         [][]nostr.Timestamp // created_at of what each filter got, up to twice its limit
	stalled    func() bool
	clock      clock.Clock
	wait       time.Duration
	after      <-chan time.Time
	progressed bool
}

// NewCapCount counts for filters, as sent. stalled tells whether the
// connection waited for one of our own slow consumers (the EOSE wait then
// starts again); wait is the EOSE timeout.
func NewCapCount(filters []nostr.Filter, stalled func() bool, clk clock.Clock, wait time.Duration) *CapCount {
	return &CapCount{
		filters: filters, n: make([]int, len(filters)), ts: make([][]nostr.Timestamp, len(filters)),
		stalled: stalled, clock: clk, wait: wait, after: clk.After(wait),
	}
}

// Add counts ev for every filter it matches (whether or not it refers to
// one of the items: the relay counted it against its cap all the same).
func (c *CapCount) Add(ev *nostr.Event) {
	if c == nil {
		return
	}
	c.progressed = true
	for i, f := range c.filters {
		if !f.Matches(ev) {
			continue
		}
		c.n[i]++
		if len(c.ts[i]) < 2*f.Limit {
			c.ts[i] = append(c.ts[i], ev.CreatedAt)
		}
	}
}

// Timeout fires when the EOSE wait is over (never for a nil CapCount).
func (c *CapCount) Timeout() <-chan time.Time {
	if c == nil {
		return nil
	}
	return c.after
}

// Silent tells, once the EOSE wait is over, whether the relay was silent:
// not while events arrived or the connection waited for one of our own
// slow consumers (then the wait starts again).
func (c *CapCount) Silent() bool {
	if c.progressed || c.stalled() {
		c.progressed = false
		c.after = c.clock.After(c.wait)
		return false
	}
	return true
}

// Rest returns the filters whose answer may have been cut (reachedCap of
// what each got and its limit), each bounded by until = the bottom of
// what it got (BottomOf): a pager fetches what lies below.
func (c *CapCount) Rest(reachedCap func(n, limit int) bool) []nostr.Filter {
	var out []nostr.Filter
	for i, f := range c.filters {
		if !reachedCap(c.n[i], f.Limit) {
			continue
		}
		until := BottomOf(c.ts[i], f.Limit)
		f.Until = &until
		out = append(out, f)
	}
	return out
}

// BottomOf is the created_at down to which a page of at most limit stored
// events, the newest first, is known complete, from its events' created_at
// values (ts is reordered). Events delivered live during the page come on
// top: with more than limit, the limit-th newest is at or above the oldest
// stored one, so taking it never steps over a stored event (at worst the
// next page repeats a few). With fewer, the relay returned everything up
// to the page's until, and the oldest is the bottom.
func BottomOf(ts []nostr.Timestamp, limit int) nostr.Timestamp {
	if limit <= 0 || len(ts) <= limit {
		return slices.Min(ts)
	}
	slices.SortFunc(ts, func(a, b nostr.Timestamp) int { return cmp.Compare(b, a) })
	return ts[limit-1]
}
