package health

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	cfg.JitterFraction = 0
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

// gathered returns the value of the gauge name{relay=url} (url "" for an
// unlabelled gauge) and whether the series exists.
func gathered(t *testing.T, reg *prometheus.Registry, name, url string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "relay") == url {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
