package historic

import (
	"context"
	"testing"
)

// TestSlotLenderSharesFairly: a job borrows at most its cap, never more
// than the relay's spare slots; a slot coming back while another job waits
// is not lent again but wakes the engine.
func TestSlotLenderSharesFairly(t *testing.T) {
	woken := 0
	l := &SlotLender{wake: func() { woken++ }, spare: 5}
	a := &JobSlotsBorrower{l: l, max: 3}
	b := &JobSlotsBorrower{l: l, max: 3}
	for i := 0; i < 3; i++ {
		if !a.Borrow() {
			t.Fatalf("borrow %d of job a refused with spare slots", i+1)
		}
	}
	if a.Borrow() {
		t.Fatal("job a borrowed beyond its cap")
	}
	if !b.Borrow() || !b.Borrow() || b.Borrow() {
		t.Fatal("job b should get exactly the two spare slots left")
	}
	if got := l.InUse(); got != 5 {
		t.Fatalf("lent = %d, want 5", got)
	}
	a.GiveBack()
	if woken != 0 || !b.Borrow() {
		t.Fatal("a slot back with nobody waiting should be lent again")
	}
	// A job is queued: the engine withdraws what is left to lend.
	l.mu.Lock()
	l.spare, l.waiting = 0, true
	l.mu.Unlock()
	a.GiveBack()
	if woken != 1 {
		t.Fatalf("woken = %d, want 1 after a slot came back while a job waits", woken)
	}
	if b.Borrow() || a.Borrow() {
		t.Fatal("a slot was lent while a job waits")
	}
	if got := l.InUse(); got != 4 {
		t.Fatalf("lent = %d, want 4", got)
	}
}

func TestBorrowerFromContext(t *testing.T) {
	if borrowerFrom(context.Background()) != nil {
		t.Fatal("a borrower without one in the context")
	}
	b := &JobSlotsBorrower{l: &SlotLender{}}
	if borrowerFrom(WithBorrower(context.Background(), b)) != b {
		t.Fatal("the context's borrower was not returned")
	}
}
