package harness_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// cpuTime is the process's user+system CPU time: benchmarks report CPU per
// event too, which a loaded machine distorts far less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU microseconds per event since start.
func reportCPU(b *testing.B, start time.Duration, events int) {
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(events), "cpu-µs/event")
}

// benchEvents is the universe size for harness benchmarks; set
// GRASP_BENCH_EVENTS (e.g. 1000000) to scale it.
func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("GRASP_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

func universe(n int, skipSigs bool) *signed.Universe {
	u, err := signed.NewUniverse(signed.UniverseOptions{
		Seed: 42, Repos: max(1, n/200), Relays: []string{"ws://127.0.0.1:1", "ws://127.0.0.1:2"}, Events: n,
		SkipSignatures: skipSigs,
	})
	if err != nil {
		panic(err)
	}
	return u
}

// benchUniverse is the store-level corpus: ids are right, signatures are
// skipped (the relay paths measured here never verify them).
var benchUniverse = sync.OnceValue(func() *signed.Universe { return universe(benchEvents(), true) })

// BenchmarkHarnessUniverse measures generating signed events.
func BenchmarkHarnessUniverse(b *testing.B) {
	const n = 20_000
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		universe(n, false)
	}
	reportCPU(b, cpu, n*b.N)
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkHarnessInject(b *testing.B) {
	u := benchUniverse()
	var ms0, ms1 runtime.MemStats
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		s := harness.NewStore()
		b.StartTimer()
		c0 := cpuTime()
		if n := s.Put(u.Events...); n != len(u.Events) {
			b.Fatalf("stored %d of %d", n, len(u.Events))
		}
		cpu += cpuTime() - c0
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/float64(len(u.Events)), "index-bytes/event")
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(float64(len(u.Events)*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(u.Events)*b.N), "cpu-µs/event")
}

func BenchmarkHarnessReqAll(b *testing.B) {
	u := benchUniverse()
	r, err := harness.StartRelay(harness.RelayOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	r.Inject(u.Events...)
	ctx := context.Background()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		c, err := harness.Dial(ctx, r.URL())
		if err != nil {
			b.Fatal(err)
		}
		res, err := c.Req(ctx, "all", nostr.Filter{})
		if err != nil || len(res.Events) != len(u.Events) {
			b.Fatalf("got %d events, err %v", len(res.Events), err)
		}
		c.Close()
	}
	b.ReportMetric(float64(len(u.Events)*b.N)/b.Elapsed().Seconds(), "events/s")
	reportCPU(b, cpu, len(u.Events)*b.N)
}

func BenchmarkHarnessTagQuery(b *testing.B) {
	u := benchUniverse()
	s := harness.NewStore()
	s.Put(u.Events...)
	var addrs []string
	for _, r := range u.Repos[:min(100, len(u.Repos))] {
		addrs = append(addrs, r.Address)
	}
	f := nostr.Filter{Tags: nostr.TagMap{"a": addrs}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(s.Match(f, 0)) == 0 {
			b.Fatal("no match")
		}
	}
}

func BenchmarkHarnessNegentropy(b *testing.B) {
	u := benchUniverse()
	r, err := harness.StartRelay(harness.RelayOptions{Negentropy: true})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	r.Inject(u.Events...)
	have := u.Events[:len(u.Events)-len(u.Events)/1000] // 0.1% missing
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := harness.Dial(ctx, r.URL())
		if err != nil {
			b.Fatal(err)
		}
		need, _, err := c.Negentropy(ctx, "n", nostr.Filter{}, have)
		if err != nil || len(need) != len(u.Events)-len(have) {
			b.Fatalf("need %d, err %v", len(need), err)
		}
		c.Close()
	}
}

func BenchmarkHarnessPublish(b *testing.B) {
	evs := universe(2000, false).Events
	ctx := context.Background()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r, err := harness.StartRelay(harness.RelayOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := harness.PublishWindow(ctx, r.URL(), 64, evs...); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		r.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(evs)*b.N)/b.Elapsed().Seconds(), "events/s")
	reportCPU(b, cpu, len(evs)*b.N)
}
