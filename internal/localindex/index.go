// Package localindex keeps a compact in-memory index of the events the own
// relay holds, so negentropy can build its local set for a filter without
// querying the relay. Per event it keeps only what filter matching needs:
// created_at, id, kind, author and the a/A/q/e/E/d tag values, with
// repeated values (authors, repository addresses, root ids) interned.
package localindex

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

var (
	// ErrCannotAnswer: the filter uses something the index does not keep
	// (a tag other than a/A/q/e/E/d, or search); ask the relay instead.
	ErrCannotAnswer = errors.New("localindex: filter cannot be answered from the index")
	// ErrFull: the index holds Options.MaxEvents events; the event was not
	// added. Its method Full reports true: a state store replaying chunks
	// tells a full index from a damaged chunk by it, without this package.
	ErrFull error = errFull{}
	// ErrInvalidEvent: the event's id or pubkey is not 64 hex characters, or
	// its kind is out of range.
	ErrInvalidEvent = errors.New("localindex: invalid event")
)

// errFull is ErrFull's type.
type errFull struct{}

func (errFull) Error() string { return "localindex: index full" }

// Full reports true: the index is at capacity.
func (errFull) Full() bool { return true }

// IndexedTags are the tag names whose first value the index keeps.
const IndexedTags = "aAqeEd"

// Options configure an Index.
type Options struct {
	// MaxEvents bounds the index. Default 2,000,000 (about 200 MB).
	MaxEvents int
	// MaxTagsPerEvent bounds the indexed tags kept per event. An event with
	// more is kept as matching every tag filter: extra items on our side of
	// a negentropy set are harmless, missing ones cost a download. Default 256.
	MaxTagsPerEvent int
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{MaxEvents: 2_000_000, MaxTagsPerEvent: 256}
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	if o.MaxEvents <= 0 || o.MaxEvents > authorMask {
		return fmt.Errorf("localindex: MaxEvents %d: must be between 1 and 2^27-1", o.MaxEvents)
	}
	if o.MaxTagsPerEvent <= 0 || o.MaxTagsPerEvent > math.MaxUint16 {
		return fmt.Errorf("localindex: MaxTagsPerEvent %d: must be between 1 and 65535", o.MaxTagsPerEvent)
	}
	return nil
}

// tag refs: 3 bits tag letter, 1 bit interner (1 = 32-byte hex value), 28
// bits index.
const (
	refHexBit   = 1 << 28
	refIdxMask  = refHexBit - 1
	maxInterned = refIdxMask
)

func letterCode(name string) (uint32, bool) {
	if len(name) != 1 {
		return 0, false
	}
	for i := 0; i < len(IndexedTags); i++ {
		if IndexedTags[i] == name[0] {
			return uint32(i), true
		}
	}
	return 0, false
}

// Index is a bounded, concurrency-safe index of the own relay's events.
type Index struct {
	opt Options

	mu         sync.RWMutex
	entries    entryPages
	free       []uint32
	live       int
	ids        keyTable
	authors    *keyInterner
	hexVals    *keyInterner
	strVals    *strInterner
	tags       tagArena // tag refs, entries point into it
	tagGarbage int      // arena slots of removed entries
	scratch    []uint32 // the refs of the event being added
	// postings lists, per tag ref, the slots of the entries carrying it, so
	// a tag filter looks up its values instead of scanning every entry;
	// truncated holds the slots whose tags were cut (they match any tag).
	postings  postingMap
	truncated map[uint32]struct{}
	// bigCreated and bigKinds hold, by slot, the created_at and kind
	// values that do not fit an entry (see entry); nil until needed.
	bigCreated map[uint32]int64
	bigKinds   map[uint32]uint32
	// jr, when set, records what changed since the last DrainJournal.
	jr *journal

	events  prometheus.Gauge
	full    prometheus.Gauge
	dropped prometheus.Counter
}

