package localindex

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// The journal lets the index be persisted without rewriting it: once
// enabled, every Add and Remove is remembered until DrainJournal encodes
// them as one self-contained chunk. Replaying the chunks in order
// (LoadChunk) rebuilds the index. Snapshot encodes the whole index as
// chunks, for compaction.
//
// Chunk format (version 1), integers as unsigned varints:
//
//	version byte
//	nRemoved, nRemoved × 32-byte id
//	nAuthors, nAuthors × 32 bytes          (chunk-local table)
//	nHex, nHex × 32 bytes                  (chunk-local table of hex tag values)
//	nStr, nStr × (len, bytes)              (chunk-local table of other tag values)
//	nAdded, per event: 32-byte id, zigzag(created_at − previous), kind,
//	        author index, flags, nTags, nTags × (index<<4 | letter<<1 | hex)
//
// An event costs its id plus about 8 bytes and 2 per indexed tag; authors,
// repository addresses and root ids are stored once per chunk.
type journal struct {
	added   []uint32
	removed []event.ID
}

const chunkVersion = 1

// chunkTruncated is the flags byte of an event whose tags were cut.
const chunkTruncated = 1 << 1

// ErrBadChunk: a persisted chunk does not decode.
var ErrBadChunk = errors.New("localindex: bad persisted chunk")

// EnableJournal starts recording changes for DrainJournal. Call it after
// loading persisted chunks, so they are not recorded again.
func (x *Index) EnableJournal() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.jr == nil {
		x.jr = &journal{}
	}
}

// JournalPending reports how many changes DrainJournal would encode.
func (x *Index) JournalPending() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.jr == nil {
		return 0
	}
	return len(x.jr.added) + len(x.jr.removed)
}

// DrainJournal encodes the changes since the last drain as one chunk and
// forgets them; it returns nil when nothing changed. The chunk holds the
// events as they are now (an event added and removed since the last
// drain is not in it), and the number of removals it carries.
func (x *Index) DrainJournal() (chunk []byte, removed int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.jr == nil || len(x.jr.added)+len(x.jr.removed) == 0 {
		return nil, 0
	}
	seen := make(map[uint32]bool, len(x.jr.added))
	slots := x.jr.added[:0]
	for _, s := range x.jr.added {
		if !seen[s] && x.entries.at(s).live() {
			seen[s] = true
			slots = append(slots, s)
		}
	}
	chunk = x.encodeLocked(x.jr.removed, slots)
	removed = len(x.jr.removed)
	x.jr.added, x.jr.removed = nil, nil
	return chunk, removed
}

// Snapshot encodes every indexed event as chunks of at most perChunk
// events and clears the journal: replaying the snapshot alone rebuilds the
// index as it is now.
func (x *Index) Snapshot(perChunk int) [][]byte {
	x.mu.Lock()
	defer x.mu.Unlock()
	perChunk = max(perChunk, 1)
	var chunks [][]byte
	var slots []uint32
	for i := range x.entries.len() {
		if !x.entries.at(uint32(i)).live() {
			continue
		}
		slots = append(slots, uint32(i))
		if len(slots) == perChunk {
			chunks = append(chunks, x.encodeLocked(nil, slots))
			slots = slots[:0]
		}
	}
	if len(slots) > 0 {
		chunks = append(chunks, x.encodeLocked(nil, slots))
	}
	if x.jr != nil {
		x.jr.added, x.jr.removed = nil, nil
	}
	return chunks
}

type chunkTables struct {
	authors map[uint32]uint64 // interner index → chunk index
	hex     map[uint32]uint64
	str     map[uint32]uint64
	aList   []uint32
	hList   []uint32
	sList   []uint32
}

func (t *chunkTables) ref(m map[uint32]uint64, list *[]uint32, idx uint32) uint64 {
	if c, ok := m[idx]; ok {
		return c
	}
	c := uint64(len(*list))
	m[idx] = c
	*list = append(*list, idx)
	return c
}

func (x *Index) encodeLocked(removed []event.ID, slots []uint32) []byte {
	t := chunkTables{authors: map[uint32]uint64{}, hex: map[uint32]uint64{}, str: map[uint32]uint64{}}
	body := make([]byte, 0, len(slots)*48)
	body = binary.AppendUvarint(body, uint64(len(slots)))
	prev := int64(0)
	for _, s := range slots {
		e := x.entries.at(s)
		body = append(body, e.id[:]...)
		c := x.createdAt(s, e)
		body = binary.AppendVarint(body, c-prev)
		prev = c
		body = binary.AppendUvarint(body, uint64(x.kindOf(s, e)))
		body = binary.AppendUvarint(body, t.ref(t.authors, &t.aList, e.author()))
		var fl byte
		if e.meta&flagTruncated != 0 {
			fl = chunkTruncated
		}
		body = append(body, fl)
		body = binary.AppendUvarint(body, uint64(e.tagN))
		for _, ref := range x.tags.of(e.tagOff, e.tagN) {
			code := uint64(ref >> 29)
			if ref&refHexBit != 0 {
				c := t.ref(t.hex, &t.hList, ref&refIdxMask)
				body = binary.AppendUvarint(body, c<<4|code<<1|1)
			} else {
				c := t.ref(t.str, &t.sList, ref&refIdxMask)
				body = binary.AppendUvarint(body, c<<4|code<<1)
			}
		}
	}
	out := make([]byte, 0, len(body)+len(removed)*32+len(t.aList)*32+len(t.hList)*32+64)
	out = append(out, chunkVersion)
	out = binary.AppendUvarint(out, uint64(len(removed)))
	for i := range removed {
		out = append(out, removed[i][:]...)
	}
	out = binary.AppendUvarint(out, uint64(len(t.aList)))
	for _, a := range t.aList {
		out = append(out, x.authors.val(a)[:]...)
	}
	out = binary.AppendUvarint(out, uint64(len(t.hList)))
	for _, h := range t.hList {
		out = append(out, x.hexVals.val(h)[:]...)
	}
	out = binary.AppendUvarint(out, uint64(len(t.sList)))
	for _, si := range t.sList {
		v := x.strVals.vals[si]
		out = binary.AppendUvarint(out, uint64(len(v)))
		out = append(out, v...)
	}
	return append(out, body...)
}

