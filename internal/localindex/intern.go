package localindex

import "strings"

// keyInterner stores each distinct 32-byte value (pubkeys, hex event ids in
// tags) once, with a reference count, and hands out small indexes.
type keyInterner struct {
	vals [][32]byte
	refs []uint32
	free []uint32
	t    keyTable
}

func newKeyInterner() *keyInterner {
	ki := &keyInterner{}
	ki.t = newKeyTable(func(idx uint32) *[32]byte { return &ki.vals[idx] })
	return ki
}

func (ki *keyInterner) intern(k *[32]byte) uint32 {
	if idx, ok := ki.t.find(k); ok {
		ki.refs[idx]++
		return idx
	}
	var idx uint32
	if n := len(ki.free); n > 0 {
		idx = ki.free[n-1]
		ki.free = ki.free[:n-1]
		ki.vals[idx], ki.refs[idx] = *k, 1
	} else {
		idx = uint32(len(ki.vals))
		ki.vals = append(ki.vals, *k)
		ki.refs = append(ki.refs, 1)
	}
	ki.t.insert(idx)
	return idx
}

func (ki *keyInterner) lookup(k *[32]byte) (uint32, bool) { return ki.t.find(k) }

func (ki *keyInterner) release(idx uint32) {
	ki.refs[idx]--
	if ki.refs[idx] == 0 {
		ki.t.remove(&ki.vals[idx])
		ki.vals[idx] = [32]byte{}
		ki.free = append(ki.free, idx)
	}
}

func (ki *keyInterner) len() int { return len(ki.vals) - len(ki.free) }

// strInterner stores each distinct string (repository addresses, d tags,
// tag values that are not hex ids) once, with a reference count.
type strInterner struct {
	idx  map[string]uint32
	vals []string
	refs []uint32
	free []uint32
}

func newStrInterner() *strInterner { return &strInterner{idx: map[string]uint32{}} }

func (si *strInterner) intern(s string) uint32 {
	if idx, ok := si.idx[s]; ok {
		si.refs[idx]++
		return idx
	}
	s = strings.Clone(s) // do not pin the event's memory
	var idx uint32
	if n := len(si.free); n > 0 {
		idx = si.free[n-1]
		si.free = si.free[:n-1]
		si.vals[idx], si.refs[idx] = s, 1
	} else {
		idx = uint32(len(si.vals))
		si.vals = append(si.vals, s)
		si.refs = append(si.refs, 1)
	}
	si.idx[s] = idx
	return idx
}

func (si *strInterner) lookup(s string) (uint32, bool) {
	idx, ok := si.idx[s]
	return idx, ok
}

func (si *strInterner) release(idx uint32) {
	si.refs[idx]--
	if si.refs[idx] == 0 {
		delete(si.idx, si.vals[idx])
		si.vals[idx] = ""
		si.free = append(si.free, idx)
	}
}

func (si *strInterner) len() int { return len(si.vals) - len(si.free) }
