package reposync

import (
	"context"
	"testing"
	"time"
)

// TestEventBudget: units are taken up to the size, a request over the size
// takes the whole budget, a waiting request gets its units when enough come
// back, and one whose context ends gives up without taking any.
func TestEventBudget(t *testing.T) {
	b := newEventBudget(1000, 0)
	ctx := context.Background()
	a, err := b.acquire(ctx, 600)
	if err != nil || a.events != 600 || b.inUse() != 600 {
		t.Fatalf("acquire 600: %+v, %v, in use %d", a, err, b.inUse())
	}
	got := make(chan *budgetGrant)
	go func() {
		g, _ := b.acquire(ctx, 500)
		got <- g
	}()
	select {
	case g := <-got:
		t.Fatalf("500 more taken (%+v) with 400 free", g)
	case <-time.After(20 * time.Millisecond):
	}
	b.release(a)
	g := <-got
	if g.events != 500 || b.inUse() != 500 {
		t.Fatalf("after the release: took %d, in use %d", g.events, b.inUse())
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if n, err := b.acquire(cctx, 5000); err == nil || n != nil || b.inUse() != 500 {
		t.Fatalf("a request for the whole budget while 500 are held: %+v, %v, in use %d", n, err, b.inUse())
	}
	b.release(g)
	if g, err := b.acquire(ctx, 5000); err != nil || g.events != 1000 {
		t.Fatalf("a request over the size: %+v, %v, want the whole budget", g, err)
	}
	var none *eventBudget
	if g, err := none.acquire(ctx, 10); g.events != 0 || g.bytes != 0 || err != nil {
		t.Fatal("a nil budget bounds something")
	}
}

// TestEventBudgetBytes: a REQ reserves its events times the average event
// size (assumedEventBytes at first) and waits while that many bytes are
// reserved by others although event units are free; the average follows
// the events REQs held, so lighter events let more REQs run at once; a
// reservation never exceeds the byte bound, so one REQ always fits.
func TestEventBudgetBytes(t *testing.T) {
	const maxBytes = 1000 * assumedEventBytes
	b := newEventBudget(32000, maxBytes)
	ctx := context.Background()
	a, err := b.acquire(ctx, 600)
	if err != nil || a.bytes != 600*assumedEventBytes || b.bytesReserved() != 600*assumedEventBytes {
		t.Fatalf("acquire 600: %+v, %v, reserved %d", a, err, b.bytesReserved())
	}
	got := make(chan *budgetGrant)
	go func() {
		g, _ := b.acquire(ctx, 500)
		got <- g
	}()
	select {
	case g := <-got:
		t.Fatalf("500 more events' bytes taken (%+v) with 400 events' worth free", g)
	case <-time.After(20 * time.Millisecond):
	}
	// the 600 events weigh 500 bytes each: held counts them
	for range 600 {
		b.hold(a, 500)
	}
	if b.bytesHeld() != 600*500 {
		t.Fatalf("held %d, want %d", b.bytesHeld(), 600*500)
	}
	b.release(a)
	g := <-got
	if g.bytes != 500*assumedEventBytes || b.bytesHeld() != 0 {
		t.Fatalf("after the release: %+v, held %d", g, b.bytesHeld())
	}
	avg := b.avg.Load()
	if avg >= assumedEventBytes || avg <= 500 {
		t.Fatalf("average after 600 events of 500 bytes: %d, want between 500 and %d", avg, assumedEventBytes)
	}
	// many light pages bring the average down to what arrives
	for range 300 {
		p, err := b.acquire(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			b.hold(p, 500)
		}
		b.release(p)
	}
	if avg := b.avg.Load(); avg < 500 || avg > 520 {
		t.Fatalf("average after many 500-byte events: %d", avg)
	}
	b.release(g)
	if b.bytesReserved() != 0 || b.inUse() != 0 {
		t.Fatalf("everything released: reserved %d, events %d", b.bytesReserved(), b.inUse())
	}
	// now 500-byte events: 4,000 of them fit where 1,000 of the assumed did
	x, err := b.acquire(ctx, 4000)
	if err != nil || x.bytes > maxBytes {
		t.Fatalf("4,000 light events: %+v, %v", x, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if n, err := b.acquire(cctx, 1000); err == nil || n != nil || b.inUse() != 4000 {
		t.Fatalf("a REQ over the bytes left: %+v, %v, events in use %d", n, err, b.inUse())
	}
	b.release(x)
	// a REQ bigger than the bound takes the whole bound and runs
	if big, err := b.acquire(ctx, 30000); err != nil || big.bytes != maxBytes {
		t.Fatalf("a REQ over the byte bound: %+v, %v", big, err)
	}
}
