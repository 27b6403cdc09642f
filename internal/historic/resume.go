package historic

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Resuming a REQ pager's sweep of a filter after its connection dropped.
//
// A sweep pages a filter backwards from the top. Its cursor keeps where it
// got to: until, the created_at down to which the relay has handed every
// event of the filter, and boundary, the ids at until already seen (the
// ties below them are not, so the next page asks until again and skips
// those); and t0, when the sweep began. A job that runs the same filter on
// the same relay again (the connection dropped, the batch was asked
// again) first pages the top-up range, from t0 − slack up (what the relay
// stored since, and late arrivals within the slack, as a quick reconnect's
// since_buffer), then goes on from until. So it never skips an event the
// relay held when the first sweep passed, and never loops: until only goes
// down. A sweep that reached the bottom keeps its cursor as done: running
// it again pages the top-up range only.

// resumeKey marks a context whose sweeps resume (WithResume).
type resumeKey struct{}

// WithResume returns ctx whose REQ sweeps (Pager.Resume) continue where
// the same filter's last sweep on the same relay got to. The own relay's
// reads are never resumed: the sidecar publishes events of any created_at
// into it, which a top-up by created_at would miss.
func WithResume(ctx context.Context) context.Context {
	return context.WithValue(ctx, resumeKey{}, true)
}

func resuming(ctx context.Context) bool {
	on, _ := ctx.Value(resumeKey{}).(bool)
	return on
}

// DefaultResumeCursors bounds the cursors a ResumeCursors keeps: a relay's
// first sync runs one sweep per filter (three per chunk of repositories
// or roots), each cursor a few hundred bytes.
const DefaultResumeCursors = 8192

// ResumeCursors keeps the cursors of the sweeps of every relay, at most
// max, the least recently used dropped first. It is safe for concurrent
// use; a nil *ResumeCursors keeps nothing.
type ResumeCursors struct {
	max   int
	slack time.Duration

	mu    sync.Mutex
	m     map[cursorKey]*list.Element // of *cursor
	order list.List                   // least recently used first
}

type cursorKey struct {
	url    string
	filter [sha256.Size]byte
}

// cursor is one sweep's progress; the fields are guarded by
// ResumeCursors.mu.
type cursor struct {
	key      cursorKey
	t0       nostr.Timestamp // when the sweep (or its last top-up) began
	started  bool            // until holds a position
	until    nostr.Timestamp
	boundary []string
	done     bool
}

// NewResumeCursors keeps up to max cursors (DefaultResumeCursors when max
// is not positive); a resumed sweep tops up from slack before the last
// one began.
func NewResumeCursors(max int, slack time.Duration) *ResumeCursors {
	if max <= 0 {
		max = DefaultResumeCursors
	}
	return &ResumeCursors{max: max, slack: slack, m: map[cursorKey]*list.Element{}}
}

// Forget drops url's cursors: its next sweeps start from the top (a fresh
// sync, or a relay no longer followed).
func (rc *ResumeCursors) Forget(url string) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for k, el := range rc.m {
		if k.url == url {
			rc.order.Remove(el)
			delete(rc.m, k)
		}
	}
}

// Len returns how many cursors are kept.
func (rc *ResumeCursors) Len() int {
	if rc == nil {
		return 0
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.m)
}

// sweep is one run of pageFilter with a cursor.
type sweep struct {
	rc  *ResumeCursors
	cur *cursor // this sweep's: a later sweep of the same key replaces it
	// prev is where the last sweep got to, when this one resumes it.
	prev *cursor
	t0   nostr.Timestamp // when this sweep began
}

// open starts a sweep of f (limit ignored) on url at now: it resumes the
// cursor of the last sweep of f when there is one (sweep.prev). nil when
// rc is nil or ctx does not resume.
func (rc *ResumeCursors) open(ctx context.Context, url string, f nostr.Filter, now time.Time) *sweep {
	if rc == nil || !resuming(ctx) {
		return nil
	}
	k := cursorKey{url: url, filter: filterIdentity(f)}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	t0 := nostr.Timestamp(now.Unix())
	cur := &cursor{key: k, t0: t0}
	sw := &sweep{rc: rc, cur: cur, t0: t0}
	if el, ok := rc.m[k]; ok {
		prev := *el.Value.(*cursor)
		prev.boundary = slices.Clone(prev.boundary)
		sw.prev = &prev
		// Until the top-up is done, the cursor is the last sweep's.
		cur.t0, cur.started, cur.until, cur.boundary, cur.done = prev.t0, prev.started, prev.until, prev.boundary, prev.done
		el.Value = cur
		rc.order.MoveToBack(el)
		return sw
	}
	rc.m[k] = rc.order.PushBack(cur)
	for rc.order.Len() > rc.max {
		old := rc.order.Front()
		rc.order.Remove(old)
		delete(rc.m, old.Value.(*cursor).key)
	}
	return sw
}

// topUpSince is the since of a resumed sweep's top-up range: slack before
// the last sweep began, never below f's own since.
func (sw *sweep) topUpSince(f nostr.Filter) nostr.Timestamp {
	since := sw.prev.t0 - nostr.Timestamp(sw.rc.slack/time.Second)
	if f.Since != nil && *f.Since > since {
		since = *f.Since
	}
	return since
}

// update applies fn to the sweep's cursor while it is still the one kept
// for its key.
func (sw *sweep) update(fn func(c *cursor)) {
	if sw == nil {
		return
	}
	sw.rc.mu.Lock()
	defer sw.rc.mu.Unlock()
	if el, ok := sw.rc.m[sw.cur.key]; ok && el.Value == sw.cur {
		fn(sw.cur)
	}
}

// toppedUp records that the top-up range is done: the cursor's range
// starts when this sweep began.
func (sw *sweep) toppedUp() {
	sw.update(func(c *cursor) { c.t0 = sw.t0 })
}

// advance records that the relay has handed every event of the filter
// above until, and those of boundary at until.
func (sw *sweep) advance(until nostr.Timestamp, boundary map[string]struct{}) {
	sw.update(func(c *cursor) {
		c.started, c.until = true, until
		c.boundary = c.boundary[:0]
		for id := range boundary {
			c.boundary = append(c.boundary, id)
		}
	})
}

// finish records that the sweep reached the bottom of the filter.
func (sw *sweep) finish() {
	sw.update(func(c *cursor) { c.done, c.boundary = true, nil })
}

// filterIdentity hashes f as a sweep sees it: every field but the limit,
// tag names in order (a map's order is random).
func filterIdentity(f nostr.Filter) [sha256.Size]byte {
	h := sha256.New()
	var buf [8]byte
	num := func(v int64) {
		binary.BigEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	strs := func(tag string, vs []string) {
		h.Write([]byte(tag))
		num(int64(len(vs)))
		for _, v := range vs {
			num(int64(len(v)))
			h.Write([]byte(v))
		}
	}
	ts := func(t *nostr.Timestamp) {
		if t == nil {
			num(-1)
			return
		}
		num(int64(*t))
	}
	num(int64(len(f.Kinds)))
	for _, k := range f.Kinds {
		num(int64(k))
	}
	strs("ids", f.IDs)
	strs("authors", f.Authors)
	names := make([]string, 0, len(f.Tags))
	for name := range f.Tags {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		strs("#"+name, f.Tags[name])
	}
	ts(f.Since)
	ts(f.Until)
	strs("search", []string{f.Search})
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
