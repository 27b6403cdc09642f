package sync

import (
	stdsync "sync"
)

// seenSet is the dedupe set: ids handed to the publisher or purgatory, or
// known to be on the own relay. It keeps two generations so memory stays
// bounded: when the current one reaches max/2 entries it becomes the old
// one and the previous old one is dropped. Forgetting an id only costs a
// re-publish that the own relay answers with duplicate. Only verified ids
// are ever added. Safe for concurrent use.
type seenSet struct {
	mu       stdsync.Mutex
	cur, old map[[32]byte]struct{}
	half     int
}

func newSeenSet(max int) *seenSet {
	if max < 2 {
		max = 2
	}
	return &seenSet{cur: make(map[[32]byte]struct{}), old: map[[32]byte]struct{}{}, half: max / 2}
}

// Has tells whether id was marked.
func (s *seenSet) Has(id [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasLocked(id)
}

func (s *seenSet) hasLocked(id [32]byte) bool {
	if _, ok := s.cur[id]; ok {
		return true
	}
	_, ok := s.old[id]
	return ok
}

// Mark adds id and reports whether it was new: of two callers racing on the
// same id exactly one gets true.
func (s *seenSet) Mark(id [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hasLocked(id) {
		return false
	}
	if len(s.cur) >= s.half {
		s.old = s.cur
		s.cur = make(map[[32]byte]struct{}, s.half)
	}
	s.cur[id] = struct{}{}
	return true
}

// Forget removes id.
func (s *seenSet) Forget(id [32]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.cur, id)
	delete(s.old, id)
}

// Len is the number of remembered ids.
func (s *seenSet) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cur) + len(s.old)
}
