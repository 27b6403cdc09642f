package reposync

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// BenchmarkQueuedJobBytes reports the heap bytes per root (B/root) that
// the queued historic jobs of 100,000 roots' Layer 3 filters hold, the
// ids' own strings excluded: as they were (each job a filter of the
// batch's, sharing nip34's chunks) and as they are (packed in handles,
// jobpack.go), in the same run. The filters built to queue them count
// only while the jobs hold them.
//
//	go test -run '^$' -bench QueuedJobBytes -count 3 ./internal/reposync/
func BenchmarkQueuedJobBytes(b *testing.B) {
	const n = 100_000
	roots := make([]string, n)
	for i := range roots {
		roots[i] = fmt.Sprintf("%064x", 1<<40+i)
		repoindex.Intern(roots[i])
	}
	for _, v := range []struct {
		name  string
		queue func(r *remote, fs []nostr.Filter)
	}{
		{"filters", func(r *remote, fs []nostr.Filter) {
			for i := range fs {
				r.jobs = append(r.jobs, &job{filters: fs[i : i+1 : i+1]})
			}
		}},
		{"packed", func(r *remote, fs []nostr.Filter) { (jobScheduler{&Engine{}}).queueFilters(r, nil, nil, fs) }},
	} {
		b.Run(v.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				before := testkit.HeapInUse()
				fs := nip34.Layer3(roots, nip34.DefaultValuesPerFilter, nil)
				r := &remote{}
				v.queue(r, fs)
				fs = nil
				per = float64(testkit.HeapInUse()-before) / n
				runtime.KeepAlive(r)
			}
			b.ReportMetric(per, "B/root")
		})
	}
}
