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
	b := newEventBudget(1000)
	ctx := context.Background()
	a, err := b.acquire(ctx, 600)
	if err != nil || a != 600 || b.inUse() != 600 {
		t.Fatalf("acquire 600: %d, %v, in use %d", a, err, b.inUse())
	}
	got := make(chan int)
	go func() {
		n, _ := b.acquire(ctx, 500)
		got <- n
	}()
	select {
	case n := <-got:
		t.Fatalf("500 more taken (%d) with 400 free", n)
	case <-time.After(20 * time.Millisecond):
	}
	b.release(a)
	if n := <-got; n != 500 || b.inUse() != 500 {
		t.Fatalf("after the release: took %d, in use %d", n, b.inUse())
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if n, err := b.acquire(cctx, 5000); err == nil || n != 0 || b.inUse() != 500 {
		t.Fatalf("a request for the whole budget while 500 are held: %d, %v, in use %d", n, err, b.inUse())
	}
	b.release(500)
	if n, err := b.acquire(ctx, 5000); err != nil || n != 1000 {
		t.Fatalf("a request over the size: %d, %v, want the whole budget", n, err)
	}
	var none *eventBudget
	if n, err := none.acquire(ctx, 10); n != 0 || err != nil {
		t.Fatal("a nil budget bounds something")
	}
}
