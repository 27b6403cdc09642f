package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// Relays that say no and will not change their mind by themselves: one
// wants NIP-42 AUTH for every read and the sidecar has no key, one answers
// every REQ and NEG-OPEN "restricted: …". Each receives a handful of
// requests when the sidecar meets it and then nothing for the long wait
// (health.Settings.RefusalWait, hours by default), and the log tells the
// story in a few lines rather than one per attempt.

// refusalRequests is how many requests remote received: REQs, NEG-OPENs
// and AUTHs.
func refusalRequests(r *harness.Relay) int {
	st := r.Stats()
	return st.Reqs + st.NegOpens + st.Received["AUTH"]
}

// linesAbout returns the INFO and louder log entries whose message or
// fields contain s.
func linesAbout(logs *observer.ObservedLogs, s string) []string {
	var out []string
	for _, e := range logs.All() {
		if e.Level < zapcore.InfoLevel {
			continue
		}
		line := e.Level.String() + " " + e.Message + " " + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func TestRefusingRelaysAreNotHammered(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts harness.RelayOptions
	}{
		{"auth-required", harness.RelayOptions{Name: "auth-reads", AuthReads: true, Negentropy: true}},
		{"restricted", harness.RelayOptions{Name: "restricted", Negentropy: true, Faults: harness.Faults{
			ReqClosed: "restricted: members only", NegErr: "restricted: members only"}}},
		// A refusal that may change: backed off (historic_retry_base),
		// not parked.
		{"error", harness.RelayOptions{Name: "error", Negentropy: true, Faults: harness.Faults{
			ReqClosed: "error: try again later", NegErr: "error: try again later"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := ownRelay(t)
			remote := harness.Start(t, tc.opts)
			wildRepo(t, own, remote, "refused-"+tc.name, 20)
			log, logs := observedLogger(t)
			sc := startSidecarDeps(t, fastConfig(own), sidecar.Deps{Log: log})
			testkit.WaitFor(t, syncTimeout, "the first request", func() bool { return refusalRequests(remote) > 0 })
			// Several ticks, backoffs and consolidations of fastConfig.
			time.Sleep(6 * time.Second)
			first := refusalRequests(remote)
			time.Sleep(4 * time.Second)
			later := refusalRequests(remote) - first
			lines := linesAbout(logs, remote.URL())
			t.Logf("%s: %d requests in the first window, %d in the second, %d log lines about the relay", tc.name, first, later, len(lines))
			if first > 10 {
				t.Errorf("%d requests (%v) at first, want at most 10", first, remote.Stats().Received)
			}
			if later > 2 {
				t.Errorf("%d requests afterwards, want at most 2", later)
			}
			if len(lines) > 6 {
				t.Errorf("%d log lines about the relay, want a few:\n%s", len(lines), strings.Join(lines[:min(len(lines), 20)], "\n"))
			}
			r, ok := relayStatus(sc, remote.URL())
			if !ok || r.State == "connected" {
				t.Errorf("status %+v: a relay refusing every read reported synced", r)
			}
			if permanent := tc.name != "error"; permanent != strings.Contains(r.Refused, "asking again at") {
				t.Errorf("status refused %q", r.Refused)
			}
			sent := testkit.Metric(t, sc.Registry, "ngit_sync_relay_requests_total", map[string]string{"relay": remote.URL()})
			if st := remote.Stats(); sent != float64(st.Reqs+st.NegOpens) {
				t.Errorf("ngit_sync_relay_requests_total %v, the relay received %d REQs and %d NEG-OPENs", sent, st.Reqs, st.NegOpens)
			}
		})
	}
}

// TestRefusalWaitEnds: the wait after a permanent refusal ends (here
// after health.refusal_wait = 2 s): the relay is asked again, refuses
// again, and waits again, one warning per wait.
func TestRefusalWaitEnds(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "restricted", Negentropy: true, Faults: harness.Faults{
		ReqClosed: "restricted: members only", NegErr: "restricted: members only"}})
	wildRepo(t, own, remote, "refused-wait", 5)
	cfg := fastConfig(own)
	cfg.Health.RefusalWait = 2 * time.Second
	cfg.Sync.HistoricRetryBase = 2 * time.Second // the failed batch's retry asks again
	log, logs := observedLogger(t)
	startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	testkit.WaitFor(t, syncTimeout, "the first request", func() bool { return refusalRequests(remote) > 0 })
	time.Sleep(time.Second)
	first := refusalRequests(remote)
	testkit.WaitFor(t, syncTimeout, "the relay asked again after refusal_wait", func() bool { return refusalRequests(remote) > first })
	testkit.WaitFor(t, syncTimeout, "a second wait", func() bool {
		return logs.FilterMessageSnippet("refuses our requests").Len() >= 2
	})
	if n := refusalRequests(remote); n > 3*10 {
		t.Fatalf("%d requests in three waits' time", n)
	}
}
