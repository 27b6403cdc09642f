package reposync

import (
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

func (e *Engine) onTick() {
	now := e.clock.Now()
	for _, r := range e.relays {
		if !r.Status.IsUp() {
			continue
		}
		if !r.consolidateBy.IsZero() && !now.Before(r.consolidateBy) {
			e.subs.consolidate(r)
			r.deferred = true
		}
		if r.rebuildLive && e.subs.allowed(r) && r.rebuild.Due(now) && len(e.pending[r.URL]) == 0 {
			e.subs.consolidate(r)
		}
		if e.subs.liveDeferDue(r, now) && e.subs.allowed(r) && r.rebuild.Due(now) {
			e.log.Info("live subscriptions waited sync.live_defer_max for the pending batches; consolidating", zap.String("relay", r.URL),
				zap.Int("pending_batches", len(e.pending[r.URL])), zap.Time("deferred_since", r.liveDeferredAt))
			e.subs.consolidate(r)
		}
		if !r.fullResyncAt.IsZero() && !now.Before(r.fullResyncAt) {
			e.fullResync(r)
		}
		e.sched.retryFailed(r, now)
		e.sched.startJobs(r)
		if every := e.cfg.ProgressLogInterval; every > 0 && r.Status == repoindex.Syncing && now.Sub(r.progressLogged) >= every {
			if !r.progressLogged.IsZero() {
				e.log.Info("historic sync in progress", zap.String("relay", r.URL),
					zap.Int("pending_batches", len(e.pending[r.URL])), zap.Int("repos_confirmed", r.Confirmed.Repos.Len()),
					zap.Int("roots_confirmed", r.Confirmed.Roots.Len()), zap.Uint64("events_received", r.received.Load()))
			}
			r.progressLogged = now
		}
		if r.deferred && e.subs.allowed(r) && r.consolidateBy.IsZero() {
			r.deferred = false
			e.recomputeRelay(r.URL)
		}
		e.sched.updateRelayState(r)
	}
	if now.Sub(e.lastEmpty) >= e.cfg.EmptyRelayCheck {
		e.lastEmpty = now
		e.dropEmptyRelays()
	}
	e.h.Rejected().Expire()
	e.connectDue()
	e.updateIndexMetrics()
	e.refreshSnapshot()
}

// fullResync clears a relay's confirmed state and syncs its whole history
// again (the 23–25 h timer).
func (e *Engine) fullResync(r *remote) {
	e.log.Info("full resync", zap.String("relay", r.URL))
	for id := range r.live {
		e.subs.closeLive(r, id)
	}
	r.jobs = nil
	delete(e.pending, r.URL)
	r.pendingRepos, r.pendingRoots = 0, 0
	r.catchup, r.catchupFrom, r.window, r.windowFrom = nil, time.Time{}, nil, time.Time{}
	r.ClearConfirmed()
	r.failed = nil
	r.HistoricDone = false
	e.pager.Resume.Forget(r.URL)
	r.consolidateBy, r.liveDeferredAt = time.Time{}, time.Time{}
	r.baseline, r.refs = 0, nil
	r.fullResyncAt = e.clock.Now().Add(e.fullResyncInterval())
	e.subs.subscribeLayer1(r)
	e.sched.startBatch(r, repoindex.NewItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	e.recomputeRelay(r.URL)
}

// dropEmptyRelays disconnects relays nothing points at any more.
func (e *Engine) dropEmptyRelays() {
	wanted := repoindex.WantedRelays(e.disc.Repos, e.bootstrap23())
	for url, r := range e.relays {
		if r.Bootstrap || len(e.pending[url]) > 0 {
			continue
		}
		if !wanted.Has(url) {
			e.forget(url)
		}
	}
}

func (e *Engine) updateIndexMetrics() {
	if e.rootsCountedGen != e.disc.ReposGen()+1 {
		roots := 0
		for _, n := range e.disc.Repos {
			roots += n.Roots.Len()
		}
		e.rootsCounted, e.rootsCountedGen = uint64(roots), e.disc.ReposGen()+1
	}
	roots := e.rootsCounted
	connected := 0
	for _, r := range e.relays {
		if r.Status.IsUp() {
			connected++
		}
	}
	e.m.Repositories.Set(float64(len(e.disc.Repos)))
	e.m.RootEvents.Set(float64(roots))
	e.m.RelaysTracked.Set(float64(len(e.relays)))
	e.m.RelaysConnected.Set(float64(connected))
}
