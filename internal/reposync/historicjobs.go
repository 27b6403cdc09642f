package reposync

import (
	"context"
	"errors"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/filtermatch"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/internal/sweepcursor"
)

// batchRun collects the outcomes of a batch's jobs.
type batchRun struct {
	left int
	errs []error
	// failed are the filters of the jobs that failed: a retry runs only
	// them.
	failed []nostr.Filter
	// pager runs the batch's jobs with the REQ pager even when NIP-77 is on
	// (catch-up with since).
	pager bool
}

// startBatch queues a batch of items with its filters.
func (js jobScheduler) startBatch(r *remote, items repoindex.Items, fs []nostr.Filter, catchup bool) {
	js.queueJob(r, &repoindex.PendingBatch{Items: items, Catchup: catchup}, fs, false)
}

// queueJob registers b as pending and queues it as one job per filter: the
// jobs of all batches run concurrently within the relay's subscription
// budget (jobSlots), so the round trips of one relay overlap instead of
// following each other. pager runs them with the REQ pager.
func (js jobScheduler) queueJob(r *remote, b *repoindex.PendingBatch, fs []nostr.Filter, pager bool) {
	js.addPending(r, b)
	run := &batchRun{left: max(1, len(fs)), pager: pager}
	if len(fs) == 0 {
		r.jobs = append(r.jobs, &job{batch: b, run: run})
	}
	js.queueFilters(r, b, run, fs)
	js.startJobs(r)
}

// addPending registers b as a pending batch of r.
func (js jobScheduler) addPending(r *remote, b *repoindex.PendingBatch) {
	js.e.nextBatch++
	b.ID = js.e.nextBatch
	b.NRepos, b.NRoots = b.Items.Repos.Len(), b.Items.Roots.Len()
	r.pendingRepos += b.NRepos
	r.pendingRoots += b.NRoots
	js.e.pending[r.URL] = append(js.e.pending[r.URL], b)
	js.e.m.PendingBatches.WithLabelValues(r.URL).Set(float64(len(js.e.pending[r.URL])))
}

// retryFailed queues the failed historic jobs of r whose backoff is over
// (the tick calls it).
func (js jobScheduler) retryFailed(r *remote, now time.Time) {
	if len(r.failed) == 0 || !js.e.subs.allowed(r) {
		return
	}
	keep := r.failed[:0]
	var due []*repoindex.RetryJob
	for _, rj := range r.failed {
		if now.Before(rj.At) {
			keep = append(keep, rj)
		} else {
			due = append(due, rj)
		}
	}
	clear(r.failed[len(keep):]) // the array would keep the due ones
	r.failed = keep
	for _, rj := range due {
		// Per attempt: debug. The failure said it once, the success will.
		js.e.log.Debug("retrying a failed historic sync batch", zap.String("relay", r.URL), zap.Int("failures", rj.Failures))
		js.queueJob(r, &repoindex.PendingBatch{Items: rj.Items, Catchup: true, Retry: rj}, rj.Filters, rj.Pager)
	}
}

// parkRetries keeps the retries of r's pending batches when its connection
// ends (a quick reconnect runs them again; a fresh sync drops them).
func (js jobScheduler) parkRetries(r *remote) {
	for _, b := range js.e.pending[r.URL] {
		if b.Retry != nil {
			r.failed = append(r.failed, b.Retry)
		}
	}
}

// jobDone records one job's outcome; the batch is done (onBatchDone) with
// its last job, failed if any job failed.
func (js jobScheduler) jobDone(url string, gen uint64, j *job, err error) {
	r := js.e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	r.running--
	j.run.left -= j.merged // the queued jobs it took on (mergeQueued)
	js.runDone(r, j.batch, j.run, j.filters, err)
}

// runDone records the outcome of one part of a batch (a job, or a since
// subscription's stored events) asking fs; the batch is done with its
// last part.
func (js jobScheduler) runDone(r *remote, b *repoindex.PendingBatch, run *batchRun, fs []nostr.Filter, err error) {
	if err != nil {
		run.errs = append(run.errs, err)
		run.failed = append(run.failed, fs...)
	}
	if run.left--; run.left > 0 {
		js.startJobs(r)
		return
	}
	js.onBatchDone(r, b, run)
}

