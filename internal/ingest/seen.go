package ingest

import (
	"sync"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// seenSet is the dedupe set: ids handed to the publisher or purgatory, or
// known to be on the own relay. It keeps two generations so memory and age
// stay bounded: when the current one reaches max/2 entries or is older than
// ttl/2 it becomes the old one and the previous old one is dropped. So an
// id is remembered for between ttl/2 and ttl: long enough that events
// arriving from several relays are published once, short enough that a
// full resync re-publishes what the own relay lost. Forgetting an id only
// costs a re-publish that the own relay answers with duplicate. Only
// verified ids are ever added. Safe for concurrent use.
//
// With a present table (the LocalIndex) an id the table holds is marked
// in its entry, which the table ages with the same two generations
// (RotateSeen): the handler drops an id's own mark once the table has it
// (learnPresent), so the ids of the own relay's events are kept once, in
// the index, not a second time here. Marks here then cover only what is
// on its way (in flight, in the purgatory, refused) or could not be
// indexed.
//
// An id is remembered by its first 16 bytes (seenKey): half the memory of
// the whole id, and a different event with the same first 128 bits of
// its SHA-256 id cannot be made (a second preimage on 128 bits).
type seenSet struct {
	mu       sync.Mutex
	cur, old map[seenKey]struct{}
	half     int
	ttl      time.Duration
	now      func() time.Time
	rotated  time.Time
	// presentRotated is when the present table's marks last changed
	// generation: by time only (a rotation by size here must not put
	// their ageing off, or indexed ids would stay marked for good).
	presentRotated time.Time
	// present, when set, holds ids known on the own relay and their
	// marks; it is asked under mu, after the marks here (lock order:
	// seen, then the table).
	present presentIDs
}

// presentIDs is the table of ids known on the own relay, with a dedupe
// mark per id (*localindex.Index).
type presentIDs interface {
	SeenID(id event.ID) bool
	MarkSeenID(id event.ID) bool // false: not in the table
	ForgetSeenID(id event.ID)
	RotateSeen(clear bool)
}

// seenKey is the part of an event id the seen set keeps.
type seenKey [16]byte

func keyOf(id event.ID) seenKey { return seenKey(id[:16]) }

func newSeenSet(max int, ttl time.Duration, now func() time.Time) *seenSet {
	if max < 2 {
		max = 2
	}
	if now == nil {
		now = time.Now
	}
	return &seenSet{cur: make(map[seenKey]struct{}), old: map[seenKey]struct{}{}, half: max / 2, ttl: ttl, now: now, rotated: now(), presentRotated: now()}
}

// Has tells whether id was marked.
func (s *seenSet) Has(id event.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ageLocked()
	return s.hasLocked(id)
}

// ageLocked rotates generations by time: the current one becomes old after
// ttl/2, and everything is dropped once ttl passed since the last rotation.
func (s *seenSet) ageLocked() {
	if s.ttl <= 0 {
		return
	}
	now := s.now()
	switch age := now.Sub(s.rotated); {
	case age >= s.ttl:
		s.old = map[seenKey]struct{}{}
		s.cur = make(map[seenKey]struct{})
		s.rotated = now
	case age >= s.ttl/2:
		s.old = s.cur
		s.cur = make(map[seenKey]struct{})
		s.rotated = now
	}
	if s.present == nil {
		return
	}
	switch age := now.Sub(s.presentRotated); {
	case age >= s.ttl:
		s.present.RotateSeen(true)
		s.presentRotated = now
	case age >= s.ttl/2:
		s.present.RotateSeen(false)
		s.presentRotated = now
	}
}

func (s *seenSet) hasLocked(id event.ID) bool {
	k := keyOf(id)
	if _, ok := s.cur[k]; ok {
		return true
	}
	if len(s.old) > 0 {
		if _, ok := s.old[k]; ok {
			return true
		}
	}
	return s.present != nil && s.present.SeenID(id)
}

// Mark adds id and reports whether it was new: of two callers racing on the
// same id exactly one gets true.
func (s *seenSet) Mark(id event.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ageLocked()
	if s.hasLocked(id) {
		return false
	}
	if s.present != nil && s.present.MarkSeenID(id) {
		return true // marked in the table's entry
	}
	if len(s.cur) >= s.half {
		s.old = s.cur
		s.cur = make(map[seenKey]struct{})
		s.rotated = s.now()
	}
	s.cur[keyOf(id)] = struct{}{}
	return true
}

// Forget removes id's mark, here and in the present table.
func (s *seenSet) Forget(id event.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(id)
	delete(s.cur, k)
	delete(s.old, k)
	if s.present != nil {
		s.present.ForgetSeenID(id)
	}
}

// dropMark removes id's mark here only: the present table has it now,
// with its own mark.
func (s *seenSet) dropMark(id event.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(id)
	delete(s.cur, k)
	delete(s.old, k)
}

// Len is the number of marks (ids in the present table not counted).
func (s *seenSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur) + len(s.old)
}
