// Package clock is the one time source of grasp-sync's components: the
// wall clock in production, a Manual clock that only moves when a test
// tells it to.
package clock

import (
	"slices"
	"sync"
	"time"
)

// Clock tells the time and waits on it. Components read time only through
// it, so tests can walk a 24 hour rule in microseconds.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f in its own goroutine (synchronously, from Advance,
	// for a Manual clock) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports false if it already ran or was
	// stopped.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// AfterFunc returns time.AfterFunc(d, f).
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Manual is a Clock that only moves when told to. It is safe for
// concurrent use and meant for tests in any package: Advance moves time
// forward, fires the channels returned by After and runs the functions
// given to AfterFunc whose deadline passed.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*manualWaiter
}

type manualWaiter struct {
	c       *Manual
	at      time.Time
	ch      chan time.Time // After
	f       func()         // AfterFunc
	stopped bool
}

var _ Clock = (*Manual)(nil)

// NewManual returns a Manual clock set to start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start}
}

// Now returns the clock's current time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (negative d is ignored), fires
// every After channel whose deadline is now reached and runs, in deadline
// order and on the caller's goroutine, every AfterFunc that became due.
func (c *Manual) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var due []*manualWaiter
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		switch {
		case w.stopped:
		case !w.at.After(now):
			w.stopped = true
			due = append(due, w)
		default:
			kept = append(kept, w)
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *manualWaiter) int { return a.at.Compare(b.at) })
	for _, w := range due {
		if w.ch != nil {
			w.ch <- now // buffered, never blocks
		} else {
			w.f()
		}
	}
}

// After returns a channel that receives the clock's time once Advance has
// moved it d or more past the current time. d ≤ 0 fires at once.
func (c *Manual) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, &manualWaiter{c: c, at: c.now.Add(d), ch: ch})
	return ch
}

// AfterFunc arranges for Advance to call f once it has moved the clock d
// or more past the current time.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &manualWaiter{c: c, at: c.now.Add(d), f: f}
	c.waiters = append(c.waiters, w)
	return w
}

// Stop cancels a pending AfterFunc.
func (w *manualWaiter) Stop() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	was := !w.stopped
	w.stopped = true
	return was
}

// Waiters returns how many After channels and AfterFunc calls have not
// fired (or been stopped) yet. Tests poll it to know that the code under
// test is blocked on the clock before calling Advance.
func (c *Manual) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, w := range c.waiters {
		if !w.stopped {
			n++
		}
	}
	return n
}

// Deadlines returns the times at which the pending After channels and
// AfterFunc calls are due, so that a test can wait for a specific timer.
func (c *Manual) Deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at []time.Time
	for _, w := range c.waiters {
		if !w.stopped {
			at = append(at, w.at)
		}
	}
	return at
}