// jobSlots is how many historic subscriptions may run beside the live ones:
// the rest of the relay's budget. No slot is kept back for a live
// subscription: addFilters opens one only with two slots free and
// consolidates (or waits) otherwise, so a kept slot was never used while
// jobs ran, and it halved the jobs of a distant relay whose live
// subscriptions hold all but two of its slots.
func (js jobScheduler) jobSlots(r *remote) int {
	return max(1, js.e.d.Health.SubscriptionBudget(r.URL)-len(r.live))
}

// connEnded reports whether c is a connection that has ended.
func connEnded(c *relay.Conn) bool {
	if c == nil {
		return false
	}
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// startWaitingJobs starts queued jobs of every relay, up to the bounds,
// until none starts: a relay that left a place to one running fewer jobs
// (overShare) is asked again once that one took it.
func (js jobScheduler) startWaitingJobs() {
	if js.e.startingAll {
		return
	}
	js.e.startingAll = true
	defer func() { js.e.startingAll = false }()
	for {
		started := js.e.historicJobs
		for _, r := range js.e.relays {
			if len(r.jobs) > 0 {
				js.startJobs(r)
			}
		}
		if js.e.historicJobs == started {
			return
		}
	}
}

// startJobs starts r's queued jobs while it has free subscription slots
// (jobSlots, less the slots lent to fetches) and fewer than
// Config.HistoricMaxJobs jobs run over all relays: each holds up to a page
// of events until its EOSE, so memory stays bounded however many relays and
// batches there are, while enough run to overlap the round trips of
// distant relays. Then it sets what r's running jobs may borrow (relend).
func (js jobScheduler) startJobs(r *remote) {
	defer js.relend(r)
	if !js.e.subs.allowed(r) {
		return
	}
	lend := js.lender(r)
	for len(r.jobs) > 0 && r.running+lend.InUse() < js.jobSlots(r) && js.e.historicJobs < js.e.cfg.HistoricMaxJobs {
		if js.overShare(r) {
			// The place is another relay's: start its jobs.
			defer js.startWaitingJobs()
			break
		}
		free := min(js.jobSlots(r)-r.running-lend.InUse(), js.sharePlaces(r))
		j := r.popJob()
		j.unpack()
		js.mergeQueued(r, j, free)
		j.filters = historic.FitTagValues(j.filters, js.e.lim.ValuesPerFilter(r.URL)) // learned limits
		r.running++
		js.e.historicJobs++
		url, gen, conn, count, got := r.URL, r.gen, r.conn, &r.received, &r.historicGot
		started := js.e.clock.Now()
		// The job's REQ goes out after the live-subscription commands
		// queued before it (the CLOSEs of a consolidation): otherwise
		// closed-but-not-yet-sent subscriptions and the new job overlap on
		// the relay beyond its subscription budget.
		queued := make(chan struct{})
		var connDone <-chan struct{}
		if r.cmds == nil || conn == nil {
			close(queued)
		} else {
			connDone = conn.Done()
			js.e.subs.exec(r, func(*relay.Conn) { close(queued) })
		}
		asked := jobMatch(j)
		ctx := sweepcursor.With(historic.WithBorrower(js.e.ctx, historic.NewJobSlotsBorrower(lend, js.e.cfg.HistoricFetchSlots-1)))
		js.e.wg.Add(1)
		go func() {
			defer js.e.wg.Done()
			select {
			case <-queued:
			case <-connDone:
			case <-js.e.ctx.Done():
			}
			hs := js.e.d.Historic
			if j.run.pager {
				hs = js.e.catchup
			}
			emit := func(ctx context.Context, in ingest.Incoming) error {
				js.e.m.EventsReceived.WithLabelValues(url).Inc()
				count.Add(1)
				if in.Event == nil || !asked(in.Event) {
					js.e.h.Invalid("no_match")
					if in.Event != nil {
						historic.NoteDropped(ctx, in.Event.ID) // a claim on it is not met (historic/fetchclaims.go)
					}
					return nil
				}
				if !js.e.h.Seen(in.Event.ID) { // progress, not a copy of what came before
					got.Add(1)
				}
				return js.e.h.Handle(ctx, in)
			}
			began := js.e.clock.Now()
			err := hs.Sync(ctx, conn, j.filters, 1, emit)
			if ce := js.e.log.Check(zap.DebugLevel, "historic job done"); ce != nil {
				ce.Write(zap.String("relay", url), zap.Uint64("batch", j.batch.ID), zap.String("filter", filtermatch.FiltersLabel(j.filters)),
					zap.Duration("waited", began.Sub(started)), zap.Duration("took", js.e.clock.Now().Sub(began)), zap.Error(err))
			}
			// A refusal that taught a smaller limit is asked again at once
			// within it, not left to the retry backoff.
			for err != nil && js.e.ctx.Err() == nil {
				refit := historic.FitTagValues(j.filters, js.e.lim.ValuesPerFilter(url))
				if len(refit) == len(j.filters) {
					break
				}
				j.filters = refit
				err = hs.Sync(ctx, conn, j.filters, 1, emit)
			}
			// A job that failed because its connection ended is no
			// failure of the batch: onDisconnected (the watcher posts it)
			// drops the pending batches, and the reconnect asks their
			// items again at once. Counted as failed, the batch would
			// wait for the historic retry backoff (30 s) or not, depending
			// on which of the two reached the Run goroutine first.
			lost := err != nil && connEnded(conn)
			js.e.post(func() {
				js.e.historicJobs--
				if !lost && (err == nil || !js.requeueRateLimited(url, gen, j, started)) {
					js.jobDone(url, gen, j, err)
				}
				js.startWaitingJobs()
			})
		}()
	}
}

// overShare tells whether r must leave the next place of
// Config.HistoricMaxJobs to another relay: r runs at least its share (the
// bound divided among the relays with jobs) and a relay that could start
// a job runs fewer. A relay whose jobs keep finishing would otherwise take
// the freed places again at once: a relay connected later would wait for
// all its jobs (its Layer 1 too) until the first ran out of work, and the
// places that do not divide evenly (6 of 16 among 10 relays) would stay
// with whichever relay held them first. So freed places go to the relays
// running fewest jobs; a relay takes idle places when nobody waits.
func (js jobScheduler) overShare(r *remote) bool {
	if r.running == 0 {
		return false
	}
	wanting := 0
	for _, o := range js.e.relays {
		if len(o.jobs) > 0 || o.running > 0 {
			wanting++
		}
	}
	share := max(1, js.e.cfg.HistoricMaxJobs/max(1, wanting))
	if r.running < share {
		return false
	}
	for _, o := range js.e.relays {
		if o != r && len(o.jobs) > 0 && o.running < r.running && js.e.subs.allowed(o) && o.running+js.lender(o).InUse() < js.jobSlots(o) {
			return true
		}
	}
	return false
}

// sharePlaces is how many more jobs r may run within its share of
// Config.HistoricMaxJobs (at least 1): with its live filters deferred
// (deferLive) a relay's subscriptions no longer limit its jobs, the shared
// bound does (16 over 10 relays), and a relay's queued Layer 3 jobs are
// merged to its places as they were to its one free subscription.
func (js jobScheduler) sharePlaces(r *remote) int {
	wanting := 0
	for _, o := range js.e.relays {
		if len(o.jobs) > 0 || o.running > 0 {
			wanting++
		}
	}
	share := max(1, js.e.cfg.HistoricMaxJobs/max(1, wanting))
	return max(1, share-r.running)
}

// maxMergedJobs bounds how many queued jobs one job takes on.
const maxMergedJobs = 8

// mergeQueued lets j take on the queued jobs of its batch that follow it
// when more jobs wait than r has free slots (a distant relay whose budget
// the live subscriptions fill runs one job at a time): the NIP-77 syncer
// reconciles a job's filters one after another in its one slot and fetches
// what they all lack together, one round trip for up to maxMergedJobs
// filters instead of one each. With slots to spare the jobs run apart. free
// counts the relay's places within its share of Config.HistoricMaxJobs too
// (sharePlaces); Layer 2 filters are never merged: a merged job fetches
// through its one slot, and eight Layer 2 filters' fetches one after
// another take longer than eight jobs apart.
func (js jobScheduler) mergeQueued(r *remote, j *job, free int) {
	if m, ok := js.e.d.Historic.(historic.JobMerger); j.run.pager || free <= 0 || !ok || !m.MergesJobs() || !perRoot(j) {
		return
	}
	want := min(maxMergedJobs, (len(r.jobs)+free)/free) // jobs per slot, j included
	for j.merged+1 < want && len(r.jobs) > 0 && r.jobs[0].run == j.run && r.jobs[0].merged == 0 && r.jobs[0].unpack() && perRoot(r.jobs[0]) {
		j.filters = append(j.filters[:len(j.filters):len(j.filters)], r.jobs[0].filters...)
		j.merged++
		r.popJob()
	}
}

// perRoot tells whether j asks Layer 3 filters (root event ids by e, E or
// q): few events each, so merged they fetch little. Layer 2 filters are not
// merged: their fetches are large, and held back until eight
// reconciliations finished they let other relays fetch the same events
// first (more bytes, more events held, for no round trip saved).
func perRoot(j *job) bool {
	for _, f := range j.filters {
		for tag, vs := range f.Tags {
			if (tag != "e" && tag != "E" && tag != "q") || len(vs) == 0 || len(vs[0]) != 64 {
				return false
			}
		}
		if len(f.Tags) != 1 {
			return false
		}
	}
	return len(j.filters) > 0
}

// requeueRateLimited puts a failed historic job back in the queue when the
// relay signalled a rate limit since it started or is cooling down now:
// the failure is likely a refused REQ (a rate-limit NOTICE names none; a
// CLOSED's cooldown is visible before rateLimitedAt is), and the job runs again
// once the cooldown is over instead of leaving its history to the full
// resync.
func (js jobScheduler) requeueRateLimited(url string, gen uint64, j *job, started time.Time) bool {
	r := js.e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return false
	}
	if r.rateLimitedAt.Before(started) && js.e.d.Health.CooldownRemaining(url) <= 0 {
		return false
	}
	r.running--
	r.jobs = append([]*job{j}, r.jobs...)
	js.e.log.Info("historic sync batch hit a rate limit; retrying after the cooldown",
		zap.String("relay", url), zap.Uint64("batch", j.batch.ID), zap.Duration("cooldown", js.e.d.Health.CooldownRemaining(url)))
	js.startJobs(r)
	return true
}

