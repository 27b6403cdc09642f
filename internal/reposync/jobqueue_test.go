package reposync

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
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
	e.sched.queueFilters(r, &repoindex.PendingBatch{}, &batchRun{}, fs)
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

// TestQueuedJobsShareChunks checks that the e, E and q jobs of one chunk
// ask one value slice, as nip34 built them.
func TestQueuedJobsShareChunks(t *testing.T) {
	var roots []string
	for i := 0; i < 150; i++ {
		roots = append(roots, fmt.Sprintf("%064x", 5000+i))
	}
	e, r := &Engine{}, &remote{}
	e.sched.queueFilters(r, &repoindex.PendingBatch{}, &batchRun{}, nip34.Layer3(roots, 100, nil))
	if len(r.jobs) != 6 {
		t.Fatalf("%d jobs, want 6", len(r.jobs))
	}
	var firsts []*string
	for _, j := range r.jobs {
		j.unpack()
		for _, vs := range j.filters[0].Tags {
			firsts = append(firsts, &vs[0])
		}
	}
	if firsts[0] != firsts[1] || firsts[1] != firsts[2] || firsts[3] != firsts[4] || firsts[4] != firsts[5] || firsts[0] == firsts[3] {
		t.Fatal("the jobs of one chunk do not share its values")
	}
	if r.jobs[0].filters[0].Tags["e"][0] != roots[0] || r.jobs[5].filters[0].Tags["q"][49] != roots[149] {
		t.Fatal("wrong values")
	}
}
