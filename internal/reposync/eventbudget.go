package reposync

import (
	"context"
	"sync"
)

// eventBudget bounds the events that historic REQs to remote relays hold at
// once (Config.HistoricMaxEvents): a page or a fetch by id keeps its events
// until its EOSE, then hands them on in dependency order. A REQ takes as
// many units as it may return (its limit, or its ids) before it is sent and
// gives them back once its events are handed on, so memory is bounded by
// events, not by how many jobs run: distant relays may run more jobs (whose
// negentropy rounds hold no events) without holding more pages.
type eventBudget struct {
	mu   sync.Mutex
	size int
	free int
	back chan struct{} // closed when units come back
}

func newEventBudget(size int) *eventBudget {
	return &eventBudget{size: size, free: size, back: make(chan struct{})}
}

// acquire takes n units (at most the whole budget), waiting until they are
// free or ctx ends. It returns what to give back. A nil budget bounds
// nothing.
func (b *eventBudget) acquire(ctx context.Context, n int) (int, error) {
	if b == nil || n <= 0 {
		return 0, nil
	}
	n = min(n, b.size)
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return n, nil
		}
		back := b.back
		b.mu.Unlock()
		select {
		case <-back:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// release gives back n units taken by acquire.
func (b *eventBudget) release(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.back)
	b.back = make(chan struct{})
	b.mu.Unlock()
}

// inUse is how many units are taken.
func (b *eventBudget) inUse() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.free
}
