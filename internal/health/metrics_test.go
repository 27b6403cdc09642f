package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

func TestTrackerMetrics(t *testing.T) {
	tr, clock, reg := newTestTracker(t, nil)
	const c, d = "wss://c.example.com", "wss://d.example.com"
	for _, u := range []string{relayA, relayB, c, d} {
		tr.Track(u)
	}
	tr.Connected(relayA)
	tr.Failed(relayB, errors.New("refused"))
	tr.Failed(relayB, errors.New("refused"))
	tr.Observe(c, SourceNotice, "rate-limited: slow down")
	tr.Failed(d, errors.New("refused"))
	clock.Advance(24 * time.Hour) // d's (and b's) failures have lasted 24 h: dead
	tr.Observe(c, SourceNotice, "rate-limited: still")
	tr.Tick()

	for _, tc := range []struct {
		url      string
		status   float64
		failures float64
	}{
		{relayA, 1, 0},
		{relayB, 4, 2},
		{c, 5, 0},
		{d, 4, 1},
	} {
		if got, ok := testkit.Series(t, reg, MetricRelayStatus, map[string]string{"relay": tc.url}); !ok || got != tc.status {
			t.Errorf("%s{relay=%q} = %v (present %v), want %v", MetricRelayStatus, tc.url, got, ok, tc.status)
		}
		if got, ok := testkit.Series(t, reg, MetricRelayFailures, map[string]string{"relay": tc.url}); !ok || got != tc.failures {
			t.Errorf("%s{relay=%q} = %v (present %v), want %v", MetricRelayFailures, tc.url, got, ok, tc.failures)
		}
	}
	if got, _ := testkit.Series(t, reg, MetricRelaysDead, map[string]string{"relay": ""}); got != 2 {
		t.Errorf("%s = %v, want 2", MetricRelaysDead, got)
	}
	if got, _ := testkit.Series(t, reg, MetricRelaysRateLimited, map[string]string{"relay": ""}); got != 1 {
		t.Errorf("%s = %v, want 1", MetricRelaysRateLimited, got)
	}

	// Forget removes the relay's series; the totals follow on the tick.
	tr.Forget(relayB)
	tr.Forget(relayB) // twice is harmless
	for _, name := range []string{MetricRelayStatus, MetricRelayFailures} {
		if _, ok := testkit.Series(t, reg, name, map[string]string{"relay": relayB}); ok {
			t.Errorf("%s{relay=%q} still present after Forget", name, relayB)
		}
	}
	clock.Advance(65 * time.Second)
	tr.Tick()
	if got, _ := testkit.Series(t, reg, MetricRelaysDead, map[string]string{"relay": ""}); got != 1 {
		t.Errorf("%s after Forget = %v, want 1", MetricRelaysDead, got)
	}
	if got, _ := testkit.Series(t, reg, MetricRelaysRateLimited, map[string]string{"relay": ""}); got != 0 {
		t.Errorf("%s after cooldown = %v, want 0", MetricRelaysRateLimited, got)
	}
	if got, _ := testkit.Series(t, reg, MetricRelayStatus, map[string]string{"relay": c}); got != 2 {
		t.Errorf("status of %s after cooldown = %v, want 2 (disconnected)", c, got)
	}
}

func TestTrackerMetricsHelpAndTypes(t *testing.T) {
	tr, _, reg := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Tick()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %s, want a gauge", mf.GetName(), mf.GetType())
		}
		got[mf.GetName()] = mf.GetHelp()
	}
	want := map[string]string{
		MetricRelayStatus:       "Health state per relay: 1 healthy, 2 disconnected, 3 degraded, 4 dead, 5 rate_limited.",
		MetricRelayFailures:     "Consecutive connection failures per relay.",
		MetricRelaysDead:        "Number of relays currently dead.",
		MetricRelaysRateLimited: "Number of relays currently in a rate-limit cooldown.",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("gathered help = %v, want %v", got, want)
	}
}

func TestNewRegistersOnceAndAcceptsNilRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(DefaultConfig(), nil, reg, nil); err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := New(DefaultConfig(), nil, reg, nil); err == nil {
		t.Fatal("second New on the same registry succeeded; want a registration error")
	}
	tr, err := New(DefaultConfig(), nil, nil, nil)
	if err != nil {
		t.Fatalf("New with nil registry: %v", err)
	}
	tr.Track(relayA)
	tr.Tick()
}

func TestTrackerRun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tick = time.Millisecond
	reg := prometheus.NewRegistry()
	clock := clock.NewManual(epoch)
	tr, err := New(cfg, clock, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.Track(relayA)
	tr.Failed(relayA, errors.New("refused"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()

	// Run's ticks (on the clock) update the metrics; once Run waits for
	// its first tick, walk the clock and wait for the relay to show up
	// dead without calling Tick ourselves.
	deadline := time.Now().Add(10 * time.Second)
	for clock.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run did not start its ticker within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	clock.Advance(24 * time.Hour)
	for {
		if v, _ := testkit.Series(t, reg, MetricRelaysDead, map[string]string{"relay": ""}); v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not update the metrics within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestTrackerConcurrent exercises every method from many goroutines; run
// with -race.
func TestTrackerConcurrent(t *testing.T) {
	tr, clock, reg := newTestTracker(t, func(c *Config) { c.Jitter = 0.2 })
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				url := fmt.Sprintf("wss://r%d.example.com", (g+i)%5)
				tr.Track(url)
				switch i % 11 {
				case 0:
					tr.AttemptStarted(url)
				case 1:
					tr.Connected(url)
				case 2:
					tr.Failed(url, errors.New("refused"))
				case 3:
					tr.Observe(url, SourceNotice, "rate-limited: x")
				case 4:
					tr.Observe(url, SourceNotice, "ERROR: too many concurrent REQs")
				case 5:
					tr.SetLimits(url, relay.Limits{MaxSubscriptions: 10 + i})
				case 6:
					tr.CanAttempt(url)
					tr.CooldownRemaining(url)
					tr.SubscriptionBudget(url)
				case 7:
					tr.Snapshot()
					tr.Due()
				case 8:
					tr.Tick()
				case 9:
					clock.Advance(time.Second)
					tr.Disconnected(url)
				case 10:
					if i%3 == 0 {
						tr.Forget(url)
					}
				}
			}
		}()
	}
	wg.Wait()
	tr.Tick()
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	for _, h := range tr.Snapshot() {
		if h.SubscriptionBudget < 1 {
			t.Fatalf("%s budget %d < 1", h.URL, h.SubscriptionBudget)
		}
	}
}
