package reposync

import (
	"slices"
	"strings"

	"github.com/grasp-sync/grasp-sync/internal/status"
)

// refreshSnapshot rebuilds the engine's part of the status document.
func (e *Engine) refreshSnapshot() {
	health := map[string]string{}
	for _, h := range e.d.Health.Snapshot() {
		health[h.URL] = h.State.String()
	}
	s := status.Snapshot{
		StartedAt:    e.startedAt,
		Repositories: len(e.disc.Repos),
		OwnRelay: status.OwnRelay{URL: e.cfg.OwnRelay, Connected: e.disc.OwnUp(), SelfSubscriptionEOSE: e.disc.Ready(),
			TiesCut: e.pager.Truncation.TiesCut(e.cfg.OwnRelay), Truncation: e.pager.Truncation.Describe(e.cfg.OwnRelay)},
	}
	for _, n := range e.disc.Repos {
		s.RootEvents += n.Roots.Len()
	}
	for _, r := range e.relays {
		rs := status.Relay{
			URL: r.URL, State: r.Status.String(), Health: health[r.URL], Bootstrap: r.Bootstrap,
			ReposConfirmed: r.Confirmed.Repos.Len(), RootsConfirmed: r.Confirmed.Roots.Len(),
			FiltersOpen: e.subs.filtersOpen(r), PendingBatches: len(e.pending[r.URL]),
			ReposPending: r.pendingRepos, RootsPending: r.pendingRoots,
			EventsReceived: r.received.Load(), EventsNew: e.h.Fresh(r.URL), Failures: r.failures, LastError: r.lastError,
			Truncation: e.pager.Truncation.Describe(r.URL), TiesCut: e.pager.Truncation.TiesCut(r.URL),
			ReadAuth: e.pager.Auth.Describe(r.URL), Refused: e.d.Health.Refusal(r.URL),
		}
		if rs.Refused == "" {
			rs.Refused = e.d.Pacer.Backoff(r.URL)
		}
		if e.neg != nil {
			rs.Negentropy = e.neg.Support(r.URL)
		}
		if t := r.LastConnected; !t.IsZero() {
			rs.LastConnected = &t
		}
		s.PendingBatches += rs.PendingBatches
		s.Relays = append(s.Relays, rs)
	}
	slices.SortFunc(s.Relays, func(a, b status.Relay) int { return strings.Compare(a.URL, b.URL) })
	hot, cold := e.h.Rejected().Len()
	s.Rejected = status.Rejected{Hot: hot, Cold: cold}
	e.snapMu.Lock()
	e.snap = s
	e.snapMu.Unlock()
	e.disc.PublishRepos() // the repository index's copy for the state store
}

// onRunGoroutine runs fn on the Run goroutine and waits for it up to one
// tick (the snapshot is refreshed every tick: waiting longer would not
// give a fresher one) or until Run is stopping (fn may then never run); it
// gives up at once when the engine is not running or its inbox is full
// (the caller then reads what was built last).
func (e *Engine) onRunGoroutine(fn func()) {
	if !e.running.Load() {
		return
	}
	done := make(chan struct{})
	select {
	case e.inbox <- func() { fn(); close(done) }:
		select {
		case <-done:
		case <-e.ctx.Done():
		case <-e.clock.After(e.cfg.Tick):
		}
	default:
	}
}

// Status returns the engine's latest status (refreshed every tick and on
// request when the engine is responsive).
func (e *Engine) Status() status.Snapshot {
	e.onRunGoroutine(e.refreshSnapshot)
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	s := e.snap
	s.Relays = append([]status.Relay(nil), s.Relays...)
	s.Ready = e.Ready()
	s.OwnRelay.Connected = e.disc.OwnUp()
	s.OwnRelay.SelfSubscriptionEOSE = e.disc.Ready()
	return s
}
