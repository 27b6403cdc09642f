package health

import (
	"sync"
	"testing"
	"time"
)

func TestManualClock(t *testing.T) {
	c := NewManualClock(epoch)
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

func TestManualClockConcurrent(t *testing.T) {
	c := NewManualClock(epoch)
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

func TestRealClock(t *testing.T) {
	var c Clock = RealClock{}
	before := time.Now()
	got := c.Now()
	if got.Before(before) || got.Sub(before) > time.Minute {
		t.Fatalf("RealClock.Now = %s, wall clock %s", got, before)
	}
	select {
	case <-RealClock{}.After(time.Millisecond):
	case <-time.After(10 * time.Second):
		t.Fatal("RealClock.After(1ms) did not fire within 10s")
	}
}
