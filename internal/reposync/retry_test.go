package reposync

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// scriptedHistoric fails every Sync while failing is set and records the
// filters it was asked.
type scriptedHistoric struct {
	mu      sync.Mutex
	failing bool
	calls   [][]nostr.Filter
}

func (s *scriptedHistoric) Sync(_ context.Context, _ *relay.Conn, fs []nostr.Filter, _ int, _ historic.Emit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fs)
	if s.failing {
		return errors.New("EOSE timeout")
	}
	return nil
}

func (s *scriptedHistoric) set(failing bool) {
	s.mu.Lock()
	s.failing = failing
	s.mu.Unlock()
}

func (s *scriptedHistoric) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// historicEnv is an engine with one remote relay "up" (no connection: the
// historic syncer is scripted), a manual clock and an observed log. The
// test runs the Run goroutine's work itself (drain).
type historicEnv struct {
	e    *Engine
	r    *remote
	clk  *clock.Manual
	hs   *scriptedHistoric
	logs *observer.ObservedLogs
	ref  string
}

const testRelay = "wss://relay.example.com"

func newHistoricEnv(t *testing.T) *historicEnv {
	t.Helper()
	cfg := DefaultConfig()
	cfg.HistoricRetryBase, cfg.HistoricRetryMax, cfg.HistoricRetryJitter = time.Minute, 10*time.Minute, 0
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	hs := &scriptedHistoric{}
	core, logs := observer.New(zapcore.InfoLevel)
	e := newBareEngineDeps(t, cfg, func(d *Deps) { d.Clock, d.Historic, d.Log = clk, hs, zap.New(core) })
	e.catchup = hs
	ref := nip34.RepoRef(nostr.GeneratePrivateKey()[:64], "repo")
	e.disc.Repos[ref] = &repoindex.RepoNeeds{Relays: repoindex.SetOf(testRelay), Roots: repoindex.NewSet()}
	e.track(testRelay, false)
	r := e.relays[testRelay]
	r.gen, r.Status, r.LastConnected, r.live = 1, repoindex.Syncing, clk.Now(), map[string]int{}
	e.lastEmpty = clk.Now()
	return &historicEnv{e: e, r: r, clk: clk, hs: hs, logs: logs, ref: ref}
}

// drain runs the Run goroutine's messages until every historic job started
// (a batch runs as one job per filter) has reported and none is queued.
func (h *historicEnv) drain(t *testing.T) {
	t.Helper()
	for h.r.running > 0 || len(h.r.jobs) > 0 {
		select {
		case fn := <-h.e.inbox:
			fn()
		case <-time.After(10 * time.Second):
			t.Fatal("no historic job reported")
		}
	}
}

// callsSince returns every filter the historic syncer was asked from call
// n on (the jobs of one batch ask one filter each).
func (h *historicEnv) callsSince(n int) []nostr.Filter {
	h.hs.mu.Lock()
	defer h.hs.mu.Unlock()
	var out []nostr.Filter
	for _, fs := range h.hs.calls[n:] {
		out = append(out, fs...)
	}
	return out
}

// eose answers every open since subscription with its EOSE, nothing
// capped (the test has no connection: it plays the relay).
func (h *historicEnv) eose(t *testing.T) {
	t.Helper()
	for id, cu := range h.r.since {
		h.e.subs.onSinceEOSE(testRelay, h.r.gen, id, cu, nil)
	}
	h.drain(t)
}

// sinceFilters are the filters of the open since subscriptions.
func (h *historicEnv) sinceFilters() []nostr.Filter {
	var out []nostr.Filter
	for _, cu := range h.r.since {
		out = append(out, cu.filters...)
	}
	return out
}

func (h *historicEnv) batch(t *testing.T) {
	t.Helper()
	items := repoindex.NewItems()
	items.Repos.Add(h.ref)
	h.e.sched.startBatch(h.r, items, nip34.Layer2([]string{h.ref}, 100, nil), false)
	h.drain(t)
}