type chunkReader struct {
	b   []byte
	err error
}

func (r *chunkReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: truncated varint", ErrBadChunk)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *chunkReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: truncated varint", ErrBadChunk)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *chunkReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(len(r.b)) < n {
		r.err = fmt.Errorf("%w: truncated", ErrBadChunk)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// count reads a table length and checks it against what is left (each
// member takes at least min bytes).
func (r *chunkReader) count(min uint64) uint64 {
	n := r.uvarint()
	if r.err == nil && n*min > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: count %d exceeds the chunk", ErrBadChunk, n)
		return 0
	}
	return n
}

// LoadChunk replays one chunk written by DrainJournal or Snapshot: its
// removals, then its events. It returns ErrFull (after adding what fits)
// when the index reaches MaxEvents.
func (x *Index) LoadChunk(chunk []byte) error {
	r := &chunkReader{b: chunk}
	if v := r.bytes(1); r.err != nil || v[0] != chunkVersion {
		return fmt.Errorf("%w: version", ErrBadChunk)
	}
	nRem := r.count(32)
	removed := make([]event.ID, nRem)
	for i := range removed {
		copy(removed[i][:], r.bytes(32))
	}
	readKeys := func() []event.ID {
		n := r.count(32)
		out := make([]event.ID, n)
		for i := range out {
			copy(out[i][:], r.bytes(32))
		}
		return out
	}
	authors, hexVals := readKeys(), readKeys()
	nStr := r.count(1)
	strs := make([]string, nStr)
	for i := range strs {
		strs[i] = string(r.bytes(r.uvarint()))
	}
	if r.err != nil {
		return r.err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := range removed {
		x.removeLocked(&removed[i])
	}
	nAdd := r.count(32 + 5)
	prev := int64(0)
	var full bool
	for i := uint64(0); i < nAdd && r.err == nil; i++ {
		var e entry
		copy(e.id[:], r.bytes(32))
		createdAt := prev + r.varint()
		prev = createdAt
		kind := r.uvarint()
		ai := r.uvarint()
		fl := r.bytes(1)
		nTags := r.uvarint()
		if r.err != nil {
			break
		}
		if ai >= uint64(len(authors)) || kind > 1<<32-1 || nTags > uint64(x.opt.MaxTagsPerEvent) || fl[0]&^chunkTruncated != 0 {
			r.err = fmt.Errorf("%w: event %d out of range", ErrBadChunk, i)
			break
		}
		refs := make([]uint64, nTags)
		for j := range refs {
			refs[j] = r.uvarint()
			idx := refs[j] >> 4
			if (refs[j]&1 == 1 && idx >= uint64(len(hexVals))) || (refs[j]&1 == 0 && idx >= uint64(len(strs))) || (refs[j]>>1)&7 >= uint64(len(IndexedTags)) {
				r.err = fmt.Errorf("%w: event %d tag out of range", ErrBadChunk, i)
			}
		}
		if r.err != nil {
			break
		}
		if _, ok := x.ids.find(&e.id); ok {
			continue
		}
		if x.live >= x.opt.MaxEvents {
			full = true
			continue
		}
		e.meta = flagLive | flagSeenCur | x.authors.intern(&authors[ai])
		if fl[0]&chunkTruncated != 0 {
			e.meta |= flagTruncated
		}
		tags := x.scratch[:0]
		for _, ref := range refs {
			if x.hexVals.len() >= maxInterned || x.strVals.len() >= maxInterned {
				e.meta |= flagTruncated // as Add does: the interners are full
				break
			}
			code := uint32(ref>>1) & 7
			var tr uint32
			if ref&1 == 1 {
				tr = code<<29 | refHexBit | x.hexVals.intern(&hexVals[ref>>4])
			} else {
				tr = code<<29 | x.strVals.intern(strs[ref>>4])
			}
			tags = append(tags, tr)
		}
		e.tagOff, e.tagN = x.tags.add(tags), uint16(len(tags))
		x.scratch = tags[:0]
		x.insertEntry(e, createdAt, uint32(kind))
	}
	if r.err != nil {
		return r.err
	}
	if full {
		x.full.Set(1)
		return ErrFull
	}
	return nil
}

// Clear empties the index. With the journal on, every event is recorded
// as removed, so a persisted copy is emptied by the next drain as well.
func (x *Index) Clear() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.jr != nil {
		for i := range x.entries.len() {
			if e := x.entries.at(uint32(i)); e.live() {
				x.jr.removed = append(x.jr.removed, e.id)
			}
		}
		x.jr.added = nil
	}
	x.entries, x.free, x.live = entryPages{}, nil, 0
	x.authors, x.hexVals, x.strVals = newKeyInterner(), newKeyInterner(), newStrInterner()
	x.tags, x.tagGarbage = tagArena{}, 0
	x.postings, x.truncated = newPostingMap(), map[uint32]struct{}{}
	x.bigCreated, x.bigKinds = nil, nil
	x.ids = newKeyTable(func(slot uint32) *event.ID { return &x.entries.at(slot).id })
	x.events.Set(0)
	x.full.Set(0)
}
