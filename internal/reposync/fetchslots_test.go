package reposync

import (
	"context"
	"testing"
)

// TestSlotLenderSharesFairly: a job borrows at most its cap, never more
// than the relay's spare slots; a slot coming back while another job waits
// is not lent again but wakes the engine.
func TestSlotLenderSharesFairly(t *testing.T) {
	woken := 0
	l := &slotLender{wake: func() { woken++ }, spare: 5}
	a := &jobSlotsBorrower{l: l, max: 3}
	b := &jobSlotsBorrower{l: l, max: 3}
	for i := 0; i < 3; i++ {
		if !a.borrow() {
			t.Fatalf("borrow %d of job a refused with spare slots", i+1)
		}
	}
	if a.borrow() {
		t.Fatal("job a borrowed beyond its cap")
	}
	if !b.borrow() || !b.borrow() || b.borrow() {
		t.Fatal("job b should get exactly the two spare slots left")
	}
	if got := l.inUse(); got != 5 {
		t.Fatalf("lent = %d, want 5", got)
	}
	a.giveBack()
	if woken != 0 || !b.borrow() {
		t.Fatal("a slot back with nobody waiting should be lent again")
	}
	// A job is queued: the engine withdraws what is left to lend.
	l.mu.Lock()
	l.spare, l.waiting = 0, true
	l.mu.Unlock()
	a.giveBack()
	if woken != 1 {
		t.Fatalf("woken = %d, want 1 after a slot came back while a job waits", woken)
	}
	if b.borrow() || a.borrow() {
		t.Fatal("a slot was lent while a job waits")
	}
	if got := l.inUse(); got != 4 {
		t.Fatalf("lent = %d, want 4", got)
	}
}

func TestBorrowerFromContext(t *testing.T) {
	if borrowerFrom(context.Background()) != nil {
		t.Fatal("a borrower without one in the context")
	}
	b := &jobSlotsBorrower{l: &slotLender{}}
	if borrowerFrom(withBorrower(context.Background(), b)) != b {
		t.Fatal("the context's borrower was not returned")
	}
}
