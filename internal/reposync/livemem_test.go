package reposync

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// BenchmarkLiveFilterBytes reports the heap bytes per root (B/root) that
// the per-root live filters of a consolidation (nip34.Layers23ByRoot) keep
// alive once their REQs are sent, the ids' own strings excluded (they are
// the table's): the built filters with their arrival matcher, as a
// relay.Subscription kept them for its CLOSED callback ("filters+matcher"),
// and the matcher alone, as now ("matcher").
//
//	go test -run '^$' -bench LiveFilterBytes -count 3 ./internal/reposync/
func BenchmarkLiveFilterBytes(b *testing.B) {
	const n = 100_000
	roots := make([]string, n)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", 1<<41+i)
	}
	since := nostr.Timestamp(1)
	for _, keep := range []string{"filters+matcher", "matcher"} {
		b.Run(keep, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				fs := nip34.Layers23ByRoot(nil, roots, 100, &since)
				m := liveMatch(fs, nil)
				if keep == "matcher" {
					fs = nil
				}
				per = float64(testkit.HeapInUse()-before) / n
				runtime.KeepAlive(m)
				runtime.KeepAlive(fs)
			}
			b.ReportMetric(per, "B/root")
		})
	}
}