// TestFailedHistoricBatchRetriedWithinMinutes: a failed historic batch is
// retried on the historic retry backoff (here 1 min, then 2 min), not left to
// the 23–25 h full resync; until a retry succeeds the relay is
// connected_historic_sync_failures, a quick reconnect does not clear that,
// and a successful retry does.
func TestFailedHistoricBatchRetriedWithinMinutes(t *testing.T) {
	h := newHistoricEnv(t)
	h.hs.set(true)
	h.batch(t)
	if h.r.Status != repoindex.ConnectedHistoricSyncFailures {
		t.Fatalf("after a failed batch: %v, want %v", h.r.Status, repoindex.ConnectedHistoricSyncFailures)
	}
	h.clk.Advance(59 * time.Second)
	h.e.onTick()
	first := h.hs.count() // one call per filter of the batch
	if first == 0 {
		t.Fatal("the batch asked nothing")
	}
	if n := h.hs.count(); n != first {
		t.Fatalf("retried after 59s (%d calls), want after the 1 min backoff", n)
	}
	h.clk.Advance(time.Second)
	h.e.onTick()
	h.drain(t) // the retry fails again: the next wait is 2 min
	if n := h.hs.count(); n != 2*first || h.r.Status != repoindex.ConnectedHistoricSyncFailures {
		t.Fatalf("after the first retry: %d calls (want %d), %v", n, 2*first, h.r.Status)
	}

	// A quick reconnect: the catch-up runs, the failure stays.
	h.hs.set(false)
	h.e.onDisconnected(testRelay, h.r.gen, errors.New("connection reset"))
	h.clk.Advance(10 * time.Second)
	h.r.gen, h.r.Status, h.r.live = 2, repoindex.Connecting, map[string]int{} // as onDialed does
	h.e.connectOrReconnect(h.r)
	h.eose(t) // the catch-up batch
	if h.r.Status != repoindex.ConnectedHistoricSyncFailures {
		t.Fatalf("after a quick reconnect: %v, want %v", h.r.Status, repoindex.ConnectedHistoricSyncFailures)
	}
	h.clk.Advance(2 * time.Minute)
	h.e.onTick()
	h.drain(t)
	if h.r.Status != repoindex.Connected || h.r.HistoricFailed {
		t.Fatalf("after a successful retry: %v (failed=%v), want connected", h.r.Status, h.r.HistoricFailed)
	}
	retried := h.callsSince(h.hs.count() - first)
	if !slices.ContainsFunc(retried, func(f nostr.Filter) bool { return slices.Contains(f.Tags["a"], h.ref) }) {
		t.Errorf("the retry asked %v, want the failed batch's filters", retried)
	}
}

// TestQuickReconnectCatchUpSinceDisconnect: a quick reconnect asks the
// catch-up with since = disconnect time − since_buffer (not the earlier
// connect time), in the live subscriptions themselves: nothing goes
// through the historic syncer, and the batch is done at their EOSE.
func TestQuickReconnectCatchUpSinceDisconnect(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)
	h.clk.Advance(time.Hour)
	disconnect := h.clk.Now()
	h.e.onDisconnected(testRelay, h.r.gen, errors.New("connection reset"))
	h.clk.Advance(time.Minute)
	h.r.gen, h.r.Status, h.r.live = 2, repoindex.Connecting, map[string]int{} // as onDialed does
	before := h.hs.count()
	h.e.connectOrReconnect(h.r)
	fs := h.sinceFilters()
	want := nostr.Timestamp(disconnect.Add(-h.e.cfg.SinceBuffer).Unix())
	if len(fs) < 2 || len(h.r.since) != len(h.r.live) {
		t.Fatalf("catch-up asked %v in %d of %d live subscriptions, want layer 1 and layer 2 with since in all", fs, len(h.r.since), len(h.r.live))
	}
	for _, f := range fs {
		if f.Since == nil || *f.Since != want || f.LimitZero || f.Limit != h.e.cfg.PageSize {
			t.Fatalf("catch-up filter %v: since %v, want %v, limit the page size", f, f.Since, want)
		}
	}
	if len(h.e.pending[testRelay]) != 1 {
		t.Fatalf("before EOSE: %d pending batches, want the catch-up pending", len(h.e.pending[testRelay]))
	}
	h.eose(t)
	if n := h.hs.count(); n != before {
		t.Errorf("the historic syncer was asked %v, want nothing (the live subscriptions caught up)", h.callsSince(before))
	}
	if h.r.Status != repoindex.Connected || len(h.e.pending[testRelay]) != 0 {
		t.Fatalf("after EOSE: %v with %d pending batches, want connected", h.r.Status, len(h.e.pending[testRelay]))
	}
}

