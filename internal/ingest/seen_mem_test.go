package ingest

import (
	"crypto/rand"
	"runtime"
	"testing"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// BenchmarkSeenSetBytes reports the dedupe set's heap bytes per remembered
// id (B/id), for the set as it is (keys of 16 bytes) and, in the same run,
// for a map of whole 32-byte ids (its representation before).
//
//	go test -run '^$' -bench SeenSetBytes -count 3 ./internal/ingest/
func BenchmarkSeenSetBytes(b *testing.B) {
	const n = 200_000
	ids := make([][32]byte, n)
	for i := range ids {
		_, _ = rand.Read(ids[i][:])
	}
	b.Run("map-of-32-byte-ids", func(b *testing.B) {
		var per float64
		for b.Loop() {
			before := testkit.HeapInUse()
			m := map[[32]byte]struct{}{}
			for _, id := range ids {
				m[id] = struct{}{}
			}
			per = float64(testkit.HeapInUse()-before) / n
			runtime.KeepAlive(m)
		}
		b.ReportMetric(per, "B/id")
	})
	b.Run("seenSet", func(b *testing.B) {
		var per float64
		for b.Loop() {
			before := testkit.HeapInUse()
			s := newSeenSet(2*n+2, 0, nil)
			for _, id := range ids {
				s.Mark(id)
			}
			per = float64(testkit.HeapInUse()-before) / n
			runtime.KeepAlive(s)
		}
		b.ReportMetric(per, "B/id")
	})
}
