// Package clock is the one time source of grasp-sync's components: the
// wall clock in production, a Manual clock that only moves when a test
// tells it to.
//
// The engine's tick, the health tracker's, the batch windows, the held
// events' recheck, the publisher's OK timeout, holds and redials, the
// EOSE and negentropy timeouts and the relay rate limits all run on it.
// What stays on the wall clock is the transport under a connection:
// socket deadlines, the websocket keepalive ping, a dial's context
// deadline, which the kernel and the libraries time themselves, and the
// few milliseconds a socket read waits for more to arrive (relay.Options
// ReadPause).
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
	// NewTimer returns a one-shot timer whose channel receives the time
	// once d has passed; it can be stopped and reset, like time.Timer.
	NewTimer(d time.Duration) Alarm
	// NewTicker returns a ticker whose channel receives the time every d
	// (d > 0); like time.Ticker it drops the ticks a slow reader misses.
	NewTicker(d time.Duration) Ticker
}

// Alarm is a one-shot timer with a channel (time.Timer's behaviour since
// Go 1.23: after Stop or Reset returns, no value from before is received).
type Alarm interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now; it reports whether it was
	// pending.
	Reset(d time.Duration) bool
	// Stop cancels the timer; it reports whether it was pending.
	Stop() bool
}

// Ticker is a repeating timer with a channel.
type Ticker interface {
	C() <-chan time.Time
	Stop()
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

// NewTimer returns time.NewTimer(d).
func (Real) NewTimer(d time.Duration) Alarm { return realAlarm{time.NewTimer(d)} }

// NewTicker returns time.NewTicker(d).
func (Real) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realAlarm struct{ t *time.Timer }

func (a realAlarm) C() <-chan time.Time        { return a.t.C }
func (a realAlarm) Reset(d time.Duration) bool { return a.t.Reset(d) }
func (a realAlarm) Stop() bool                 { return a.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (k realTicker) C() <-chan time.Time { return k.t.C }
func (k realTicker) Stop()               { k.t.Stop() }

// Shifted returns the wall clock moved so that it reads at now, and runs on
// from there: its timers are the wall clock's. Tests use it where a time
// matters (the upper end of a filter) and timeouts must still pass.
func Shifted(at time.Time) Clock { return shifted{offset: time.Until(at)} }

type shifted struct {
	Real
	offset time.Duration
}

func (c shifted) Now() time.Time { return time.Now().Add(c.offset) }

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
	ch      chan time.Time // After, NewTimer, NewTicker (buffered: 1)
	f       func()         // AfterFunc
	period  time.Duration  // NewTicker: due again this much later
	stopped bool
	listed  bool // in c.waiters (a stopped one stays until the next Advance)
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
// every After, timer and ticker channel whose deadline is now reached (a
// ticker once, however many periods passed, and again a period after its
// last due time) and runs, in deadline order and on the caller's
// goroutine, every AfterFunc that became due.
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
			w.listed = false
		case w.at.After(now):
			kept = append(kept, w)
		case w.period > 0:
			offer(w.ch, now)
			w.at = w.at.Add((now.Sub(w.at)/w.period + 1) * w.period)
			kept = append(kept, w)
		case w.ch != nil:
			w.stopped, w.listed = true, false
			offer(w.ch, now)
		default:
			w.stopped, w.listed = true, false
			due = append(due, w)
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *manualWaiter) int { return a.at.Compare(b.at) })
	for _, w := range due {
		w.f()
	}
}

// offer sends t on ch unless ch already holds a value (ch is buffered).
func offer(ch chan time.Time, t time.Time) {
	select {
	case ch <- t:
	default:
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
	c.waiters = append(c.waiters, &manualWaiter{c: c, at: c.now.Add(d), ch: ch, listed: true})
	return ch
}

// AfterFunc arranges for Advance to call f once it has moved the clock d
// or more past the current time.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &manualWaiter{c: c, at: c.now.Add(d), f: f, listed: true}
	c.waiters = append(c.waiters, w)
	return w
}

// NewTimer returns a timer that fires once Advance has moved the clock d
// or more past the current time. d ≤ 0 fires at once.
func (c *Manual) NewTimer(d time.Duration) Alarm {
	a := &manualAlarm{c: c, ch: make(chan time.Time, 1)}
	a.Reset(d)
	return a
}

// NewTicker returns a ticker that fires each time Advance moves the clock
// past its next due time, due every d (d ≤ 0 panics, as time.NewTicker).
func (c *Manual) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &manualWaiter{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1), period: d, listed: true}
	c.waiters = append(c.waiters, w)
	return manualTicker{w}
}

type manualAlarm struct {
	c  *Manual
	ch chan time.Time
	w  *manualWaiter // the pending deadline, nil before the first Reset
}

func (a *manualAlarm) C() <-chan time.Time { return a.ch }

func (a *manualAlarm) Reset(d time.Duration) bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	was := a.stopLocked()
	if d <= 0 {
		a.ch <- a.c.now // drained by stopLocked
		return was
	}
	if a.w != nil && a.w.listed {
		// Still in the list (pending, or stopped since the last
		// Advance): moved, so that resets do not pile up waiters.
		a.w.at, a.w.stopped = a.c.now.Add(d), false
		return was
	}
	a.w = &manualWaiter{c: a.c, at: a.c.now.Add(d), ch: a.ch, listed: true}
	a.c.waiters = append(a.c.waiters, a.w)
	return was
}

func (a *manualAlarm) Stop() bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.stopLocked()
}

// stopLocked cancels the pending deadline and drops a value not yet
// received.
func (a *manualAlarm) stopLocked() bool {
	was := a.w != nil && !a.w.stopped
	if a.w != nil {
		a.w.stopped = true
	}
	select {
	case <-a.ch:
	default:
	}
	return was
}

type manualTicker struct{ w *manualWaiter }

func (k manualTicker) C() <-chan time.Time { return k.w.ch }
func (k manualTicker) Stop() {
	k.w.c.mu.Lock()
	defer k.w.c.mu.Unlock()
	k.w.stopped = true
	select {
	case <-k.w.ch:
	default:
	}
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
