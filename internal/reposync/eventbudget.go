package reposync

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// eventBudget bounds the events that historic REQs to remote relays hold at
// once (Config.HistoricMaxEvents): a page or a fetch by id keeps its events
// until its EOSE, then hands them on in dependency order. A REQ takes as
// many units as it may return (its limit, or its ids) before it is sent and
// gives them back once its events are handed on, so memory is bounded by
// events, not by how many jobs run: distant relays may run more jobs (whose
// negentropy rounds hold no events) without holding more pages.
type eventBudget struct {
	sem  *semaphore.Weighted // first come, first served
	size int
	used atomic.Int64
}

func newEventBudget(size int) *eventBudget {
	return &eventBudget{sem: semaphore.NewWeighted(int64(size)), size: size}
}

// acquire takes n units (at most the whole budget), waiting until they are
// free or ctx ends. It returns what to give back. A nil budget bounds
// nothing.
func (b *eventBudget) acquire(ctx context.Context, n int) (int, error) {
	if b == nil || n <= 0 {
		return 0, nil
	}
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, int64(n)); err != nil {
		return 0, err
	}
	b.used.Add(int64(n))
	return n, nil
}

// release gives back n units taken by acquire.
func (b *eventBudget) release(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.used.Add(-int64(n))
	b.sem.Release(int64(n))
}

// inUse is how many units are taken.
func (b *eventBudget) inUse() int {
	if b == nil {
		return 0
	}
	return int(b.used.Load())
}
