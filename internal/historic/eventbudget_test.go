package historic

import (
	"context"
	"testing"
	"time"
)

// TestEventBudget: units are taken up to the size, a request over the size
// takes the whole budget, a waiting request gets its units when enough come
// back, and one whose context ends gives up without taking any.
func TestEventBudget(t *testing.T) {
	b := NewEventBudget(1000, 0)
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
	if g, err := none.acquire(ctx, 10); g.events != 0 || g.charge != 0 || err != nil {
		t.Fatal("a nil budget bounds something")
	}
}

// TestEventBudgetBytes: a REQ is charged floorEvents at the average event
// size (assumedEventBytes at first) before it is sent, and the bytes of
// what it holds beyond that as its events arrive; a new REQ waits while the
// charges leave no room for its floor (although event units are free) and
// goes once a release makes room; many small REQs fit at once; the average
// follows the events REQs held.
func TestEventBudgetBytes(t *testing.T) {
	const floor = floorEvents * assumedEventBytes
	const maxBytes = 10 * floor
	b := NewEventBudget(32000, maxBytes)
	ctx := context.Background()
	// ten small REQs fit (a Layer 3 filter returns a handful of events)
	var small []*budgetGrant
	for range 10 {
		g, err := b.acquire(ctx, 500)
		if err != nil || g.charge != floor {
			t.Fatalf("small REQ: %+v, %v", g, err)
		}
		small = append(small, g)
	}
	got := make(chan *budgetGrant)
	go func() {
		g, _ := b.acquire(ctx, 500)
		got <- g
	}()
	select {
	case g := <-got:
		t.Fatalf("an eleventh REQ went (%+v) with no room for its floor", g)
	case <-time.After(20 * time.Millisecond):
	}
	for _, g := range small[1:] {
		b.hold(g, 100) // a handful of light events: within the floor
	}
	if b.bytesCharged() != maxBytes || b.bytesHeld() != 900 {
		t.Fatalf("charged %d, held %d", b.bytesCharged(), b.bytesHeld())
	}
	b.release(small[0])
	big := <-got // a bulk page: 400 events of 2 kB, over its floor
	for range 400 {
		b.hold(big, assumedEventBytes)
	}
	if want := int64(9*floor + 400*assumedEventBytes); b.bytesCharged() != want {
		t.Fatalf("charged %d after a page over its floor, want %d", b.bytesCharged(), want)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	for _, g := range small[1:] {
		b.release(g)
	}
	// the page alone weighs more than the bound: nothing else is sent
	if n, err := b.acquire(cctx, 10); err == nil || n != nil || b.inUse() != 500 {
		t.Fatalf("a REQ while a page holds more than the bound: %+v, %v, events in use %d", n, err, b.inUse())
	}
	b.release(big)
	if b.bytesCharged() != 0 || b.bytesHeld() != 0 || b.inUse() != 0 {
		t.Fatalf("everything released: charged %d, held %d, events %d", b.bytesCharged(), b.bytesHeld(), b.inUse())
	}
	// a REQ is always sent into an empty budget, whatever its floor
	tiny := NewEventBudget(100, 10)
	if g, err := tiny.acquire(ctx, 100); err != nil || g.charge != 10 {
		t.Fatalf("a REQ into an empty budget smaller than its floor: %+v, %v", g, err)
	}
	// the average follows what arrives: many 500-byte events bring it down
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
	if g, _ := b.acquire(ctx, 500); g.charge != floorEvents*b.avg.Load() {
		t.Fatalf("floor at the new average: %+v", g)
	}
}