// New returns an empty Index. Metrics are registered with reg when it is
// not nil.
func New(opt Options, reg prometheus.Registerer) (*Index, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	x := &Index{
		opt:       opt,
		authors:   newKeyInterner(),
		hexVals:   newKeyInterner(),
		strVals:   newStrInterner(),
		postings:  newPostingMap(),
		truncated: map[uint32]struct{}{},
		events: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_localindex_events",
			Help: "Events in the local index of the own relay.",
		}),
		full: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_localindex_full",
			Help: "1 when the local index holds its maximum number of events and refuses more.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ngit_sync_localindex_dropped_total",
			Help: "Events not indexed because the local index was full.",
		}),
	}
	x.ids = newKeyTable(func(slot uint32) *event.ID { return &x.entries.at(slot).id })
	if reg != nil {
		for _, c := range []prometheus.Collector{x.events, x.full, x.dropped} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("localindex: register metrics: %w", err)
			}
		}
	}
	return x, nil
}

// Add indexes ev with a dedupe mark (SeenID). Adding an event that is
// already indexed only sets its mark. It returns ErrFull when the index
// is at capacity.
func (x *Index) Add(ev *nostr.Event) error { return x.add(ev, flagSeenCur) }

// AddNew is Add for an event the own relay has just accepted (an OK true
// that is not "duplicate:", or the live echo of a regular event the
// sidecar sent), with the filled mark too (MarkFilled): the
// own-relay fill of internal/reposync then skips it. Usually the own relay
// held no copy of it, so what it held naming it can only be what came
// before the event itself (a reply stored before its root) or since, from
// others. Khatru answers a duplicate with a bare OK true too, but roots
// the own relay holds are read before any remote relay is synced and seen
// live after, so the sidecar sends it one only in a race (or again after
// a GRASP relay's purgatory released it). Either way what the fill would
// have read is at worst fetched again from a remote relay and answered as
// a duplicate: a download more, never an event missed, against a REQ to
// the own relay per batch of new roots on a first sync.
func (x *Index) AddNew(ev *nostr.Event) error { return x.add(ev, flagSeenCur|flagFilled) }

// AddID is Add, or AddNew when fresh, of an event whose id its caller
// has decoded already (event.Incoming): id must be ev's.
func (x *Index) AddID(id event.ID, ev *nostr.Event, fresh bool) error {
	marks := uint32(flagSeenCur)
	if fresh {
		marks |= flagFilled
	}
	return x.addID(id, ev, marks)
}

func (x *Index) add(ev *nostr.Event, marks uint32) error {
	id, ok := event.DecodeID(ev.ID)
	if !ok {
		return fmt.Errorf("%w: id %q", ErrInvalidEvent, ev.ID)
	}
	return x.addID(id, ev, marks)
}

func (x *Index) addID(id event.ID, ev *nostr.Event, marks uint32) error {
	author, ok := event.DecodeID(ev.PubKey)
	if !ok {
		return fmt.Errorf("%w: pubkey %q", ErrInvalidEvent, ev.PubKey)
	}
	if ev.Kind < 0 || ev.Kind > math.MaxUint32 {
		return fmt.Errorf("%w: kind %d", ErrInvalidEvent, ev.Kind)
	}

	x.mu.Lock()
	defer x.mu.Unlock()
	if slot, ok := x.ids.find(&id); ok {
		x.entries.at(slot).meta |= marks
		return nil
	}
	if x.live >= x.opt.MaxEvents {
		x.full.Set(1)
		x.dropped.Inc()
		return ErrFull
	}

	e := entry{id: id, meta: flagLive | marks | x.authors.intern(&author)}
	refs := x.scratch[:0]
	for _, tag := range ev.Tags {
		if len(tag) < 2 {
			continue
		}
		code, ok := letterCode(tag[0])
		if !ok {
			continue
		}
		if len(refs) >= x.opt.MaxTagsPerEvent || x.hexVals.len() >= maxInterned || x.strVals.len() >= maxInterned {
			e.meta |= flagTruncated
			break
		}
		ref := x.internValue(code, tag[1])
		if containsRef(refs, ref) {
			x.releaseRef(ref)
			continue
		}
		refs = append(refs, ref)
	}
	e.tagOff, e.tagN = x.tags.add(refs), uint16(len(refs))
	x.scratch = refs[:0]
	x.insertEntry(e, int64(ev.CreatedAt), uint32(ev.Kind))
	return nil
}

