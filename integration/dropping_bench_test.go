package integration

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// BenchmarkDroppingRelays measures TestDroppingRelaysConverge's world (a
// NIP-77 relay cutting every connection after 1–3 s, a REQ-only relay
// closing each after 400 events, 2,501 events each) against the naive
// resuming client of that test in the same run: s/sync is the sidecar's
// time from start until every event of both relays is on the own relay,
// naive-s the naive client's time to read both relays (both at once, the
// wall time) and publish what it read into an own relay of its own, page by
// page, and ratio the first over the second; naive-read-s is the naive
// client reading alone (it publishes nothing), as this benchmark measured
// before 2026-12-06. "no-faults" is the same
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
			var took, naive, read time.Duration
			for i := 0; i < b.N; i++ {
				s, n, r := droppingSync(b, c.faults, c.resumeWait)
				took += s
				naive += n
				read += r
			}
			b.ReportMetric(took.Seconds()/float64(b.N), "s/sync")
			b.ReportMetric(naive.Seconds()/float64(b.N), "naive-s")
			b.ReportMetric(read.Seconds()/float64(b.N), "naive-read-s")
			b.ReportMetric(took.Seconds()/naive.Seconds(), "ratio")
			b.ReportMetric(0, "ns/op") // one sync per op: s/sync says it
		})
	}
}

// droppingSync builds the world of TestDroppingRelaysConverge (with its
// faults or without), reads both remote relays with naiveResume, then
// runs a sidecar with the test's settings until every event is on the own
// relay; it returns the sidecar's time, the naive client's with publishing
// and without.
func droppingSync(b *testing.B, faults bool, resumeWait time.Duration) (took, naive, read time.Duration) {
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
	// The naive client publishes what it reads into an own relay of its
	// own (no write policy): its time, like the sidecar's, ends when every
	// event is on an own relay.
	// Both relays are read at once, as the sidecar reads them: the time
	// is the wall time of the two.
	naiveOwn := harness.Start(b, harness.RelayOptions{Name: "naive-own"})
	for _, to := range []string{"", naiveOwn.URL()} {
		relays := []*harness.Relay{cutter, closer}
		got := make([]naiveResult, len(relays))
		began := time.Now()
		var wg sync.WaitGroup
		for i, r := range relays {
			wg.Add(1)
			go func() { defer wg.Done(); got[i] = naiveResume(b, r.URL(), to, 500) }()
		}
		wg.Wait()
		for i, r := range relays {
			if len(got[i].got) != r.Len() {
				b.Fatalf("naive client got %d of the %d events of %s", len(got[i].got), r.Len(), r.URL())
			}
		}
		if to == "" {
			read = time.Since(began)
		} else {
			naive = time.Since(began)
		}
	}
	if n := cutter.Len() + closer.Len(); naiveOwn.Len() != n {
		b.Fatalf("the naive client's own relay holds %d events, want %d", naiveOwn.Len(), n)
	}
	cfg := defaultConfig(own)
	if resumeWait > 0 {
		cfg.Health.ResumeWait = resumeWait
	}
	start := time.Now()
	_, stop := runSidecarTB(b, cfg)
	defer stop()
	testkit.WaitFor(b, syncTimeout, "every event of both relays on the own relay", func() bool {
		return !slices.ContainsFunc(want, func(ev *nostr.Event) bool { return !own.Has(ev.ID) })
	})
	return time.Since(start), naive, read
}
