package purgatory

import "time"

// Clock is the time source; tests inject a manual one.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or synchronously for a manual
	// clock) once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports false if it already ran or was stopped.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
