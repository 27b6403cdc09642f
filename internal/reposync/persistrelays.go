package reposync

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/discovery"
	"github.com/grasp-sync/grasp-sync/internal/persisted"
)

// PersistedRelay is one remote relay's sync state as a state store keeps
// it (persisted.Relay).
type PersistedRelay = persisted.Relay

// RelayStates returns every tracked remote relay's persistable state. It
// is built when asked, on the Run goroutine; when the engine does not
// answer within a second (or is not running), the last one built (nil
// before the first). Run builds one last when it stops, before it drops
// the connections.
func (e *Engine) RelayStates() []PersistedRelay {
	e.onRunGoroutine(e.storeRelaySnapshot)
	e.snapMu.Lock()
	defer e.snapMu.Unlock()
	return e.relaySnap
}

// storeRelaySnapshot builds the persistable relay states (on the Run
// goroutine) and keeps them for RelayStates.
func (e *Engine) storeRelaySnapshot() {
	relays := e.snapshotRelays()
	e.snapMu.Lock()
	e.relaySnap = relays
	e.snapMu.Unlock()
}

// RestoreRelays hands the engine the relay states of the previous run;
// call it before Run. A relay's state is applied when the relay is
// tracked again (bootstrap relays at start, others when an announcement
// names them), so its next connection resumes rather than starts over.
func (e *Engine) RestoreRelays(rs []PersistedRelay) {
	e.restored = make(map[string]PersistedRelay, len(rs))
	for _, r := range rs {
		e.restored[r.URL] = r
		if e.neg != nil && r.Negentropy != "" && !r.NegentropyAt.IsZero() {
			e.neg.RestoreSupport(r.URL, r.Negentropy == "supported", r.NegentropyAt)
		}
	}
}

// applyRestored gives a newly tracked relay its persisted state.
func (e *Engine) applyRestored(r *remote) {
	p, ok := e.restored[r.URL]
	if !ok {
		return
	}
	delete(e.restored, r.URL)
	for _, v := range p.Repos {
		r.Confirmed.Repos.Add(v)
	}
	for _, v := range p.Roots {
		r.Confirmed.Roots.Add(v)
	}
	r.ConfirmedGen++
	r.LastConnected = p.LastConnected
	r.DisconnectedAt = p.DisconnectedAt
	if r.DisconnectedAt.IsZero() {
		r.DisconnectedAt = p.SeenUp
	}
	if r.DisconnectedAt.IsZero() {
		r.LastConnected = time.Time{} // nothing to measure the downtime by: fresh
	}
	// Its confirmed items were synced, with no failed batch waiting: a
	// reconnect inside the window catches up instead of starting over.
	r.HistoricDone = p.HistoricDone && !r.LastConnected.IsZero()
}

// snapshotRelays builds the persistable relay states; it runs on the Run
// goroutine.
func (e *Engine) snapshotRelays() []PersistedRelay {
	now := e.clock.Now()
	out := make([]PersistedRelay, 0, len(e.relays))
	e.confirmedLists.Keep(func(url string) bool { return e.relays[url] != nil })
	for _, r := range e.relays {
		repos, roots, gen := e.confirmedLists.Of(&r.RelayState)
		p := PersistedRelay{URL: r.URL, LastConnected: r.LastConnected, DisconnectedAt: r.DisconnectedAt,
			Repos: repos, Roots: roots, ConfirmedGen: gen, HistoricDone: r.HistoricDone && !r.HistoricFailed}
		switch {
		case r.Status.IsUp() && (!r.catchupFrom.IsZero() || !r.liveDeferredAt.IsZero() || !r.windowFrom.IsZero()):
			// Its catch-up (or reconciliation) has not completed, or
			// items are confirmed without their live filters.
			p.DisconnectedAt = catchUpFrom(r, now)
		case r.Status.IsUp():
			p.DisconnectedAt, p.SeenUp = time.Time{}, now
		}
		if e.neg != nil {
			p.Negentropy, p.NegentropyAt = e.neg.SupportOf(r.URL)
		}
		out = append(out, p)
	}
	return out
}

// needsFreshSync tells a fresh sync (a first connection, a relay whose
// first historic sync did not complete in an earlier run — a catch-up since
// the disconnect would not cover its history, and its failed batches are
// not kept —, or a downtime longer than the quick-reconnect window) from a
// quick reconnect, which resumes a first historic sync its connection
// dropped in this run (resumeSync).
func (e *Engine) needsFreshSync(r *remote, now time.Time) bool {
	return r.LastConnected.IsZero() || !r.HistoricDone && !r.resumeSync || now.Sub(r.DisconnectedAt) > e.cfg.QuickReconnectWindow
}

// forgetConfirmed makes every remote relay sync afresh: what the previous
// run confirmed is no longer on the own relay, and a quick reconnect would
// only ask for what is newer. It runs on the Run goroutine before remote
// relays may connect (the caller declares readiness after it).
func (e *Engine) forgetConfirmed(ctx context.Context, lost int) {
	done := make(chan struct{})
	e.post(func() {
		defer close(done)
		e.log.Warn("the own relay lost events while the sidecar was down; every remote relay syncs afresh",
			zap.Int("events_lost", lost))
		e.restored = nil
		for _, r := range e.relays {
			r.ClearConfirmed()
			r.LastConnected = time.Time{}
		}
	})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// RepoState returns the persistable repository index as of the last status
// refresh, with the roots on the own relay its batches had not applied
// (discovery.Discovery.RepoState).
func (e *Engine) RepoState() discovery.PersistedRepos { return e.disc.RepoState() }

// RestoreRepos hands the engine the previous run's repository index; call
// it before Run.
func (e *Engine) RestoreRepos(p discovery.PersistedRepos) { e.disc.RestoreRepos(p) }
