package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// Politeness is an invariant: whatever a relay does, the sidecar sends it
// no more than its request budget allows (health.request_burst at once,
// health.request_rate a second after), counting every REQ, NEG-OPEN, AUTH
// and connection. Three relays misbehave in the same world: one refuses
// every request with an ordinary CLOSED and NEG-ERR ("error:", not a
// refusal that parks the relay), one answers every REQ with an error
// NOTICE, one answers and drops every connection. A well-behaved relay
// beside them is synced completely.

// budgetRequests returns what relay r received from since until: REQs,
// NEG-OPENs, AUTHs and connections.
func budgetRequests(r *harness.Relay, since, until time.Time) int {
	n := 0
	for _, m := range r.Received(since) {
		if m.Time.After(until) {
			continue
		}
		switch m.Type {
		case "REQ", "NEG-OPEN", "AUTH", harness.TypeConnect:
			n++
		}
	}
	return n
}

func TestRequestBudgetHoldsForMisbehavingRelays(t *testing.T) {
	const (
		burst = 8
		rate  = 2.0 // a second
		slack = 3   // a token the clock gave between two reads, a connect counted before its dial's token
	)
	own := ownRelay(t)
	good := harness.Start(t, harness.RelayOptions{Name: "good", Negentropy: true})
	refuser := harness.Start(t, harness.RelayOptions{Name: "refuser", Negentropy: true, Faults: harness.Faults{
		ReqClosed: "error: not today", NegErr: "error: not today"}})
	noticer := harness.Start(t, harness.RelayOptions{Name: "noticer", Faults: harness.Faults{
		ReqNotice: "ERROR: bad req: not today"}})
	dropper := harness.Start(t, harness.RelayOptions{Name: "dropper", Negentropy: true, Faults: harness.Faults{
		DropAfterSend: 1}})
	evs := wildRepo(t, own, good, "polite-good", 40)
	wildRepo(t, own, refuser, "polite-refuser", 20)
	wildRepo(t, own, noticer, "polite-noticer", 20)
	wildRepo(t, own, dropper, "polite-dropper", 20)

	cfg := fastConfig(own)
	cfg.Health.RequestBurst, cfg.Health.RequestRate = burst, rate
	cfg.Health.RefusalBackoffBase, cfg.Health.RefusalBackoffMax = 200*time.Millisecond, 2*time.Second
	cfg.Health.ReconnectWait = 100 * time.Millisecond // the dropper is redialled as fast as its budget allows
	cfg.Sync.HistoricRetryBase = 200 * time.Millisecond
	cfg.Sync.HistoricRetryMax = time.Second
	log, logs := observedLogger(t)
	start := time.Now()
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	waitSyncedComplete(t, sc, own, good, evs)
	if rest := 8*time.Second - time.Since(start); rest > 0 {
		time.Sleep(rest) // a window long enough for the rate to matter
	}
	end := time.Now()
	elapsed := end.Sub(start).Seconds()
	limit := burst + int(rate*elapsed) + slack
	for _, r := range []*harness.Relay{refuser, noticer, dropper} {
		n := budgetRequests(r, start, end)
		st := r.Stats()
		t.Logf("%s: %d requests and connections in %.1fs (budget %d): %v", r.Options().Name, n, elapsed, limit, st.Received)
		if n > limit {
			t.Errorf("%s received %d requests and connections in %.1fs, over the budget %d + %.0f/s × %.1fs (+%d)",
				r.Options().Name, n, elapsed, burst, rate, elapsed, slack)
		}
		if n == 0 {
			t.Errorf("%s received nothing: the test proves nothing", r.Options().Name)
		}
	}
	// The refusing relays: after the first refusals, one request per
	// growing backoff (at most 2 s here), not the budget's rate.
	half := start.Add(end.Sub(start) / 2)
	for _, r := range []*harness.Relay{refuser, noticer} {
		if n := budgetRequests(r, half, end); n > int(end.Sub(half)/(2*time.Second))+slack {
			t.Errorf("%s received %d requests in the second half of the window (%s): refusals did not back off",
				r.Options().Name, n, end.Sub(half).Round(time.Millisecond))
		}
		if lines := linesAbout(logs, r.URL()); len(lines) > 6 {
			t.Errorf("%d log lines about %s, want a few (state changes):\n%s", len(lines), r.Options().Name,
				strings.Join(lines[:min(len(lines), 20)], "\n"))
		}
	}
	if got := testkit.Metric(t, sc.Registry, "ngit_sync_relay_requests_waiting", map[string]string{"relay": dropper.URL()}); got < 0 {
		t.Errorf("ngit_sync_relay_requests_waiting %v", got)
	}
	if r, ok := relayStatus(sc, refuser.URL()); !ok || !strings.Contains(r.Refused, "not today") {
		t.Errorf("status of the refusing relay %+v: want its refusal backoff", r)
	}
}
