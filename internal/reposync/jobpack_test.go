package reposync

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// TestQueuedJobsAskTheirFilters checks that queued jobs, held in handles,
// ask exactly the filters they were queued with, in order, the
// unpackable ones included.
func TestQueuedJobsAskTheirFilters(t *testing.T) {
	var roots, repos []string
	for i := 0; i < 250; i++ {
		roots = append(roots, fmt.Sprintf("%064x", 1000+i))
		repos = append(repos, fmt.Sprintf("30617:%064x:repo-%d", i, i))
	}
	since := nostr.Timestamp(1700000000)
	fs := append(append(nip34.Layers23(repos, roots, 100, &since), nip34.Layer1(nil)), nip34.Layer3ByKind(nil)...)
	e := &Engine{}
	r := &remote{}
	e.queueFilters(r, &PendingBatch{}, &batchRun{}, fs)
	if len(r.jobs) != len(fs) {
		t.Fatalf("%d jobs for %d filters", len(r.jobs), len(fs))
	}
	packed := 0
	for i, j := range r.jobs {
		if j.packed != nil {
			packed++
		}
		j.unpack()
		if len(j.filters) != 1 || !reflect.DeepEqual(j.filters[0], fs[i]) {
			t.Fatalf("job %d asks %v, queued with %v", i, j.filters, fs[i])
		}
	}
	if packed != len(fs)-3 {
		t.Fatalf("%d of %d jobs packed, want all but the 3 kind filters", packed, len(fs))
	}
}
