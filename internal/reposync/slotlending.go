package reposync

import "github.com/grasp-sync/grasp-sync/internal/historic"

// The engine's side of lending spare subscription slots to historic
// jobs' id fetches (historic.SlotLender): which slots of a relay may be
// lent, decided on the Run goroutine.

// lender returns r's lender for its current connection.
func (js jobScheduler) lender(r *remote) *historic.SlotLender {
	if r.lend == nil || r.lend.Gen() != r.gen {
		r.lend = historic.NewSlotLender(r.gen, func() { js.e.post(js.startWaitingJobs) })
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
func (js jobScheduler) relend(r *remote) {
	l := js.lender(r)
	spare := 0
	waiting := len(r.jobs) > 0 && r.running+l.InUse() >= js.jobSlots(r)-1
	queued := len(r.jobs) > 0
	if !waiting && js.e.subs.allowed(r) && js.e.cfg.HistoricFetchSlots > 1 {
		spare = js.jobSlots(r) - r.running - l.InUse() - 1
	}
	l.Lend(spare, waiting, queued)
}
