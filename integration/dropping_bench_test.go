package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// BenchmarkDroppingRelays measures TestDroppingRelaysConverge's world (a
// NIP-77 relay cutting every connection after 1–3 s, a REQ-only relay
// closing each after 400 events, 2,501 events each) against the naive
// resuming client of that test in the same run: s/sync is the sidecar's
// time from start until every event of both relays is on the own relay,
// naive-s the naive client's time to read both relays (one after the
// other), and ratio the first over the second. "no-faults" is the same
// world without the drops: the sidecar's time for the work itself (it
// asks per repository and per root and publishes every event into the
// own relay, where the naive client reads everything with one filter).
// "drops,resume_wait=1s" reconnects after every drop as before
// health.resume_wait existed. BENCHMARKS.md ("Relays that drop every
// connection") has the figures and the command.
func BenchmarkDroppingRelays(b *testing.B) {
	for _, c := range []struct {
		name       string
		faults     bool
		resumeWait time.Duration // 0: the default
	}{
		{"drops", true, 0},
		{"drops,resume_wait=1s", true, time.Second},
		{"no-faults", false, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			var took, naive time.Duration
			for i := 0; i < b.N; i++ {
				s, n := droppingSync(b, c.faults, c.resumeWait)
				took += s
				naive += n
			}
			b.ReportMetric(took.Seconds()/float64(b.N), "s/sync")
			b.ReportMetric(naive.Seconds()/float64(b.N), "naive-s")
			b.ReportMetric(took.Seconds()/naive.Seconds(), "ratio")
			b.ReportMetric(0, "ns/op") // one sync per op: s/sync says it
		})
	}
}

// droppingSync builds the world of TestDroppingRelaysConverge (with its
// faults or without), reads both remote relays with naiveResume, then
// runs a sidecar with the test's settings until every event is on the own
// relay; it returns the sidecar's time and the naive client's.
func droppingSync(b *testing.B, faults bool, resumeWait time.Duration) (took, naive time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	own := harness.Start(b, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy()})
	cutOpts := harness.RelayOptions{Name: "cutter", Negentropy: true, ReqCap: 500}
	closeOpts := harness.RelayOptions{Name: "closer", ReqCap: 500}
	if faults {
		cutOpts.Faults = harness.Faults{CutAfter: time.Second, CutAfterMax: 3 * time.Second}
		closeOpts.Faults = harness.Faults{CloseAfterEvents: 400}
	}
	cutter, closer := harness.Start(b, cutOpts), harness.Start(b, closeOpts)
	want := slices.Concat(droppingRepo(b, own, cutter, "cut"), droppingRepo(b, own, closer, "closed"))
	for _, r := range []*harness.Relay{cutter, closer} {
		n := naiveResume(b, r.URL(), 500)
		if len(n.got) != r.Len() {
			b.Fatalf("naive client got %d of the %d events of %s", len(n.got), r.Len(), r.URL())
		}
		naive += n.took
	}
	cfg := fastConfig(own)
	def := health.DefaultConfig()
	cfg.Health.BackoffBase, cfg.Health.BackoffMax, cfg.Health.StabilityPeriod = def.BackoffBase, def.BackoffMax, def.StabilityPeriod
	if resumeWait > 0 {
		cfg.Health.ResumeWait = resumeWait
	}
	start := time.Now()
	_, stop := runSidecarTB(b, cfg)
	defer stop()
	testkit.WaitFor(b, syncTimeout, "every event of both relays on the own relay", func() bool {
		return !slices.ContainsFunc(want, func(ev *nostr.Event) bool { return !own.Has(ev.ID) })
	})
	return time.Since(start), naive
}
