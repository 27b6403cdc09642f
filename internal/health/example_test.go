package health_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/health"
)

// The sync engine's retry tick: connect every relay that is due, report the
// outcome, and feed relay messages to Observe.
func Example() {
	clock := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := health.DefaultConfig()
	cfg.Jitter = 0 // deterministic output
	tr, err := health.New(cfg, clock, prometheus.NewRegistry(), nil)
	if err != nil {
		panic(err)
	}
	const url = "wss://relay.example.com"
	tr.Track(url)

	for _, u := range tr.Due() {
		tr.AttemptStarted(u)
		// dial with a timeout of tr.ConnectTimeout(u) ...
		tr.Failed(u, errors.New("connection refused"))
	}
	ok, wait := tr.CanAttempt(url)
	fmt.Println(tr.State(url), ok, wait)

	clock.Advance(wait)
	tr.AttemptStarted(url)
	tr.Connected(url)
	fmt.Println(tr.State(url)) // recovered, in the stability period

	sig := tr.Observe(url, health.SourceNotice, "ERROR: too many concurrent REQs")
	fmt.Println(sig, tr.SubscriptionBudget(url))

	sig = tr.Observe(url, health.SourceClosed, "rate-limited: slow down")
	fmt.Println(sig, tr.State(url), tr.CooldownRemaining(url))

	clock.Advance(5 * time.Minute)
	tr.Tick()
	fmt.Println(tr.State(url))
	// Output:
	// degraded false 5s
	// degraded
	// too_many_subscriptions 10
	// rate_limited rate_limited 1m5s
	// healthy
}
