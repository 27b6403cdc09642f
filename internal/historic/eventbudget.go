package historic

import (
	"context"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// assumedEventBytes is what a historic event is expected to weigh (its
// frame as it arrived) before any has: a NIP-34 patch with a small diff.
const assumedEventBytes = 2048

// avgHorizon is how many of the latest events the average of eventBudget
// follows, roughly.
const avgHorizon = 4096

// floorEvents is how many events a REQ is charged for before it is sent
// (at the average size), whatever it may return: a Layer 3 filter often
// returns a handful, a bulk page its limit.
const floorEvents = 32

// eventBudget bounds the events that historic REQs to remote relays hold at
// once, by count (Config.HistoricMaxEvents) and by bytes
// (Config.HistoricMaxBytes, the frames as they arrived): a page or a fetch
// by id keeps its events until its EOSE, then hands them on in dependency
// order.
//
// Count: a REQ takes as many units as it may return (its limit, or its
// ids) before it is sent and gives them back once its events are handed
// on, so memory is bounded by events, not by how many jobs run: distant
// relays may run more jobs (whose negentropy rounds hold no events)
// without holding more pages.
//
// Bytes: a REQ is charged the bytes of the events it holds, at least
// floorEvents at the average event size (the average of the events REQs
// held so far; assumedEventBytes before the first), and is sent only while
// the charges of the others leave room for that floor. Charging what
// arrives rather than reserving the limit up front lets many small REQs
// (Layer 3 filters 100 ms away) run at once, while pages of 2 kB patches
// stop new REQs as soon as they fill the bound; REQs already sent may take
// it over by what they receive (at most their limits, which the count
// bounds).
type eventBudget struct {
	sem  *semaphore.Weighted // first come, first served
	size int
	used atomic.Int64

	maxBytes int64 // 0: no byte bound
	mu       sync.Mutex
	charged  int64         // the REQs' charges
	held     int64         // bytes of the events REQs hold
	freed    chan struct{} // closed when charges go down; nil: nobody waits
	// avg is the bytes per event a REQ's floor is charged at: a moving
	// average of the events held.
	avg atomic.Int64
}

// NewEventBudget bounds size events and maxBytes bytes (0: no byte bound).
func NewEventBudget(size int, maxBytes int64) *eventBudget {
	b := &eventBudget{sem: semaphore.NewWeighted(int64(size)), size: size, maxBytes: maxBytes}
	b.avg.Store(assumedEventBytes)
	return b
}

// budgetGrant is what one REQ took: events and a byte charge to give back.
type budgetGrant struct {
	events int
	charge int64 // bytes charged: max(floor, held)
	held   int64 // bytes of the events received so far
	got    int   // events received so far
}

// acquire takes n event units (at most the whole budget) and charges the
// REQ its floor of bytes, waiting until both are free or ctx ends. It
// returns what to give back. A nil budget bounds nothing.
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
	if b.maxBytes <= 0 {
		return g, nil
	}
	floor := min(int64(min(n, floorEvents))*b.avg.Load(), b.maxBytes)
	for {
		b.mu.Lock()
		if b.charged == 0 || b.charged+floor <= b.maxBytes {
			b.charged += floor
			g.charge = floor
			b.mu.Unlock()
			return g, nil
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			b.release(g)
			return nil, ctx.Err()
		}
	}
}

// hold counts one event of size bytes received by the REQ of g: its charge
// grows once the events it holds weigh more than its floor.
func (b *eventBudget) hold(g *budgetGrant, size int) {
	if b == nil || g == nil {
		return
	}
	g.held += int64(size)
	g.got++
	b.mu.Lock()
	b.held += int64(size)
	if b.maxBytes > 0 && g.held > g.charge {
		b.charged += g.held - g.charge
		g.charge = g.held
	}
	b.mu.Unlock()
}

// release gives back what acquire took and hold counted, and moves the
// average towards the events g held.
func (b *eventBudget) release(g *budgetGrant) {
	if b == nil || g == nil {
		return
	}
	if g.got > 0 {
		per := g.held / int64(g.got)
		// a REQ weighs in by its events, over the last avgHorizon
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
	}
	b.mu.Lock()
	b.held -= g.held
	if g.charge > 0 {
		b.charged -= g.charge
		if b.freed != nil {
			close(b.freed)
			b.freed = nil
		}
	}
	b.mu.Unlock()
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

// bytesCharged is the REQs' byte charges; bytesHeld the bytes of the
// events they hold.
func (b *eventBudget) bytesCharged() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.charged
}

func (b *eventBudget) bytesHeld() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}
