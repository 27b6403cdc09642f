package repoindex

import (
	"cmp"
	"fmt"
	"runtime"
	"testing"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// BenchmarkPerRootBytes reports the heap bytes per root id (B/root) of the
// per-root structures, the ids' own strings excluded (they are shared):
// a set (the RepoSyncIndex's roots, each relay's confirmed and pending
// roots) as it was (a map of strings) and as it is (handles: all roots,
// one in ten as a relay's share, 47 spread ones a repository; per member),
// and the handle table that the sets share (per root, once), in the same
// run (the own-relay fill memory: historic.BenchmarkFilledBytes).
//
//	go test -run '^$' -bench PerRootBytes -count 3 ./internal/reposync/
func BenchmarkPerRootBytes(b *testing.B) {
	const n = 200_000
	roots := make([]string, n)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", i)
	}
	for _, v := range []struct {
		name    string
		build   func() any
		members int // 0: n
	}{
		{"map-of-strings", func() any { // the set as it was
			m := make(map[string]struct{}, 0)
			for _, r := range roots {
				m[r] = struct{}{}
			}
			return m
		}, 0},
		{"set", func() any { return SetOf(roots...) }, 0},
		{"set-1-in-10", func() any { // a relay's confirmed roots: its repositories'
			s := NewSet()
			for i := 0; i < n; i += 10 {
				s.Add(roots[i])
			}
			return s
		}, n / 10},
		{"set-per-repo", func() any { // the repository index: ~47 roots a repository
			var out []Set
			for i := 0; i < n/47; i++ {
				s := NewSet()
				for j := 0; j < 47; j++ {
					s.Add(roots[(j*(n/47)+i)%n])
				}
				out = append(out, s)
			}
			return out
		}, n / 47 * 47},
		{"names", func() any { // the intern table, once for every set
			in := newInterner()
			for _, r := range roots {
				in.intern(r)
			}
			return in
		}, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				s := v.build()
				per = float64(testkit.HeapInUse()-before) / float64(cmp.Or(v.members, n))
				runtime.KeepAlive(s)
			}
			b.ReportMetric(per, "B/root")
		})
	}
}
