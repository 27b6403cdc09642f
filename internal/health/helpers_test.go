package health

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const relayA = "wss://a.example.com"
const relayB = "wss://b.example.com"

// newTestTracker returns a Tracker on a manual clock with jitter disabled,
// registered on a fresh registry. mut may adjust the config.
func newTestTracker(t *testing.T, mut func(*Config), opts ...Option) (*Tracker, *clock.Manual, *prometheus.Registry) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Jitter = 0
	if mut != nil {
		mut(&cfg)
	}
	clock := clock.NewManual(epoch)
	reg := prometheus.NewRegistry()
	tr, err := New(cfg, clock, reg, nil, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tr, clock, reg
}

// wantAttempt asserts CanAttempt(url).
func wantAttempt(t *testing.T, tr *Tracker, url string, wantOK bool, wantWait time.Duration) {
	t.Helper()
	ok, wait := tr.CanAttempt(url)
	if ok != wantOK || wait != wantWait {
		t.Fatalf("CanAttempt(%s) = %v, %s; want %v, %s", url, ok, wait, wantOK, wantWait)
	}
}

func wantState(t *testing.T, tr *Tracker, url string, want State) {
	t.Helper()
	if got := tr.State(url); got != want {
		t.Fatalf("State(%s) = %s, want %s", url, got, want)
	}
}
