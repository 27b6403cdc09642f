package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// syncTimeout bounds how long a scenario waits for convergence: generous,
// as it only matters when something is broken, and longer under -race.
var syncTimeout = func() time.Duration {
	if raceEnabled {
		return 120 * time.Second
	}
	return 45 * time.Second
}()

// scaled returns n, or a third of it under -race (never below min): the
// race detector makes signature checks ~10x slower, so the heavy scenarios
// run at full size only without it (.ci/run runs them both ways).
func scaled(n, min int) int {
	if raceEnabled {
		return max(n/3, min)
	}
	return n
}

// fastConfig is the default configuration with timers shrunk so scenarios
// run in seconds.
// defaultConfig is what an operator runs (every setting at its default)
// against own, with the status listener on a free port and dials allowed
// to loopback: benchmarks and soaks measure it.
func defaultConfig(own *harness.Relay) *config.Config {
	cfg := config.Default()
	cfg.OwnRelay, cfg.Listen, cfg.ShutdownGrace = own.URL(), "127.0.0.1:0", 5*time.Second
	cfg.Dial.Allow = []string{"127.0.0.0/8"}
	return cfg
}

func fastConfig(own *harness.Relay) *config.Config {
	cfg := config.Default()
	cfg.OwnRelay = own.URL()
	cfg.Listen = "127.0.0.1:0"
	cfg.ShutdownGrace = 5 * time.Second
	cfg.Sync.BatchWindow = 100 * time.Millisecond
	cfg.Sync.EOSETimeout = 10 * time.Second
	cfg.Sync.EmptyRelayCheck = time.Second
	cfg.Sync.ConsolidationWait = 500 * time.Millisecond
	cfg.Health.Tick = 100 * time.Millisecond
	cfg.Health.BackoffBase = 200 * time.Millisecond
	cfg.Health.BackoffMax = time.Second
	cfg.Health.RateLimitCooldown = time.Second
	cfg.Health.StabilityPeriod = time.Second
	cfg.Relay.ConnectTimeout = 2 * time.Second
	cfg.Publisher.RetryBase = 50 * time.Millisecond
	cfg.Publisher.RetryMax = 500 * time.Millisecond
	// Not shrunk: the timer runs from each EVENT's send, and the own
	// relay, slowed by -race on a loaded machine, can take more than 3 s
	// to answer a full window; the timeouts then reconnected the publisher
	// and sent everything in flight again, again and again.
	cfg.Publisher.OKTimeout = 15 * time.Second
	cfg.Dial.Allow = []string{"127.0.0.0/8"}
	return cfg
}

// runningSidecar is a sidecar started by a test.
type runningSidecar struct {
	*sidecar.Sidecar
	Registry *prometheus.Registry
	cancel   context.CancelFunc
	done     chan error
	stopped  bool
}

// Stop shuts the sidecar down and waits for it; a second Stop does nothing.
func (s *runningSidecar) Stop(t *testing.T) {
	t.Helper()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("sidecar Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("sidecar did not stop")
	}
}

// startSidecar runs a sidecar with cfg until the test ends.
func startSidecar(t *testing.T, cfg *config.Config) *runningSidecar {
	t.Helper()
	return startSidecarDeps(t, cfg, sidecar.Deps{})
}

// startSidecarDeps is startSidecar with collaborators of the test's (a
// logger, a git runner); the registry and version are always the test's.
func startSidecarDeps(t *testing.T, cfg *config.Config, d sidecar.Deps) *runningSidecar {
	t.Helper()
	reg := prometheus.NewRegistry()
	if d.Log == nil {
		d.Log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	}
	d.Registry, d.Version = reg, "test"
	sc, err := sidecar.New(cfg, d)
	if err != nil {
		t.Fatalf("sidecar.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningSidecar{Sidecar: sc, Registry: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- sc.Run(ctx) }()
	t.Cleanup(func() { rs.Stop(t) })
	testkit.WaitFor(t, syncTimeout, "sidecar never became ready", sc.Ready)
	return rs
}

// waitHas waits until relay r holds every event in evs.
func waitHas(t *testing.T, r *harness.Relay, evs ...*nostr.Event) {
	t.Helper()
	missing := func() int {
		n := 0
		for _, ev := range evs {
			if !r.Has(ev.ID) {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, syncTimeout, fmt.Sprintf("%d events on %s", len(evs), r.URL()), func() bool { return missing() == 0 })
}

// ownRelay starts an own relay with the GRASP-like acceptance policy.
func ownRelay(t *testing.T) *harness.Relay {
	t.Helper()
	return harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy()})
}

// repoFor builds an announcement for d listing own and the given relays in
// both clone and relays tags.
func repoFor(k *signed.Key, d string, own *harness.Relay, relays ...*harness.Relay) *nostr.Event {
	urls := []string{own.URL()}
	clones := []string{"http://" + own.Addr() + "/" + k.Npub() + "/" + d + ".git"}
	for _, r := range relays {
		urls = append(urls, r.URL())
	}
	return k.Announcement(d, signed.WithRelays(urls...), signed.WithClone(clones...))
}

// mustPublish publishes through the front door.
func mustPublish(t testing.TB, r *harness.Relay, evs ...*nostr.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := harness.Publish(ctx, r.URL(), evs...); err != nil {
		t.Fatalf("publish to %s: %v", r.URL(), err)
	}
}

// serveHTTP serves a sidecar's HTTP surface (opts without Addr) on a free
// loopback port until the test ends.
func serveHTTP(t *testing.T, opts httpapi.Options) *httpapi.Server {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	srv := httpapi.New(opts)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}
