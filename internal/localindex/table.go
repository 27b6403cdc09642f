package localindex

import (
	"hash/maphash"
)

// keyTable is an open-addressing hash set of uint32 indexes whose 32-byte
// keys live elsewhere (in the caller's slice), so a member costs 4 bytes
// of table plus load-factor slack. Linear probing with backward-shift
// deletion; the hash is seeded so crafted keys cannot force collisions.
type keyTable struct {
	seed  maphash.Seed
	slots []uint32 // index+1; 0 = empty
	n     int
	key   func(idx uint32) *[32]byte
}

func newKeyTable(key func(uint32) *[32]byte) keyTable {
	return keyTable{seed: maphash.MakeSeed(), slots: make([]uint32, 16), key: key}
}

func (t *keyTable) home(k *[32]byte) int {
	return int(maphash.Bytes(t.seed, k[:]) & uint64(len(t.slots)-1))
}

// find returns the index stored for k.
func (t *keyTable) find(k *[32]byte) (uint32, bool) {
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if *t.key(s - 1) == *k {
			return s - 1, true
		}
	}
}

// insert adds idx, whose key must not be present yet.
func (t *keyTable) insert(idx uint32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.place(idx)
	t.n++
}

func (t *keyTable) place(idx uint32) {
	mask := len(t.slots) - 1
	i := t.home(t.key(idx))
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = idx + 1
}

func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]uint32, len(old)*2)
	for _, s := range old {
		if s != 0 {
			t.place(s - 1)
		}
	}
}

// remove deletes k and reports whether it was present.
func (t *keyTable) remove(k *[32]byte) bool {
	mask := len(t.slots) - 1
	i := t.home(k)
	for {
		s := t.slots[i]
		if s == 0 {
			return false
		}
		if *t.key(s - 1) == *k {
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
		h := t.home(t.key(s - 1))
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
