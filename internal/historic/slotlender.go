package historic

import (
	"context"
	"sync"
)

// Lending spare subscription slots to historic jobs' id fetches.
//
// A historic job holds one of its relay's subscription slots for its
// whole life: its negentropy rounds, then its fetches by id. When no
// other job of the relay waits for a slot, the slots nobody uses are lent
// to running jobs' fetches (at most the configured fetch slots−1 more per
// job), so a distant relay's fetch round trips overlap instead of
// following one another; a merged job's reconciliations run at once on
// lent slots (reconcileAhead), also while jobs wait for a place under the
// bound on historic jobs. One job slot is never lent (the engine must
// find it free to open a live subscription without consolidating), and a
// slot comes back when its fetch REQ ends, so a job queued or a live
// subscription opened meanwhile waits at most one fetch. The engine's Run
// goroutine sets what may be lent (Lend); the jobs' goroutines borrow.

// SlotLender holds the spare slots of one relay connection (one gen).
type SlotLender struct {
	gen uint64
	// wake, when a job waits, asks the engine to start waiting jobs after
	// a lent slot came back.
	wake func()

	mu      sync.Mutex
	spare   int  // slots that may be lent now
	lent    int  // slots lent and not yet back
	waiting bool // a job of the relay waits for a slot
	// queued: jobs of the relay wait for a place under the bound on
	// historic jobs. Slots are then lent to reconciliations
	// (reconcileAhead), which hold no events, not to fetches: lent to
	// fetches too they raised the peak memory (more events held at once,
	// up to the historic event budget).
	queued bool
}

// NewSlotLender lends the spare slots of connection gen; wake, when a job
// waits, asks the engine to start waiting jobs after a lent slot came
// back.
func NewSlotLender(gen uint64, wake func()) *SlotLender {
	return &SlotLender{gen: gen, wake: wake}
}

// Gen is the connection the lender lends slots of.
func (l *SlotLender) Gen() uint64 { return l.gen }

// Lend sets how many slots may be lent now, whether a job of the relay
// waits for a slot, and whether jobs wait for a place (queued: slots go
// to reconciliations only).
func (l *SlotLender) Lend(spare int, waiting, queued bool) {
	l.mu.Lock()
	l.spare, l.waiting, l.queued = max(0, spare), waiting, queued
	l.mu.Unlock()
}

// Spare is how many slots may be lent now.
func (l *SlotLender) Spare() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.spare
}

// Waiting tells whether a job of the relay waits for a slot.
func (l *SlotLender) Waiting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// InUse is how many lent slots are not back yet.
func (l *SlotLender) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lent
}

func (l *SlotLender) borrow(fetch bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare <= 0 || (fetch && l.queued) {
		return false
	}
	l.spare--
	l.lent++
	return true
}

func (l *SlotLender) giveBack() {
	l.mu.Lock()
	l.lent--
	wake := l.waiting
	if !wake {
		l.spare++
	}
	l.mu.Unlock()
	if wake {
		l.wake()
	}
}

// JobSlotsBorrower lets one job borrow up to max slots of its relay's
// lender.
type JobSlotsBorrower struct {
	l   *SlotLender
	max int

	mu sync.Mutex
	n  int
}

// NewJobSlotsBorrower lets one job borrow up to max slots of l.
func NewJobSlotsBorrower(l *SlotLender, max int) *JobSlotsBorrower {
	return &JobSlotsBorrower{l: l, max: max}
}

// Borrow lends a slot for an id fetch, BorrowReconcile one for a
// reconciliation (reconcileAhead).
func (b *JobSlotsBorrower) Borrow() bool { return b.take(true) }

func (b *JobSlotsBorrower) BorrowReconcile() bool { return b.take(false) }

func (b *JobSlotsBorrower) take(fetch bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n >= b.max || !b.l.borrow(fetch) {
		return false
	}
	b.n++
	return true
}

func (b *JobSlotsBorrower) GiveBack() {
	b.mu.Lock()
	b.n--
	b.mu.Unlock()
	b.l.giveBack()
}

type borrowerKey struct{}

// WithBorrower lets the id fetches under ctx borrow extra slots from b.
func WithBorrower(ctx context.Context, b *JobSlotsBorrower) context.Context {
	return context.WithValue(ctx, borrowerKey{}, b)
}

// borrowerFrom returns ctx's borrower, nil when there is none.
func borrowerFrom(ctx context.Context) *JobSlotsBorrower {
	b, _ := ctx.Value(borrowerKey{}).(*JobSlotsBorrower)
	return b
}
