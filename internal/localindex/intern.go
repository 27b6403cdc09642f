package localindex

import (
	"strings"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// keyInterner stores each distinct 32-byte value (pubkeys, hex event ids in
// tags) once, with a reference count, and hands out small indexes. The
// values are kept in pages (pageArray): growing never copies them.
type keyInterner struct {
	vals pageArray[internedKey]
	free []uint32
	t    keyTable
}

type internedKey struct {
	key  event.ID
	refs uint32
}

func newKeyInterner() *keyInterner {
	ki := &keyInterner{}
	ki.t = newKeyTable(func(idx uint32) *event.ID { return &ki.vals.at(idx).key })
	return ki
}

// val is the value of idx.
func (ki *keyInterner) val(idx uint32) *event.ID { return &ki.vals.at(idx).key }

func (ki *keyInterner) intern(k *event.ID) uint32 {
	if idx, ok := ki.t.find(k); ok {
		ki.vals.at(idx).refs++
		return idx
	}
	var idx uint32
	if n := len(ki.free); n > 0 {
		idx = ki.free[n-1]
		ki.free = ki.free[:n-1]
		*ki.vals.at(idx) = internedKey{key: *k, refs: 1}
	} else {
		idx = ki.vals.push(internedKey{key: *k, refs: 1})
	}
	ki.t.insert(idx)
	return idx
}

func (ki *keyInterner) lookup(k *event.ID) (uint32, bool) { return ki.t.find(k) }

func (ki *keyInterner) release(idx uint32) {
	v := ki.vals.at(idx)
	v.refs--
	if v.refs == 0 {
		ki.t.remove(&v.key)
		v.key = event.ID{}
		ki.free = append(ki.free, idx)
	}
}

func (ki *keyInterner) len() int { return ki.vals.len() - len(ki.free) }

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
