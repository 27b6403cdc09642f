package localindex

import (
	"hash/maphash"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// keyTable is an open-addressing hash set of uint32 indexes whose 32-byte
// keys live elsewhere (in the caller's slice), so a member costs 4 bytes
// of table plus load-factor slack. Linear probing with backward-shift
// deletion; the hash is seeded so crafted keys cannot force collisions.
//
// A slot holds index+1 in its low slotIdxBits bits and four more bits of
// the key's hash above them: a probe reads the key behind a slot (another
// cache line, often a miss) only when those bits agree, so a lookup of an
// absent key — a new event, an id a reconciliation found — rarely reads
// any key at all.
type keyTable struct {
	seed  maphash.Seed
	slots []uint32 // tag<<slotIdxBits | index+1; 0 = empty
	n     int
	key   func(idx uint32) *event.ID
}

const (
	slotIdxBits = 28 // indexes below 2^28-1: MaxEvents ≤ 2^27-1, maxInterned
	slotIdxMask = 1<<slotIdxBits - 1
)

func newKeyTable(key func(uint32) *event.ID) keyTable {
	return keyTable{seed: maphash.MakeSeed(), slots: make([]uint32, 16), key: key}
}

// hash returns k's home slot and its tag bits (already shifted into place).
func (t *keyTable) hash(k *event.ID) (int, uint32) {
	h := maphash.Bytes(t.seed, k[:])
	return int(h & uint64(len(t.slots)-1)), uint32(h>>(64-(32-slotIdxBits))) << slotIdxBits
}

// find returns the index stored for k.
func (t *keyTable) find(k *event.ID) (uint32, bool) {
	mask := len(t.slots) - 1
	i, tag := t.hash(k)
	for ; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&^slotIdxMask == tag && *t.key(s&slotIdxMask - 1) == *k {
			return s&slotIdxMask - 1, true
		}
	}
}

// insert adds idx, whose key must not be present yet.
func (t *keyTable) insert(idx uint32) {
	if idx >= slotIdxMask {
		panic("localindex: key table index out of range")
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.place(idx)
	t.n++
}

func (t *keyTable) place(idx uint32) {
	mask := len(t.slots) - 1
	i, tag := t.hash(t.key(idx))
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = tag | (idx + 1)
}

func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]uint32, len(old)*2)
	for _, s := range old {
		if s != 0 {
			t.place(s&slotIdxMask - 1)
		}
	}
}

// remove deletes k and reports whether it was present.
func (t *keyTable) remove(k *event.ID) bool {
	mask := len(t.slots) - 1
	i, tag := t.hash(k)
	for {
		s := t.slots[i]
		if s == 0 {
			return false
		}
		if s&^slotIdxMask == tag && *t.key(s&slotIdxMask - 1) == *k {
			break
		}
		i = (i + 1) & mask
	}
	// Backward shift: move later members of the probe run into the hole
	// unless their home lies cyclically in (hole, j].
	j := i
	for {
		j = (j + 1) & mask
		s := t.slots[j]
		if s == 0 {
			break
		}
		h, _ := t.hash(t.key(s&slotIdxMask - 1))
		if (i < j && i < h && h <= j) || (i > j && (i < h || h <= j)) {
			continue
		}
		t.slots[i] = s
		i = j
	}
	t.slots[i] = 0
	t.n--
	return true
}

// bytes is the table's memory footprint.
func (t *keyTable) bytes() int { return len(t.slots) * 4 }
