package ingest

import (
	"sync"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// States of an event id for a fetch deciding whether to ask for it
// (IDState).
const (
	// IDUnseen: not handed on and not known on the own relay.
	IDUnseen = iota
	// IDInFlight: a copy the sidecar did not check is on its way to the
	// own relay. It may be forged: if the own relay refuses it as
	// invalid the id becomes unseen again, and a different copy that
	// arrives meanwhile is checked and sent instead (flight.go).
	IDInFlight
	// IDSettled: handed on (a checked copy, or its outcome is known) or
	// known on the own relay.
	IDSettled
	// IDInvalid: unseen, and a copy was lately dropped as invalid (too
	// large, too many tags, an id that does not match): nobody will
	// deliver it unless asked again, so a fetch waiting for it asks its
	// own relay at once. It never makes a fetch skip the id.
	IDInvalid
)

// IDState tells where an event id is: IDUnseen, IDInFlight, IDSettled or
// IDInvalid.
func (h *Handler) IDState(id event.ID) int {
	h.flying.mu.Lock()
	defer h.flying.mu.Unlock()
	if !h.seen.Has(id) {
		if h.invalid.has(id) {
			return IDInvalid
		}
		return IDUnseen
	}
	if fl := h.flying.m[id]; fl != nil && !fl.verified && fl.alt == nil {
		return IDInFlight
	}
	return IDSettled
}

// invalidIDsGen is how many ids one generation of invalidIDs holds: an id
// stays known as dropped for between one and two generations.
const invalidIDsGen = 1 << 14

// invalidIDs are the ids of copies lately dropped as invalid, in two
// generations so memory is bounded (IDInvalid).
type invalidIDs struct {
	mu       sync.Mutex
	cur, old map[event.ID]struct{}
}

// add records that a copy of id was dropped as invalid.
func (s *invalidIDs) add(id event.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || len(s.cur) >= invalidIDsGen {
		s.old, s.cur = s.cur, make(map[event.ID]struct{})
	}
	s.cur[id] = struct{}{}
}

// has tells whether a copy of id was lately dropped as invalid.
func (s *invalidIDs) has(id event.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, inCur := s.cur[id]
	_, inOld := s.old[id]
	return inCur || inOld
}

// noteInvalid records that the copy in carries was dropped as invalid.
func (h *Handler) noteInvalid(in *Incoming) {
	if id, ok := in.ID(); ok {
		h.invalid.add(id)
	}
}
