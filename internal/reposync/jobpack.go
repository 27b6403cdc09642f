package reposync

import (
	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// Queued historic jobs hold their filter in handles (packedFilter): a
// relay's first batch queues one job per filter for every root and
// repository it is asked about, and as nostr.Filters they kept a string
// header per value (the chunks shared by a chunk's e, E and q filters) and
// a filter and tag map per job until they ran. A job's filters are built
// when it starts (startJobs) or is merged into a starting one.

// packedFilter is a filter of one tag (no ids, authors, kinds, until or
// limit) whose values are handles (names).
type packedFilter struct {
	tag   string
	chunk *packedChunk // shared by the filters of one chunk (e, E, q)
	since *nostr.Timestamp
}

// packedChunk is the values of one chunk of filters. The first of its
// filters to start builds the strings and leaves them for the others, so
// they share one value slice as nip34 built them (OwnLocalSet fills a
// chunk's values once, recentlyFilled).
type packedChunk struct {
	values []uint32
	built  []string
	left   int // filters not yet built
}

// packable tells whether f is a filter packedFilter can hold.
func packable(f nostr.Filter) (string, bool) {
	if f.IDs != nil || f.Authors != nil || f.Kinds != nil || f.Until != nil || f.Limit != 0 || f.LimitZero || f.Search != "" || len(f.Tags) != 1 {
		return "", false
	}
	for tag, vs := range f.Tags {
		return tag, len(vs) > 0
	}
	return "", false
}

// filter builds p's filter.
func (p packedFilter) filter() nostr.Filter {
	c := p.chunk
	vs := c.built
	if vs == nil {
		vs = make([]string, len(c.values))
		for i, h := range c.values {
			vs[i] = repoindex.NameOf(h)
		}
	}
	if c.left--; c.left > 0 {
		c.built = vs[:len(vs):len(vs)]
	} else {
		c.built = nil // the last: the chunk holds no strings for nobody
	}
	return nostr.Filter{Tags: nostr.TagMap{p.tag: vs}, Since: p.since}
}

// queueFilters queues one job of b per filter of fs, packed when it can be.
func (js jobScheduler) queueFilters(r *remote, b *repoindex.PendingBatch, run *batchRun, fs []nostr.Filter) {
	var lastFirst *string // the chunk the last handles were made of
	var last *packedChunk
	for i := range fs {
		j := &job{batch: b, run: run}
		tag, ok := packable(fs[i])
		if !ok {
			j.filters = fs[i : i+1 : i+1]
			r.jobs = append(r.jobs, j)
			continue
		}
		vs := fs[i].Tags[tag]
		if &vs[0] != lastFirst || len(vs) != len(last.values) {
			last = &packedChunk{values: make([]uint32, len(vs))}
			for k, v := range vs {
				last.values[k] = repoindex.Intern(v)
			}
			lastFirst = &vs[0]
		}
		last.left++
		j.packed = &packedFilter{tag: tag, chunk: last, since: fs[i].Since}
		r.jobs = append(r.jobs, j)
	}
}

// unpack builds j's filters if they are packed; it returns true (for use
// in a condition).
func (j *job) unpack() bool {
	if j.packed != nil {
		j.filters = []nostr.Filter{j.packed.filter()}
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
