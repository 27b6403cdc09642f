package reposync

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// Queued historic jobs hold their filter in handles (repoindex.PackedFilter): a
// relay's first batch queues one job per filter for every root and
// repository it is asked about, and as nostr.Filters they kept a string
// header per value (the chunks shared by a chunk's e, E and q filters) and
// a filter and tag map per job until they ran. A job's filters are built
// when it starts (startJobs) or is merged into a starting one.

// queueFilters queues one job of b per filter of fs, packed when it can be.
func (js jobScheduler) queueFilters(r *remote, b *repoindex.PendingBatch, run *batchRun, fs []nostr.Filter) {
	var packer repoindex.FilterPacker // the chunk the last handles were made of
	for i := range fs {
		j := &job{batch: b, run: run}
		if j.packed = packer.Pack(fs[i]); j.packed == nil {
			j.filters = fs[i : i+1 : i+1]
		}
		r.jobs = append(r.jobs, j)
	}
}

// unpack builds j's filters if they are packed; it returns true (for use
// in a condition).
func (j *job) unpack() bool {
	if j.packed != nil {
		j.filters = []nostr.Filter{j.packed.Filter()}
		j.packed = nil
	}
	return true
}

// popJob takes r's first queued job. Its slot is cleared: the queue's
// array, scanned whole by the collector, would otherwise keep every job
// taken from it (and its built filters) until the queue is reallocated.
func (r *remote) popJob() *job {
	j := r.jobs[0]
	r.jobs[0] = nil
	r.jobs = r.jobs[1:]
	return j
}