// insertEntry stores e, whose tags are already in the arena, with its
// created_at and kind.
func (x *Index) insertEntry(e entry, createdAt int64, kind uint32) {
	var slot uint32
	if n := len(x.free); n > 0 {
		slot = x.free[n-1]
		x.free = x.free[:n-1]
	} else {
		slot = x.entries.push(entry{})
	}
	x.setCreatedKind(slot, &e, createdAt, kind)
	*x.entries.at(slot) = e
	x.ids.insert(slot)
	for _, ref := range x.tags.of(e.tagOff, e.tagN) {
		x.postings.add(ref, slot)
	}
	if e.meta&flagTruncated != 0 {
		x.truncated[slot] = struct{}{}
	}
	x.live++
	x.events.Set(float64(x.live))
	if x.jr != nil {
		x.jr.added = append(x.jr.added, slot)
	}
}

// unpost removes slot from ref's posting list.
func (x *Index) unpost(ref, slot uint32) { x.postings.remove(ref, slot) }

func containsRef(refs []uint32, ref uint32) bool {
	for _, r := range refs {
		if r == ref {
			return true
		}
	}
	return false
}

func (x *Index) internValue(code uint32, v string) uint32 {
	if k, ok := event.DecodeID(v); ok {
		return code<<29 | refHexBit | x.hexVals.intern(&k)
	}
	return code<<29 | x.strVals.intern(v)
}

func (x *Index) releaseRef(ref uint32) {
	if ref&refHexBit != 0 {
		x.hexVals.release(ref & refIdxMask)
	} else {
		x.strVals.release(ref & refIdxMask)
	}
}

// Remove drops the event with the given hex id and reports whether it was
// indexed.
func (x *Index) Remove(id string) bool {
	k, ok := event.DecodeID(id)
	if !ok {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.removeLocked(&k)
}

func (x *Index) removeLocked(k *event.ID) bool {
	slot, ok := x.ids.find(k)
	if !ok {
		return false
	}
	x.ids.remove(k)
	if x.jr != nil {
		x.jr.removed = append(x.jr.removed, *k)
	}
	e := x.entries.at(slot)
	x.authors.release(e.author())
	for _, ref := range x.tags.of(e.tagOff, e.tagN) {
		x.unpost(ref, slot)
		x.releaseRef(ref)
	}
	delete(x.truncated, slot)
	x.tagGarbage += int(e.tagN)
	x.clearBig(slot, e)
	*e = entry{}
	x.free = append(x.free, slot)
	x.live--
	x.events.Set(float64(x.live))
	x.full.Set(0)
	if x.tagGarbage > 4096 && x.tagGarbage*2 > x.tags.used {
		x.compactTags()
	}
	return true
}

// compactTags rewrites the tag arena without the slots of removed events.
func (x *Index) compactTags() {
	var tags tagArena
	for i := range x.entries.len() {
		e := x.entries.at(uint32(i))
		if !e.live() {
			continue
		}
		e.tagOff = tags.add(x.tags.of(e.tagOff, e.tagN))
	}
	x.tags = tags
	x.tagGarbage = 0
}

// Has reports whether the event with the given hex id is indexed.
func (x *Index) Has(id string) bool {
	k, ok := event.DecodeID(id)
	if !ok {
		return false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok = x.ids.find(&k)
	return ok
}

// Len is the number of indexed events.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.live
}

// Full reports whether the index is at capacity.
func (x *Index) Full() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.live >= x.opt.MaxEvents
}