// onBatchDone confirms a batch's items; when no batch is pending the
// relay's historic sync is complete. A failed batch is retried with
// backoff (Config.historicRetry) until it succeeds; meanwhile the relay is
// ConnectedHistoricSyncFailures.
func (js jobScheduler) onBatchDone(r *remote, b *repoindex.PendingBatch, run *batchRun) {
	url := r.URL
	err := errors.Join(run.errs...)
	batches := js.e.pending[url]
	for i, x := range batches {
		if x == b {
			js.e.pending[url] = append(batches[:i:i], batches[i+1:]...)
			r.pendingRepos -= b.NRepos
			r.pendingRoots -= b.NRoots
			break
		}
	}
	js.e.m.PendingBatches.WithLabelValues(url).Set(float64(len(js.e.pending[url])))
	if b == r.window { // failed, it is a retry with its filters
		r.window, r.windowFrom = nil, time.Time{}
	}
	if b == r.catchup {
		// Done, or failed and kept as a retry with its since: later
		// disconnections count from their own time again.
		r.catchup, r.catchupFrom = nil, time.Time{}
		if err == nil {
			r.rebuild.Reset()
		} else if health.ClassifyMessage(err.Error()) == health.SignalNone { // not a limit learned: the next one waits
			r.rebuild.Fail(js.e.cfg.historicRetry(), js.e.clock.Now(), backoff.Rand())
		}
	}
	if historic.OnlyCutTies(err) { // read but for seconds that stay cut: a retry would ask the same (updateRelayState)
		r.lastError = "historic sync: " + err.Error()
		js.e.m.HistoricBatches.WithLabelValues("failed").Inc()
	} else if err != nil {
		rj := b.Retry
		if rj == nil {
			rj = &repoindex.RetryJob{Items: b.Items, Pager: run.pager}
		}
		rj.Filters = run.failed
		rj.Failures++
		wait := health.RetryDelay(js.e.cfg.historicRetry(), rj.Failures, err)
		rj.At = js.e.clock.Now().Add(wait)
		r.failed = append(r.failed, rj)
		r.lastError = "historic sync: " + err.Error()
		js.e.m.HistoricBatches.WithLabelValues("failed").Inc()
		level := zap.WarnLevel
		switch {
		case errors.Is(err, health.ErrRefused) || js.e.d.Health.RefusalRemaining(url) > 0:
			level = zap.DebugLevel // the health tracker logged the refusal once
		case wait == 0:
			level = zap.DebugLevel // the bound learned was logged once, the retry goes at once
		case rj.Failures > 1 || js.e.d.Pacer.Backoff(url) != "":
			// Said once: at the first failure, or by the pacer when the
			// relay began refusing; the retry's success is logged.
			level = zap.DebugLevel
		}
		js.e.log.Log(level, "historic sync batch failed; retrying", zap.String("relay", url), zap.Uint64("batch", b.ID),
			zap.Int("failures", rj.Failures), zap.Duration("retry_in", wait), zap.Error(err))
	} else {
		js.e.m.HistoricBatches.WithLabelValues("ok").Inc()
		if b.Retry != nil {
			js.e.log.Info("failed historic sync batch retried successfully", zap.String("relay", url),
				zap.Int("failures", b.Retry.Failures))
		}
	}
	// Items are confirmed even when the batch failed: their live
	// subscriptions are open, or deferred (deferLive) until the
	// consolidation that ends the pending batches opens them with since
	// reaching back to when they were deferred; the retry fetches their
	// history.
	r.Confirmed.Repos.AddAll(b.Items.Repos)
	r.Confirmed.Roots.AddAll(b.Items.Roots)
	r.ConfirmedGen++
	if len(js.e.pending[url]) == 0 && (!r.consolidateBy.IsZero() || !r.liveDeferredAt.IsZero()) && js.e.subs.allowed(r) && r.rebuild.Due(js.e.clock.Now()) {
		// One consolidation opens the live filters that waited (for the
		// consolidation, or deferred: deferLive); else the tick does.
		js.e.subs.consolidate(r)
	}
	js.startJobs(r)
	if r.deferred {
		r.deferred = false
		js.e.recomputeRelay(url)
	}
	js.updateRelayState(r)
}

