package reposync

import (
	"context"
	"sync"
)

// Lending spare subscription slots to historic jobs' id fetches.
//
// A historic job holds one of its relay's subscription slots (jobSlots)
// for its whole life: its negentropy rounds, then its fetches by id. When
// no other job of the relay waits for a slot, the slots nobody uses are
// lent to running jobs' fetches (at most Config.HistoricFetchSlots−1 more
// per job), so a distant relay's fetch round trips overlap instead of
// following one another; a merged job's reconciliations run at once on
// lent slots (reconcileAhead), also while jobs wait for a place under
// Config.HistoricMaxJobs. One job slot is never lent (addFilters must find
// it free to open a live subscription without consolidating), and a slot
// comes back when its fetch REQ ends, so a job queued or a live
// subscription opened meanwhile waits at most one fetch.

// slotLender holds the spare slots of one relay connection (one gen).
type slotLender struct {
	gen uint64
	// wake, when a job waits, asks the engine to start waiting jobs after
	// a lent slot came back.
	wake func()

	mu      sync.Mutex
	spare   int  // slots that may be lent now
	lent    int  // slots lent and not yet back
	waiting bool // a job of the relay waits for a slot
	// queued: jobs of the relay wait for a place under
	// Config.HistoricMaxJobs. Slots are then lent to reconciliations
	// (reconcileAhead), which hold no events, not to fetches: lent to
	// fetches too they raised a loopback medium run's peak RSS from
	// 164–179 to 199–248 MiB (more events held at once, up to
	// Config.HistoricMaxEvents).
	queued bool
}

// lender returns r's lender for its current connection.
func (e *Engine) lender(r *remote) *slotLender {
	if r.lend == nil || r.lend.gen != r.gen {
		r.lend = &slotLender{gen: r.gen, wake: func() { e.post(e.startWaitingJobs) }}
	}
	return r.lend
}

// relend sets how many slots r's jobs may borrow: none while a job waits
// for a slot, the relay is cooling down or only one slot per job is
// configured; else the job slots not held or lent, less one. Jobs queued
// only for a place under Config.HistoricMaxJobs (or the relay's share of
// it) stop the lending to fetches but not to reconciliations (queued): the
// slot kept back takes the next of them, and with its live filters
// deferred (deferLive) a distant relay's slots would otherwise sit idle
// while a merged job reconciles one filter per round trip.
func (e *Engine) relend(r *remote) {
	l := e.lender(r)
	spare := 0
	waiting := len(r.jobs) > 0 && r.running+l.inUse() >= e.jobSlots(r)-1
	queued := len(r.jobs) > 0
	if !waiting && e.allowed(r) && e.cfg.HistoricFetchSlots > 1 {
		spare = e.jobSlots(r) - r.running - l.inUse() - 1
	}
	l.mu.Lock()
	l.spare, l.waiting, l.queued = max(0, spare), waiting, queued
	l.mu.Unlock()
}

// inUse is how many lent slots are not back yet.
func (l *slotLender) inUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lent
}

func (l *slotLender) borrow(fetch bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spare <= 0 || (fetch && l.queued) {
		return false
	}
	l.spare--
	l.lent++
	return true
}

func (l *slotLender) giveBack() {
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

// jobSlotsBorrower lets one job borrow up to max slots of its relay's
// lender.
type jobSlotsBorrower struct {
	l   *slotLender
	max int

	mu sync.Mutex
	n  int
}

// borrow lends a slot for an id fetch, borrowReconcile one for a
// reconciliation (reconcileAhead).
func (b *jobSlotsBorrower) borrow() bool { return b.take(true) }

func (b *jobSlotsBorrower) borrowReconcile() bool { return b.take(false) }

func (b *jobSlotsBorrower) take(fetch bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n >= b.max || !b.l.borrow(fetch) {
		return false
	}
	b.n++
	return true
}

func (b *jobSlotsBorrower) giveBack() {
	b.mu.Lock()
	b.n--
	b.mu.Unlock()
	b.l.giveBack()
}

type borrowerKey struct{}

// withBorrower lets the id fetches under ctx borrow extra slots from b.
func withBorrower(ctx context.Context, b *jobSlotsBorrower) context.Context {
	return context.WithValue(ctx, borrowerKey{}, b)
}

// borrowerFrom returns ctx's borrower, nil when there is none.
func borrowerFrom(ctx context.Context) *jobSlotsBorrower {
	b, _ := ctx.Value(borrowerKey{}).(*jobSlotsBorrower)
	return b
}
