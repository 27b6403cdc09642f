// Package sweepcursor keeps where each REQ sweep of a filter on a relay
// got to, so that a sweep cut short (its connection dropped) continues
// there instead of starting over.
//
// A sweep pages a filter backwards from the top. Its cursor keeps until,
// the created_at down to which the relay has handed every event of the
// filter, and boundary, the ids at until already seen (the ties below
// them are not: the next page asks until again and skips those), and T0,
// when the sweep began. A sweep that opens the same filter on the same
// relay again (Cursors.Open: Sweep.Prev) first pages the top-up range,
// from T0 − slack up (what the relay stored since, and late arrivals
// within the slack, as a quick reconnect's since_buffer), then goes on
// from until. So it never skips an event the relay held when the first
// sweep passed, and never loops: until only goes down. A sweep that
// reached the bottom keeps its cursor as done: running it again pages the
// top-up range only.
//
// The package does no I/O: historic's Pager pages and reports its
// progress here.
package sweepcursor

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

// onKey marks a context whose sweeps resume (With).
type onKey struct{}

// With returns ctx whose sweeps (Cursors.Open) continue where the same
// filter's last sweep on the same relay got to. Of the own relay's reads
// only the self-subscription's paging of announcements and roots resumes
// (discovery, which notes the roots the sidecar publishes into it with
// any created_at, which a top-up by created_at would miss); the local
// set's fills never do.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, onKey{}, true)
}

func on(ctx context.Context) bool {
	v, _ := ctx.Value(onKey{}).(bool)
	return v
}

// DefaultMax bounds the cursors a Cursors keeps when New is given none: a
// relay's first sync runs one sweep per filter (three per chunk of
// repositories or roots), each cursor a few hundred bytes.
const DefaultMax = 8192

// Cursors keeps the cursors of the sweeps of every relay, at most max,
// the least recently used dropped first. It is safe for concurrent use; a
// nil *Cursors keeps nothing.
type Cursors struct {
	max   int
	slack time.Duration

	mu    sync.Mutex
	m     map[key]*list.Element // of *Position
	order list.List             // least recently used first
}

type key struct {
	url    string
	filter [sha256.Size]byte
}

// Position is where a sweep got to.
type Position struct {
	// T0 is when the sweep (or its last top-up) began.
	T0 nostr.Timestamp
	// Started: Until holds a position; Boundary are the ids seen at it.
	Started  bool
	Until    nostr.Timestamp
	Boundary []string
	// Done: the sweep reached the bottom of the filter.
	Done bool

	key key
}

// New keeps up to max cursors (DefaultMax when max is not positive); a
// resumed sweep tops up from slack before the last one began.
func New(max int, slack time.Duration) *Cursors {
	if max <= 0 {
		max = DefaultMax
	}
	return &Cursors{max: max, slack: slack, m: map[key]*list.Element{}}
}

// Forget drops url's cursors: its next sweeps start from the top (a fresh
// sync, or a relay no longer followed).
func (cs *Cursors) Forget(url string) {
	if cs == nil {
		return
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for k, el := range cs.m {
		if k.url == url {
			cs.order.Remove(el)
			delete(cs.m, k)
		}
	}
}

// Len returns how many cursors are kept.
func (cs *Cursors) Len() int {
	if cs == nil {
		return 0
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return len(cs.m)
}

// Sweep is one sweep of a filter with a cursor. Its methods may be called
// on a nil *Sweep (a sweep without cursor) and do nothing then.
type Sweep struct {
	cs  *Cursors
	cur *Position // this sweep's: a later sweep of the same filter replaces it
	t0  nostr.Timestamp
	// Prev is where the last sweep of the filter got to, when it had
	// begun paging or finished (nil: this sweep starts from the top).
	Prev *Position
}

// Open starts a sweep of f (its limit ignored) on url at now, resuming
// the last sweep of f there when there is one (Sweep.Prev). nil when cs is
// nil or ctx does not resume (With).
func (cs *Cursors) Open(ctx context.Context, url string, f nostr.Filter, now time.Time) *Sweep {
	if cs == nil || !on(ctx) {
		return nil
	}
	k := key{url: url, filter: identity(f)}
	t0 := nostr.Timestamp(now.Unix())
	cur := &Position{key: k, T0: t0}
	sw := &Sweep{cs: cs, cur: cur, t0: t0}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if el, ok := cs.m[k]; ok {
		prev := *el.Value.(*Position)
		prev.Boundary = slices.Clone(prev.Boundary)
		if prev.Started || prev.Done {
			// Until the top-up is done, the cursor is the last sweep's.
			sw.Prev = &prev
			*cur = prev
			cur.Boundary = slices.Clone(prev.Boundary)
		}
		el.Value = cur
		cs.order.MoveToBack(el)
		return sw
	}
	cs.m[k] = cs.order.PushBack(cur)
	for cs.order.Len() > cs.max {
		old := cs.order.Front()
		cs.order.Remove(old)
		delete(cs.m, old.Value.(*Position).key)
	}
	return sw
}

// TopUpSince is the since of a resumed sweep's top-up range: slack before
// the last sweep began, never below f's own since.
func (sw *Sweep) TopUpSince(f nostr.Filter) nostr.Timestamp {
	since := sw.Prev.T0 - nostr.Timestamp(sw.cs.slack/time.Second)
	if f.Since != nil && *f.Since > since {
		since = *f.Since
	}
	return since
}

// update applies fn to the sweep's cursor while it is still the one kept
// for its filter.
func (sw *Sweep) update(fn func(p *Position)) {
	if sw == nil {
		return
	}
	sw.cs.mu.Lock()
	defer sw.cs.mu.Unlock()
	if el, ok := sw.cs.m[sw.cur.key]; ok && el.Value == sw.cur {
		fn(sw.cur)
	}
}

// ToppedUp records that the top-up range is done (or that there was
// nothing to resume): the cursor's range starts when this sweep began.
func (sw *Sweep) ToppedUp() {
	sw.update(func(p *Position) { p.T0 = sw.t0 })
}

// Advance records that the relay has handed every event of the filter
// above until, and those of boundary at until.
func (sw *Sweep) Advance(until nostr.Timestamp, boundary map[string]struct{}) {
	sw.update(func(p *Position) {
		p.Started, p.Until = true, until
		p.Boundary = p.Boundary[:0]
		for id := range boundary {
			p.Boundary = append(p.Boundary, id)
		}
	})
}

// Finish records that the sweep reached the bottom of the filter.
func (sw *Sweep) Finish() {
	sw.update(func(p *Position) { p.Done, p.Boundary = true, nil })
}

// identity hashes f as a sweep sees it: every field but the limit, tag
// names in order (a map's order is random).
func identity(f nostr.Filter) [sha256.Size]byte {
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
