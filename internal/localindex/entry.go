package localindex

import (
	"math"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// entry is one indexed event: 48 bytes. created_at takes 4 bytes and the
// kind 2; a value that does not fit (a created_at before 1970 or from
// 2106 on, a kind of 65535 or more) is kept exactly in a side table by
// slot (Index.bigCreated, Index.bigKinds), so the negentropy set stays
// exact. The author's interned index shares a word with the flags.
type entry struct {
	id      event.ID
	created uint32 // created_at, or bigCreated: see Index.bigCreated
	meta    uint32 // author index (authorMask) | flags
	tagOff  uint32
	kind    uint16 // kind, or bigKind: see Index.bigKinds
	tagN    uint16
}

const (
	bigCreated = math.MaxUint32
	bigKind    = math.MaxUint16

	authorBits = 27
	authorMask = 1<<authorBits - 1

	flagLive      = 1 << authorBits       // the slot holds an event
	flagTruncated = 1 << (authorBits + 1) // tags not all kept: matches every tag condition
	flagFilled    = 1 << (authorBits + 2) // MarkFilled: the own relay's events naming this one were read
	// flagSeenCur and flagSeenOld are the dedupe marks of internal/ingest
	// (SeenID): set when the event is added or marked, moved from current
	// to old and dropped as the dedupe memory ages (RotateSeen).
	flagSeenCur = 1 << (authorBits + 3)
	flagSeenOld = 1 << (authorBits + 4)
	flagSeen    = flagSeenCur | flagSeenOld
)

func (e *entry) author() uint32 { return e.meta & authorMask }
func (e *entry) live() bool     { return e.meta&flagLive != 0 }

// setCreatedKind stores created_at and kind into the entry in slot,
// spilling what does not fit to the side tables.
func (x *Index) setCreatedKind(slot uint32, e *entry, createdAt int64, kind uint32) {
	if createdAt >= 0 && createdAt < bigCreated {
		e.created = uint32(createdAt)
	} else {
		e.created = bigCreated
		if x.bigCreated == nil {
			x.bigCreated = map[uint32]int64{}
		}
		x.bigCreated[slot] = createdAt
	}
	if kind < bigKind {
		e.kind = uint16(kind)
	} else {
		e.kind = bigKind
		if x.bigKinds == nil {
			x.bigKinds = map[uint32]uint32{}
		}
		x.bigKinds[slot] = kind
	}
}

// clearBig forgets slot's side-table values.
func (x *Index) clearBig(slot uint32, e *entry) {
	if e.created == bigCreated {
		delete(x.bigCreated, slot)
	}
	if e.kind == bigKind {
		delete(x.bigKinds, slot)
	}
}

// createdAt is the created_at of the entry e in slot.
func (x *Index) createdAt(slot uint32, e *entry) int64 {
	if e.created != bigCreated {
		return int64(e.created)
	}
	return x.bigCreated[slot]
}

// kindOf is the kind of the entry e in slot.
func (x *Index) kindOf(slot uint32, e *entry) uint32 {
	if e.kind != bigKind {
		return uint32(e.kind)
	}
	return x.bigKinds[slot]
}

// MarkFilled sets the filled mark of the indexed event with this hex id
// and reports whether it is indexed (internal/reposync's own-relay fill
// keeps there, at no cost, that it read the own relay's events naming
// this one). The mark is not persisted and goes with the event.
func (x *Index) MarkFilled(id string) bool {
	k, ok := event.DecodeID(id)
	if !ok {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	slot, ok := x.ids.find(&k)
	if ok {
		x.entries.at(slot).meta |= flagFilled
	}
	return ok
}

// Filled reports whether the event with this hex id is indexed with its
// filled mark set (MarkFilled).
func (x *Index) Filled(id string) bool {
	k, ok := event.DecodeID(id)
	if !ok {
		return false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	slot, ok := x.ids.find(&k)
	return ok && x.entries.at(slot).meta&flagFilled != 0
}

// ClearFilled clears every filled mark.
func (x *Index) ClearFilled() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range x.entries.len() {
		x.entries.at(uint32(i)).meta &^= flagFilled
	}
}

// The dedupe set of internal/ingest keeps no mark of its own for an
// event the index holds: the entry carries it (flagSeenCur, flagSeenOld),
// with the same two generations, so an id is remembered for between
// ttl/2 and ttl after it was last added or marked and a full resync
// publishes again what the own relay lost meanwhile. Add sets the mark.

// SeenID reports whether the event with this binary id is indexed with a
// dedupe mark.
func (x *Index) SeenID(id event.ID) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	slot, ok := x.ids.find(&id)
	return ok && x.entries.at(slot).meta&flagSeen != 0
}

// MarkSeenID sets the dedupe mark of the event with this binary id and
// reports whether it is indexed.
func (x *Index) MarkSeenID(id event.ID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	slot, ok := x.ids.find(&id)
	if ok {
		x.entries.at(slot).meta |= flagSeenCur
	}
	return ok
}

// ForgetSeenID clears the dedupe mark of the event with this binary id.
func (x *Index) ForgetSeenID(id event.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if slot, ok := x.ids.find(&id); ok {
		x.entries.at(slot).meta &^= flagSeen
	}
}

// RotateSeen ages the dedupe marks by one generation: current marks
// become old, old ones are dropped. clear drops them all.
func (x *Index) RotateSeen(clear bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range x.entries.len() {
		e := x.entries.at(uint32(i))
		switch {
		case clear:
			e.meta &^= flagSeen
		case e.meta&flagSeenCur != 0:
			e.meta = e.meta&^flagSeen | flagSeenOld
		default:
			e.meta &^= flagSeenOld
		}
	}
}