// TestHistoricSyncCompleteOnce: once a relay's historic sync completed,
// batches for items discovered later do not turn it back to syncing, and
// "historic sync complete" is logged once.
func TestHistoricSyncCompleteOnce(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)
	if h.r.Status != repoindex.Connected {
		t.Fatalf("after the first batch: %v", h.r.Status)
	}
	for i := range 3 {
		items := repoindex.NewItems()
		items.Repos.Add(nip34.RepoRef(nostr.GeneratePrivateKey()[:64], "later"))
		h.e.sched.startBatch(h.r, items, nip34.Layer2(items.Repos.Sorted(), 100, nil), false)
		h.e.sched.updateRelayState(h.r)
		if h.r.Status != repoindex.Connected {
			t.Fatalf("batch %d for a newly discovered repository: %v, want connected", i, h.r.Status)
		}
		h.drain(t)
	}
	if n := h.logs.FilterMessage("historic sync complete").Len(); n != 1 {
		t.Errorf("historic sync complete logged %d times, want 1", n)
	}
}

// TestRateLimitReasonsStartCooldown: a rate limit in the reason of a
// NEG-ERR, a refusing OK or a CLOSED from a remote relay starts its
// cooldown through the health tracker's classifier, as a NOTICE does; a
// reason that is no rate limit does not.
func TestRateLimitReasonsStartCooldown(t *testing.T) {
	for _, c := range []struct {
		name string
		hear func(relay.Options)
		cool bool
	}{
		{"NEG-ERR rate-limited:", func(o relay.Options) { o.OnNegErr("n1", "rate-limited: too many sessions") }, true},
		{"NEG-ERR blocked:", func(o relay.Options) { o.OnNegErr("n1", "blocked: too many query results") }, false},
		{"OK false rate-limited:", func(o relay.Options) { o.OnOK("id", false, "rate-limited: slow down") }, true},
		{"OK false without prefix", func(o relay.Options) { o.OnOK("id", false, "error: you are sending too many events") }, true},
		{"OK true", func(o relay.Options) { o.OnOK("id", true, "rate-limited: odd but accepted") }, false},
		{"CLOSED rate-limited:", func(o relay.Options) { o.OnClosed("s1", "rate-limited: slow down") }, true},
		{"CLOSED restricted:", func(o relay.Options) { o.OnClosed("s1", "restricted: not allowed") }, false},
		{"NOTICE", func(o relay.Options) { o.OnNotice("slow down, too many requests") }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHistoricEnv(t)
			c.hear(h.e.remoteOptions(testRelay))
			if got := h.e.d.Health.CooldownRemaining(testRelay) > 0; got != c.cool {
				t.Fatalf("cooling down = %v, want %v", got, c.cool)
			}
		})
	}
}

// TestRefusedBeforeFirstJobIsFailure: a permanent refusal ("blocked:")
// heard before the first historic job was sent keeps the jobs from
// starting for the refusal wait; the relay is reported with historic sync
// failures, not "syncing" for hours (TestWildReqBlocked met this when the
// live subscription's CLOSED came first).
func TestRefusedBeforeFirstJobIsFailure(t *testing.T) {
	h := newHistoricEnv(t)
	h.e.remoteOptions(testRelay).OnClosed("s1", "blocked: not on the allow list")
	if h.e.d.Health.RefusalRemaining(testRelay) <= 0 {
		t.Fatal("the blocked: CLOSED started no refusal wait: the test tests nothing")
	}
	items := repoindex.NewItems()
	items.Repos.Add(h.ref)
	h.e.sched.startBatch(h.r, items, nip34.Layer2([]string{h.ref}, 100, nil), false)
	if h.r.running > 0 || h.hs.count() > 0 {
		t.Fatalf("a job started during the refusal wait (%d running, %d asked)", h.r.running, h.hs.count())
	}
	h.e.sched.updateRelayState(h.r)
	if h.r.Status != repoindex.ConnectedHistoricSyncFailures || !h.r.HistoricFailed || h.r.HistoricDone {
		t.Fatalf("refused before the first job: %v (failed %v, done %v), want connected_historic_sync_failures, not done",
			h.r.Status, h.r.HistoricFailed, h.r.HistoricDone)
	}
	// The wait over, the first sync runs: syncing, then connected.
	h.clk.Advance(h.e.d.Health.RefusalRemaining(testRelay) + time.Second)
	h.e.sched.startJobs(h.r)
	h.e.sched.updateRelayState(h.r)
	if h.r.Status != repoindex.Syncing {
		t.Fatalf("after the refusal wait with the first sync's jobs running: %v, want syncing", h.r.Status)
	}
	h.drain(t)
	if h.r.Status != repoindex.Connected || !h.r.HistoricDone || h.hs.count() == 0 {
		t.Fatalf("after the first sync: %v (done %v, %d asked), want connected", h.r.Status, h.r.HistoricDone, h.hs.count())
	}
}
