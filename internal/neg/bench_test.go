package neg

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
)

// The 1,000,000-item benchmarks only run with -bench; building their sets
// takes seconds, so they are built once per difference and reused.
const benchItems = 1_000_000

var benchSets = struct {
	sync.Mutex
	m map[float64]benchSet
}{m: map[float64]benchSet{}}

type benchSet struct {
	d          dataset
	ourC, ourS negentropy.Storage
	vecC, vecS negentropy.Storage
}

func getBenchSet(diff float64, vec bool) benchSet {
	benchSets.Lock()
	defer benchSets.Unlock()
	s, ok := benchSets.m[diff]
	if !ok {
		clear(benchSets.m) // keep one set in memory at a time
		runtime.GC()
		d := makeDataset(99, benchItems, diff)
		s = benchSet{d: d, ourC: ourStorage(d.client), ourS: ourStorage(d.server)}
	}
	// go-nostr's vector holds every id as a string; built only for its own
	// runs and dropped for ours, so its heap does not slow our runs' GC.
	switch {
	case vec && s.vecC == nil:
		s.vecC, s.vecS = vectorStorage(s.d.client), vectorStorage(s.d.server)
	case !vec && s.vecC != nil:
		s.vecC, s.vecS = nil, nil
		runtime.GC()
	}
	benchSets.m[diff] = s
	return s
}

// BenchmarkReconcile1M reconciles 1,000,000 items in-process (client and
// server engines in lock-step) and reports each side's time per
// reconciliation (wall, and CPU time of the engine's thread, which does not
// depend on machine load), for our storage and go-nostr's vector.
func BenchmarkReconcile1M(b *testing.B) {
	for _, diff := range []float64{0.001, 0.1} {
		for _, limit := range []int{0, 60_000} {
			for _, impl := range []string{"prefixsum", "vector"} {
				b.Run(fmt.Sprintf("diff=%g/limit=%d/%s", diff, limit, impl), func(b *testing.B) {
					if impl == "vector" && diff > 0.01 && limit > 0 && os.Getenv("GRASP_SYNC_BENCH_SLOW") == "" {
						b.Skip("vector storage at 10% difference and a 60,000-byte limit needs ~770 rounds of O(n) fingerprints (over 10 minutes per op); set GRASP_SYNC_BENCH_SLOW=1 to run it")
					}
					s := getBenchSet(diff, impl == "vector")
					client, server, eng := s.ourC, s.ourS, implOurs
					if impl == "vector" {
						client, server, eng = s.vecC, s.vecS, implGoNostr
					}
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.ResetTimer()
					var ct, st, ccpu, scpu time.Duration
					var rounds int
					for b.Loop() {
						r := lockstep(b, eng, client, server, limit, limit)
						if len(r.need) != len(s.d.need) || len(r.have) != len(s.d.have) {
							b.Fatalf("need/have %d/%d, want %d/%d", len(r.need), len(r.have), len(s.d.need), len(s.d.have))
						}
						ct += r.clientTime
						st += r.serverTime
						ccpu += r.clientCPU
						scpu += r.serverCPU
						rounds += len(r.msgs) / 2
					}
					b.ReportMetric(float64(ct.Milliseconds())/float64(b.N), "client-ms/op")
					b.ReportMetric(float64(st.Milliseconds())/float64(b.N), "server-ms/op")
					b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
					b.ReportMetric(float64(ccpu.Milliseconds())/float64(b.N), "client-cpu-ms/op")
					b.ReportMetric(float64(scpu.Milliseconds())/float64(b.N), "server-cpu-ms/op")
				})
			}
		}
	}
}

// BenchmarkNewStorage1M measures building (sorting, prefix sums) a
// 1,000,000-item storage.
func BenchmarkNewStorage1M(b *testing.B) {
	d := makeDataset(98, benchItems, 0)
	buf := make([]Item, len(d.client))
	b.ResetTimer()
	for b.Loop() {
		copy(buf, d.client)
		NewStorage(buf)
	}
}