// updateRelayState derives Syncing / Connected / ConnectedHistoricSyncFailures.
// A relay is Syncing until its first historic sync completed; batches for
// items discovered later (announcements still round-tripping through the
// own relay) and retries of failed batches do not turn it back, so
// "historic sync complete" is reported once per fresh sync.
func (js jobScheduler) updateRelayState(r *remote) {
	if !r.Status.IsUp() {
		return
	}
	wasDone := r.HistoricDone
	syncing, retrying := false, false
	for _, b := range js.e.pending[r.URL] {
		if b.Retry != nil {
			retrying = true
		} else {
			syncing = true
		}
	}
	// Held by a refusal wait (allowed), no job running: failures.
	refused := len(js.e.pending[r.URL]) > 0 && r.running == 0 && js.e.d.Health.RefusalRemaining(r.URL) > 0
	r.HistoricFailed = len(r.failed) > 0 || retrying || refused || js.e.pager.Truncation.TiesCut(r.URL) > 0
	switch {
	case syncing && !r.HistoricDone && !refused:
		r.Status = repoindex.Syncing
	case r.HistoricFailed:
		r.Status = repoindex.ConnectedHistoricSyncFailures
	default:
		r.Status = repoindex.Connected
	}
	if !wasDone && !syncing { // not while a refusal holds the first sync's batches
		r.HistoricDone = true
		js.e.log.Info("historic sync complete", zap.String("relay", r.URL), zap.Stringer("state", r.Status),
			zap.Int("repos", r.Confirmed.Repos.Len()), zap.Int("roots", r.Confirmed.Roots.Len()), zap.Uint64("events", r.received.Load()))
	}
	js.e.m.RelayConnected.WithLabelValues(r.URL).Set(float64(r.Status))
}
