package reposync

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// A relay restored with a downtime inside the quick-reconnect window keeps
// its confirmed items and resumes as a quick reconnect; outside the window,
// or with nothing to measure the downtime by, it syncs afresh, as a
// dropped connection would.
func TestRestoredRelayResumesLikeADroppedConnection(t *testing.T) {
	e := newBareEngine(t)
	now := e.clock.Now()
	root := strings.Repeat("ab", 32)
	e.RestoreRelays([]PersistedRelay{
		{URL: "wss://inside.example", Repos: []string{"30617:x:y"}, Roots: []string{root}, HistoricDone: true,
			LastConnected: now.Add(-time.Hour), SeenUp: now.Add(-time.Minute)},
		{URL: "wss://outside.example", Repos: []string{"30617:x:y"}, HistoricDone: true,
			LastConnected: now.Add(-2 * time.Hour), DisconnectedAt: now.Add(-e.cfg.QuickReconnectWindow - time.Minute)},
		{URL: "wss://crashed-unknown.example", Repos: []string{"30617:x:y"}, HistoricDone: true, LastConnected: now.Add(-time.Hour)},
		{URL: "wss://unfinished.example", Repos: []string{"30617:x:y"},
			LastConnected: now.Add(-time.Hour), SeenUp: now.Add(-time.Minute)},
	})
	fresh := func(url string) bool {
		e.track(url, false)
		return e.needsFreshSync(e.relays[url], now)
	}
	if fresh("wss://inside.example") {
		t.Error("a relay down one minute would sync afresh, want a quick reconnect")
	}
	if r := e.relays["wss://inside.example"]; !r.Confirmed.Repos.Has("30617:x:y") || !r.Confirmed.Roots.Has(root) {
		t.Error("confirmed items not restored")
	}
	if !fresh("wss://outside.example") {
		t.Error("a relay down longer than the window would resume, want a fresh sync")
	}
	if !fresh("wss://crashed-unknown.example") {
		t.Error("a relay with no disconnection or last-seen time would resume, want a fresh sync")
	}
	if !fresh("wss://unfinished.example") {
		t.Error("a relay whose historic sync had not completed (or had a failed batch) would resume, want a fresh sync")
	}
	if !fresh("wss://never-seen.example") {
		t.Error("an unknown relay would resume")
	}
}

// The persistable relay states are built when the store asks, not with
// every status refresh, and a relay's ConfirmedGen moves exactly when its
// confirmed items changed: a confirmed batch, a clear (even to as many
// items as before), a restore, or the relay forgotten and tracked again.
func TestRelayStatesConfirmedGen(t *testing.T) {
	e := newBareEngine(t)
	const url = "wss://r.example"
	ref := "30617:" + strings.Repeat("a", 64) + ":proj"
	e.RestoreRelays([]PersistedRelay{{URL: url, Repos: []string{ref}, HistoricDone: true,
		LastConnected: e.clock.Now().Add(-time.Hour), SeenUp: e.clock.Now()}})
	e.track(url, false)
	e.refreshSnapshot()
	if rs := e.RelayStates(); rs != nil {
		t.Fatalf("a status refresh built the relay states: %+v", rs)
	}
	snap := func() PersistedRelay {
		t.Helper()
		e.storeRelaySnapshot()
		rs := e.RelayStates()
		if len(rs) != 1 {
			t.Fatalf("relay states: %+v", rs)
		}
		return rs[0]
	}
	p := snap()
	if len(p.Repos) != 1 || p.ConfirmedGen == 0 {
		t.Fatalf("restored relay: %+v", p)
	}
	if q := snap(); q.ConfirmedGen != p.ConfirmedGen {
		t.Fatalf("generation moved with nothing changed: %d → %d", p.ConfirmedGen, q.ConfirmedGen)
	}
	steps := []struct {
		name  string
		do    func()
		repos int
	}{
		{"a confirmed batch", func() {
			items := repoindex.NewItems()
			items.Repos.Add("30617:" + strings.Repeat("b", 64) + ":other")
			e.sched.onBatchDone(e.relays[url], &repoindex.PendingBatch{ID: 1, Items: items}, &batchRun{})
		}, 2},
		{"a clear", func() { e.relays[url].ClearConfirmed() }, 0},
		{"a clear and as many items again", func() {
			r := e.relays[url]
			r.ClearConfirmed()
			r.Confirmed.Repos.Add(ref) // as Confirmed changes only with a bump
			r.ConfirmedGen++
			e.storeRelaySnapshot()
			r.ClearConfirmed()
			items := repoindex.NewItems()
			items.Repos.Add("30617:" + strings.Repeat("c", 64) + ":third")
			e.sched.onBatchDone(r, &repoindex.PendingBatch{ID: 3, Items: items}, &batchRun{})
		}, 1},
		{"forgotten and tracked again", func() {
			e.forget(url)
			e.track(url, false)
		}, 0},
	}
	last := snap()
	for _, s := range steps {
		s.do()
		q := snap()
		if q.ConfirmedGen == last.ConfirmedGen {
			t.Errorf("%s: generation did not move (%d)", s.name, q.ConfirmedGen)
		}
		if len(q.Repos) != s.repos {
			t.Errorf("%s: %d repos persisted, want %d", s.name, len(q.Repos), s.repos)
		}
		last = q
	}
}

// A connection that drops during the relay's first historic sync is
// resumed by a quick reconnect, not synced afresh: the items of its
// pending batches (not its catch-up's) are kept to be asked again batch
// by batch. A restarted sidecar, which keeps no failed batches, syncs such
// a relay afresh.
func TestDropDuringFirstSyncResumes(t *testing.T) {
	e := newBareEngine(t)
	const url = "wss://dropping.example"
	e.track(url, false)
	r := e.relays[url]
	r.Status, r.LastConnected, r.gen = repoindex.Syncing, e.clock.Now(), 7
	a, b := repoindex.NewItems(), repoindex.NewItems()
	a.Repos.Add("30617:x:a")
	b.Roots.Add(strings.Repeat("cd", 32))
	e.pending[url] = []*repoindex.PendingBatch{{Items: a}, {Items: b}, {Items: repoindex.NewItems(), Catchup: true}}
	e.onDisconnected(url, 7, errors.New("read: EOF"))
	if e.needsFreshSync(r, e.clock.Now()) {
		t.Fatal("a drop during the first historic sync syncs afresh, want it resumed")
	}
	if len(r.parked) != 2 || !r.parked[0].Repos.Has("30617:x:a") || r.parked[1].Roots.Len() != 1 {
		t.Fatalf("parked %v, want the two batches' items", r.parked)
	}
	e.storeRelaySnapshot()
	e2 := newBareEngine(t)
	e2.RestoreRelays(e.RelayStates())
	e2.track(url, false)
	if !e2.needsFreshSync(e2.relays[url], e.clock.Now()) {
		t.Error("after a restart a relay whose first sync did not complete resumes, want a fresh sync")
	}
}
