package reposync

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/grasp-sync/grasp-sync/internal/testkit"
)

// BenchmarkPerRootBytes reports the heap bytes per root id (B/root) of the
// per-root structures, the ids' own strings excluded (they are shared):
// a set (the RepoSyncIndex's roots, each relay's confirmed and pending
// roots), and the own-relay fill memory as it is (filledSet) and as it
// was (a map of strings), in the same run.
//
//	go test -run '^$' -bench PerRootBytes -count 3 ./internal/reposync/
func BenchmarkPerRootBytes(b *testing.B) {
	const n = 200_000
	roots := make([]string, n)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	for _, v := range []struct {
		name  string
		build func() any
	}{
		{"set", func() any { return setOf(roots...) }},
		{"filled-map-of-strings", func() any {
			m := map[string]bool{}
			for _, r := range roots {
				m[r] = true
			}
			return m
		}},
		{"filledSet", func() any {
			f := newFilledSet()
			for _, r := range roots {
				f.add(r)
			}
			return f
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				s := v.build()
				per = float64(testkit.HeapInUse()-before) / n
				runtime.KeepAlive(s)
			}
			b.ReportMetric(per, "B/root")
		})
	}
}
