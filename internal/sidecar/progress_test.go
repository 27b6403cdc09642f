package sidecar

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

func TestProgressDefault(t *testing.T) {
	if got := config.Default().Log.ProgressInterval; got != DefaultProgressInterval {
		t.Errorf("config default %v, sidecar default %v", got, DefaultProgressInterval)
	}
}

func TestProgressLines(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := &Sidecar{log: zap.New(core)}
	t0 := time.Unix(1_700_000_000, 0)
	busy := status.Snapshot{
		Relays: []status.Relay{
			{URL: "wss://a", State: "connected", ReposConfirmed: 3, EventsReceived: 400},
			{URL: "wss://b", State: "syncing", ReposConfirmed: 1, ReposPending: 2, EventsReceived: 600},
		},
		Publisher: status.Publisher{Accepted: 700, Duplicates: 300, Queued: 5},
	}
	last := s.logProgress(busy, progress{at: t0}, t0.Add(10*time.Second))
	lines := logs.TakeAll()
	if len(lines) != 1 || lines[0].Message != "sync progress" {
		t.Fatalf("want one progress line, got %v", lines)
	}
	m := lines[0].ContextMap()
	want := map[string]any{
		"relays_done": int64(1), "relays_total": int64(2), "relays_connected": int64(2),
		"relay_repo_pairs_confirmed": int64(4), "relay_repo_pairs": int64(6),
		"events_received": uint64(1000), "events_published": uint64(700), "events_duplicate": uint64(300),
		"received_per_s": float64(100), "published_per_s": float64(70), "publish_queue": int64(5),
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, m[k], m[k], v)
		}
	}

	// Work finishes: one "caught up" line, then silence while idle.
	idle := busy
	idle.Relays = []status.Relay{busy.Relays[0], {URL: "wss://b", State: "connected", ReposConfirmed: 3, EventsReceived: 600}}
	idle.Publisher.Queued = 0
	last = s.logProgress(idle, last, t0.Add(20*time.Second))
	last = s.logProgress(idle, last, t0.Add(30*time.Second))
	lines = logs.TakeAll()
	if len(lines) != 1 || lines[0].Message != "sync caught up" {
		t.Fatalf("want one caught-up line, got %v", lines)
	}

	// Live events flowing again: progress with the interval's rate.
	idle.Relays[0].EventsReceived += 50
	s.logProgress(idle, last, t0.Add(40*time.Second))
	lines = logs.TakeAll()
	if len(lines) != 1 || lines[0].ContextMap()["received_per_s"] != float64(5) {
		t.Fatalf("want a progress line at 5 events/s, got %v", lines)
	}
}

// The progress line's repositories is the status's count; the per-relay
// sums (relay_repo_pairs_confirmed, relay_repo_pairs) count relay-repository
// pairs, under names of their own.
func TestProgressRepositoriesAgreeWithStatus(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	s := &Sidecar{log: zap.New(core)}
	t0 := time.Unix(1_700_000_000, 0)
	st := status.Snapshot{
		Repositories: 2,
		Relays: []status.Relay{
			{URL: "wss://a", State: "syncing", ReposConfirmed: 1, ReposPending: 1},
			{URL: "wss://b", State: "syncing", ReposConfirmed: 2},
		},
	}
	s.logProgress(st, progress{at: t0}, t0.Add(10*time.Second))
	lines := logs.TakeAll()
	if len(lines) != 1 {
		t.Fatalf("want one progress line, got %v", lines)
	}
	m := lines[0].ContextMap()
	if m["repositories"] != int64(st.Repositories) {
		t.Errorf("repositories = %v, status says %d", m["repositories"], st.Repositories)
	}
	if m["relay_repo_pairs"] != int64(4) || m["relay_repo_pairs_confirmed"] != int64(3) {
		t.Errorf("relay-repository pairs %v/%v, want 3/4", m["relay_repo_pairs_confirmed"], m["relay_repo_pairs"])
	}
	for _, old := range []string{"repos_total", "repos_confirmed"} {
		if _, ok := m[old]; ok {
			t.Errorf("the progress line still has %s, a name read as a repository count", old)
		}
	}
}
