package throttle

import (
	"sync"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/testkit"
)

func newManualClock() *clock.Manual {
	return clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func TestDomainRoundRobin(t *testing.T) {
	d := &domainState{queued: map[string]*queuedIdentifier{}}
	add := func(id string) {
		d.queued[id] = &queuedIdentifier{tried: map[string]bool{}}
		d.order = append(d.order, id)
	}
	add("id1")
	add("id2")
	add("id3")
	for _, want := range []string{"id1", "id2", "id3", "id1"} {
		got := d.nextReady()
		if got != want {
			t.Fatalf("nextReady = %q, want %q", got, want)
		}
		d.queued[got].inProgress = false
	}
	// Skips in-progress identifiers; none left gives "".
	d.queued["id2"].inProgress = true
	d.queued["id3"].inProgress = true
	if got := d.nextReady(); got != "id1" {
		t.Fatalf("nextReady = %q, want id1", got)
	}
	if got := d.nextReady(); got != "" {
		t.Fatalf("all in progress: nextReady = %q", got)
	}
	// Removing an entry before the cursor keeps the position.
	for _, id := range d.order {
		d.queued[id].inProgress = false
	}
	d.rr = 1 // next is id2
	th := New(Options{Concurrency: 1, PerWindow: 1, Window: time.Minute})
	d.waiting = 3
	th.removeIdentifier("x", d, "id1")
	if got := d.nextReady(); got != "id2" {
		t.Fatalf("after remove: nextReady = %q, want id2", got)
	}
	th.removeIdentifier("x", d, "id2") // in progress: not counted as waiting
	th.removeIdentifier("x", d, "id3")
	if len(d.order) != 0 || d.rr != 0 || d.hasReady() || d.waiting != 1 {
		t.Fatalf("queue not empty: %+v", d)
	}
}

func TestThrottleLimits(t *testing.T) {
	clk := newManualClock()
	th := New(Options{Clock: clk, Concurrency: 2, PerWindow: 3, Window: time.Minute,
		Spawn: func(fn func()) bool { go fn(); return true }})
	a := th.TryAcquire("x")
	b := th.TryAcquire("x")
	if a == nil || b == nil {
		t.Fatal("could not take 2 slots")
	}
	if th.TryAcquire("x") != nil {
		t.Fatal("third concurrent request allowed")
	}
	if th.TryAcquire("y") == nil {
		t.Fatal("other domain throttled")
	}
	if !a.Extra() {
		t.Fatal("extra request refused below the window limit")
	}
	// 2 leases holding 3 units: the window is full.
	if b.Extra() {
		t.Fatal("extra request beyond the window limit")
	}
	a.Release(true)
	if th.TryAcquire("x") != nil {
		t.Fatal("window limit ignored")
	}
	b.Release(false) // unused: does not count
	c := th.TryAcquire("x")
	if c == nil {
		t.Fatal("unused release did not free the window")
	}
	c.Release(true)
	if th.TryAcquire("x") != nil {
		t.Fatal("3 requests in the window, a 4th allowed")
	}
	clk.Advance(time.Minute - time.Millisecond)
	if th.TryAcquire("x") != nil {
		t.Fatal("window freed early")
	}
	clk.Advance(time.Millisecond)
	if th.TryAcquire("x") == nil {
		t.Fatal("window not freed after it passed")
	}
}

// TestThrottleQueueTrigger checks queued identifiers start when capacity
// frees, round-robin, with no polling: a window timer starts the rest.
func TestThrottleQueueTrigger(t *testing.T) {
	clk := newManualClock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []string
	th := New(Options{Clock: clk, Concurrency: 1, PerWindow: 2, Window: time.Minute,
		Spawn: func(fn func()) bool {
			wg.Add(1)
			go func() { defer wg.Done(); fn() }()
			return true
		},
		Work: func(domain, id string, tried map[string]bool, l *Lease) (string, bool, bool) {
			if tried["u-"+id] {
				return "", false, false
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			l.Release(true)
			return "u-" + id, true, false
		}})
	hold := th.TryAcquire("x") // domain busy: enqueued work must wait
	th.Enqueue("x", "a", nil)
	th.Enqueue("x", "b", nil)
	th.Enqueue("x", "c", map[string]bool{"u-c": true}) // already tried there
	wg.Wait()
	if len(order) != 0 {
		t.Fatalf("work started while the domain was busy: %v", order)
	}
	hold.Release(true) // 1 of 2 window units used
	wg.Wait()
	testkit.WaitFor(t, 10*time.Second, "first queued identifier", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 1 })
	wg.Wait()
	mu.Lock()
	got := append([]string(nil), order...)
	mu.Unlock()
	if len(got) != 1 || got[0] != "a" {
		t.Fatalf("order = %v, want [a] before the window frees", got)
	}
	clk.Advance(time.Minute)
	testkit.WaitFor(t, 10*time.Second, "queue drained", func() bool { return th.QueuedCount("x") == 0 })
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[1] != "b" {
		t.Fatalf("order = %v, want [a b]", order)
	}
}
