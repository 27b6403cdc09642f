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
