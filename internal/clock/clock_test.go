package clock

import (
	"sync"
	"testing"
	"time"
)

func TestManual(t *testing.T) {
	c := NewManual(epoch)
	if !c.Now().Equal(epoch) {
		t.Fatalf("Now = %s, want %s", c.Now(), epoch)
	}
	a := c.After(time.Second)
	b := c.After(2 * time.Second)
	now := c.After(0)
	select {
	case got := <-now:
		if !got.Equal(epoch) {
			t.Fatalf("After(0) fired with %s", got)
		}
	default:
		t.Fatal("After(0) did not fire at once")
	}
	if got := c.Waiters(); got != 2 {
		t.Fatalf("Waiters = %d, want 2", got)
	}
	c.Advance(-time.Hour) // ignored
	c.Advance(999 * time.Millisecond)
	select {
	case <-a:
		t.Fatal("After(1s) fired early")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case got := <-a:
		if want := epoch.Add(time.Second); !got.Equal(want) {
			t.Fatalf("After(1s) fired with %s, want %s", got, want)
		}
	default:
		t.Fatal("After(1s) did not fire")
	}
	if got := c.Waiters(); got != 1 {
		t.Fatalf("Waiters = %d, want 1", got)
	}
	c.Advance(time.Hour)
	if got := <-b; !got.Equal(epoch.Add(time.Hour + time.Second)) {
		t.Fatalf("After(2s) fired with %s", got)
	}
	if got := c.Waiters(); got != 0 {
		t.Fatalf("Waiters = %d, want 0", got)
	}
}

func TestManualConcurrent(t *testing.T) {
	c := NewManual(epoch)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-c.After(time.Minute)
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiters() < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d waiters registered", c.Waiters())
		}
		time.Sleep(time.Millisecond)
	}
	c.Advance(time.Minute)
	wg.Wait()
}

func TestReal(t *testing.T) {
	var c Clock = Real{}
	before := time.Now()
	got := c.Now()
	if got.Before(before) || got.Sub(before) > time.Minute {
		t.Fatalf("Real.Now = %s, wall clock %s", got, before)
	}
	select {
	case <-Real{}.After(time.Millisecond):
	case <-time.After(10 * time.Second):
		t.Fatal("Real.After(1ms) did not fire within 10s")
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestManualAfterFunc(t *testing.T) {
	c := NewManual(epoch)
	var ran []int
	c.AfterFunc(2*time.Second, func() { ran = append(ran, 2) })
	c.AfterFunc(time.Second, func() { ran = append(ran, 1) })
	stopped := c.AfterFunc(time.Second, func() { ran = append(ran, 0) })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports true once, then false")
	}
	if got := c.Waiters(); got != 2 {
		t.Fatalf("Waiters = %d, want 2", got)
	}
	c.Advance(3 * time.Second)
	if len(ran) != 2 || ran[0] != 1 || ran[1] != 2 {
		t.Fatalf("ran %v, want [1 2] in deadline order", ran)
	}
	if c.Waiters() != 0 {
		t.Fatalf("Waiters = %d after Advance", c.Waiters())
	}
}

// recv reports the value waiting on ch, if any.
func recv(ch <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestManualTimer(t *testing.T) {
	c := NewManual(epoch)
	a := c.NewTimer(time.Second)
	c.Advance(999 * time.Millisecond)
	if _, ok := recv(a.C()); ok {
		t.Fatal("timer fired early")
	}
	// Reset moves the deadline; the old one no longer fires.
	if !a.Reset(time.Second) {
		t.Fatal("Reset of a pending timer reported false")
	}
	c.Advance(time.Millisecond)
	if _, ok := recv(a.C()); ok {
		t.Fatal("the deadline before Reset fired")
	}
	c.Advance(time.Second)
	// The value is the clock's time after the Advance that fired it.
	if got, ok := recv(a.C()); !ok || !got.Equal(epoch.Add(2*time.Second)) {
		t.Fatalf("timer fired %v with %s, want %s", ok, got, epoch.Add(2*time.Second))
	}
	if a.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	// A value not received before Stop or Reset is dropped.
	a.Reset(time.Second)
	c.Advance(time.Second)
	a.Reset(time.Hour)
	if _, ok := recv(a.C()); ok {
		t.Fatal("a value from before Reset was received")
	}
	if !a.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	c.Advance(2 * time.Hour)
	if _, ok := recv(a.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	a.Reset(0)
	if _, ok := recv(a.C()); !ok {
		t.Fatal("Reset(0) did not fire at once")
	}
	if got := c.Waiters(); got != 0 {
		t.Fatalf("Waiters = %d, want 0", got)
	}
}

func TestManualTicker(t *testing.T) {
	c := NewManual(epoch)
	k := c.NewTicker(time.Second)
	c.Advance(500 * time.Millisecond)
	if _, ok := recv(k.C()); ok {
		t.Fatal("ticker fired early")
	}
	c.Advance(500 * time.Millisecond)
	if got, ok := recv(k.C()); !ok || !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("first tick %v at %s", ok, got)
	}
	// A day at once: one tick, the missed ones dropped, the next one due
	// a period after the last due time.
	c.Advance(24 * time.Hour)
	if _, ok := recv(k.C()); !ok {
		t.Fatal("no tick after a day")
	}
	if _, ok := recv(k.C()); ok {
		t.Fatal("more than one tick waiting")
	}
	if d := c.Deadlines(); len(d) != 1 || !d[0].Equal(epoch.Add(24*time.Hour+2*time.Second)) {
		t.Fatalf("next tick due %v, want %s", d, epoch.Add(24*time.Hour+2*time.Second))
	}
	c.Advance(time.Second) // not received before Stop: dropped
	k.Stop()
	if _, ok := recv(k.C()); ok {
		t.Fatal("a tick from before Stop was received")
	}
	c.Advance(time.Hour)
	if _, ok := recv(k.C()); ok {
		t.Fatal("a stopped ticker ticked")
	}
	if got := c.Waiters(); got != 0 {
		t.Fatalf("Waiters = %d, want 0", got)
	}
}

func TestRealTimerAndTicker(t *testing.T) {
	var c Clock = Real{}
	a := c.NewTimer(time.Millisecond)
	<-a.C()
	if a.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
	k := c.NewTicker(time.Millisecond)
	<-k.C()
	<-k.C()
	k.Stop()
}

// A timer reset many times between two Advances keeps one waiter.
func TestManualTimerResetsDoNotPileUp(t *testing.T) {
	c := NewManual(epoch)
	a := c.NewTimer(time.Second)
	for range 1000 {
		a.Reset(time.Second)
	}
	a.Stop()
	a.Reset(time.Second)
	c.mu.Lock()
	n := len(c.waiters)
	c.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d waiters after 1,000 resets, want 1", n)
	}
	c.Advance(time.Second)
	if _, ok := recv(a.C()); !ok {
		t.Fatal("the reset timer did not fire")
	}
	a.Reset(time.Second) // fired and dropped: a new waiter
	if got := c.Waiters(); got != 1 {
		t.Fatalf("Waiters = %d, want 1", got)
	}
}

func TestShifted(t *testing.T) {
	c := Shifted(epoch)
	if d := c.Now().Sub(epoch); d < 0 || d > time.Minute {
		t.Fatalf("Shifted(epoch).Now() is %s after epoch", d)
	}
	<-c.After(time.Millisecond) // the wall clock's timers
}
