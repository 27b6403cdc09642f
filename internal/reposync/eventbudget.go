package reposync

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// assumedEventBytes is what a historic event is expected to weigh (its
// frame as it arrived) before any has: a NIP-34 patch with a small diff.
const assumedEventBytes = 2048

// avgHorizon is how many of the latest events the average of eventBudget
// follows, roughly.
const avgHorizon = 4096

// eventBudget bounds the events that historic REQs to remote relays hold at
// once, by count (Config.HistoricMaxEvents) and by bytes
// (Config.HistoricMaxBytes, the frames as they arrived): a page or a fetch
// by id keeps its events until its EOSE, then hands them on in dependency
// order. A REQ takes as many event units as it may return (its limit, or
// its ids) and as many bytes as that many events weigh on average (the
// average of the events REQs held so far; assumedEventBytes before the
// first) before it is sent, and gives both back once its events are handed
// on. Memory is thus bounded by what events weigh, not by how many jobs
// run: distant relays may run more jobs (whose negentropy rounds hold no
// events) without holding more pages, and relays of 2 kB patches get fewer
// pages at once than relays of reactions. A page of events heavier than
// the average holds more than it reserved (at most its limit of events,
// which the count bounds); the average then follows.
type eventBudget struct {
	sem  *semaphore.Weighted // first come, first served
	size int
	used atomic.Int64

	bytes    *semaphore.Weighted // nil: no byte bound
	maxBytes int64
	// reserved is the bytes taken; held the bytes of the events REQs
	// hold right now.
	reserved, held atomic.Int64
	// avg is the bytes per event a REQ reserves: a moving average of the
	// events held.
	avg atomic.Int64
}

// newEventBudget bounds size events and maxBytes bytes (0: no byte bound).
func newEventBudget(size int, maxBytes int64) *eventBudget {
	b := &eventBudget{sem: semaphore.NewWeighted(int64(size)), size: size, maxBytes: maxBytes}
	if maxBytes > 0 {
		b.bytes = semaphore.NewWeighted(maxBytes)
	}
	b.avg.Store(assumedEventBytes)
	return b
}

// budgetGrant is what one REQ took: events and bytes to give back.
type budgetGrant struct {
	events int
	bytes  int64
	held   int64 // bytes of the events received so far
	got    int   // events received so far
}

// acquire takes n event units (at most the whole budget) and their
// expected bytes (at most the byte bound), waiting until they are free or
// ctx ends. It returns what to give back. A nil budget bounds nothing.
func (b *eventBudget) acquire(ctx context.Context, n int) (*budgetGrant, error) {
	if b == nil || n <= 0 {
		return &budgetGrant{}, nil
	}
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, int64(n)); err != nil {
		return nil, err
	}
	g := &budgetGrant{events: n}
	b.used.Add(int64(n))
	if b.bytes != nil {
		want := min(int64(n)*b.avg.Load(), b.maxBytes)
		if err := b.bytes.Acquire(ctx, want); err != nil {
			b.release(g)
			return nil, err
		}
		g.bytes = want
		b.reserved.Add(want)
	}
	return g, nil
}

// hold counts one event of size bytes received by the REQ of g.
func (b *eventBudget) hold(g *budgetGrant, size int) {
	if b == nil || g == nil {
		return
	}
	g.held += int64(size)
	g.got++
	b.held.Add(int64(size))
}

// release gives back what acquire took and what hold counted, and moves
// the average towards the events g held.
func (b *eventBudget) release(g *budgetGrant) {
	if b == nil || g == nil {
		return
	}
	if g.got > 0 {
		per := g.held / int64(g.got)
		// a page weighs in by its events, over the last avgHorizon
		w := min(int64(g.got), avgHorizon/2)
		for {
			old := b.avg.Load()
			next := old + (per-old)*w/avgHorizon
			if next == old && per != old {
				next += sign(per - old)
			}
			if b.avg.CompareAndSwap(old, max(1, next)) {
				break
			}
		}
		b.held.Add(-g.held)
	}
	if g.bytes > 0 {
		b.reserved.Add(-g.bytes)
		b.bytes.Release(g.bytes)
	}
	if g.events > 0 {
		b.used.Add(-int64(g.events))
		b.sem.Release(int64(g.events))
	}
	*g = budgetGrant{}
}

func sign(v int64) int64 {
	if v < 0 {
		return -1
	}
	return 1
}

// inUse is how many event units are taken.
func (b *eventBudget) inUse() int {
	if b == nil {
		return 0
	}
	return int(b.used.Load())
}

// bytesReserved is how many bytes are taken; bytesHeld the bytes of the
// events REQs hold.
func (b *eventBudget) bytesReserved() int64 {
	if b == nil {
		return 0
	}
	return b.reserved.Load()
}

func (b *eventBudget) bytesHeld() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load()
}
