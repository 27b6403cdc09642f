package repoindex

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"
)

// interner maps strings to handles and back. Handles are never reused:
// the table grows with every string ever added to a set (it holds each
// once; the sets hold handles). Lookups may run on any goroutine.
//
// The strings live in pointer-free pages of bytes, each behind its length
// (one byte for a root id), not as strings of their own in a []string: a
// root costs less here (BenchmarkPerRootBytes/names), and the collector
// neither marks one object per root nor scans a table of pointers at each
// cycle (a large deployment has hundreds of thousands of roots).
// A root id is not kept in binary: the names are shared by whoever reads
// them (a relay's live filters and their matchers hold its roots' names),
// and names made when read would each be a copy.
type interner struct {
	mu sync.RWMutex
	// slots is an open-addressing table of handles+1 (0: empty) by the
	// hash of their string: 4 bytes a slot.
	slots []uint32
	seed  maphash.Seed
	n     int // handles handed out (under mu)
	// pages hold the records, each page made at its full length and
	// never resliced; page cur is filled up to curOff (under mu). A
	// record's bytes are written before its handle is handed out and
	// never changed, and the lists below are replaced, not changed, when
	// they grow, so name reads them without mu.
	pages  atomic.Pointer[[][]byte]
	cur    int // -1: none yet
	curOff int
	// where locates handle h's record, page<<32 | offset, in chunks of
	// nameChunk.
	where atomic.Pointer[[]*[nameChunk]uint64]
}

const (
	// namePage is the size of a page of records; a record longer than
	// nameLong gets a page of its own.
	namePage = 64 << 10
	nameLong = namePage / 4
	// nameChunk is how many handles one chunk of where locates.
	nameChunk = 4096
)

// names is the engine's one table (package-wide: a process runs one
// engine; tests that run several share it, which changes no result).
var names = newInterner()

func newInterner() *interner {
	in := &interner{slots: make([]uint32, 1024), seed: maphash.MakeSeed(), cur: -1}
	in.pages.Store(&[][]byte{})
	in.where.Store(&[]*[nameChunk]uint64{})
	return in
}

// name returns handle h's string: its bytes in the page, which never
// change, so every caller shares them (a relay's live filters and
// matchers hold the names of its roots).
func (in *interner) name(h uint32) string {
	w := (*in.where.Load())[h/nameChunk][h%nameChunk]
	rec := (*in.pages.Load())[w>>32][uint32(w):]
	n, hn := binary.Uvarint(rec)
	if n == 0 {
		return ""
	}
	return unsafe.String(&rec[hn], int(n))
}

// lookup returns s's handle, if s has one.
func (in *interner) lookup(s string) (uint32, bool) {
	in.mu.RLock()
	h, ok := in.find(s)
	in.mu.RUnlock()
	return h, ok
}

// find is lookup under mu.
func (in *interner) find(s string) (uint32, bool) {
	mask := uint64(len(in.slots) - 1)
	for i := maphash.String(in.seed, s) & mask; ; i = (i + 1) & mask {
		v := in.slots[i]
		if v == 0 {
			return 0, false
		}
		if in.name(v-1) == s {
			return v - 1, true
		}
	}
}

// place puts handle h, of hash hash, into slots (under mu, with a free
// slot).
func (in *interner) place(slots []uint32, hash uint64, h uint32) {
	mask := uint64(len(slots) - 1)
	i := hash & mask
	for slots[i] != 0 {
		i = (i + 1) & mask
	}
	slots[i] = h + 1
}

// intern returns s's handle, giving it one if it has none. The table
// keeps its own copy of s (s may be a slice of a larger buffer).
func (in *interner) intern(s string) uint32 {
	if h, ok := in.lookup(s); ok {
		return h
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if h, ok := in.find(s); ok {
		return h
	}
	h := uint32(in.n)
	in.store(h, s)
	in.n++
	if 4*in.n >= 3*len(in.slots) { // load 3/4: double
		slots := make([]uint32, 2*len(in.slots))
		for x := range uint32(in.n - 1) {
			in.place(slots, maphash.String(in.seed, in.name(x)), x)
		}
		in.slots = slots
	}
	in.place(in.slots, maphash.String(in.seed, s), h)
	return h
}

// store writes handle h's record (s's length and bytes) and locates it
// (under mu).
func (in *interner) store(h uint32, s string) {
	var hdr [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(hdr[:], uint64(len(s)))
	size := hn + len(s)
	var page, off int
	switch {
	case size > nameLong: // a page of its own; cur stays the shared one
		page = in.addPage(make([]byte, size))
	case in.cur < 0 || in.curOff+size > namePage:
		in.cur, in.curOff = in.addPage(make([]byte, namePage)), 0
		fallthrough
	default:
		page, off = in.cur, in.curOff
		in.curOff += size
	}
	pages := *in.pages.Load()
	copy(pages[page][off:], hdr[:hn])
	copy(pages[page][off+hn:], s)
	chunks := *in.where.Load()
	if int(h/nameChunk) >= len(chunks) {
		grown := append(chunks[:len(chunks):len(chunks)], new([nameChunk]uint64))
		in.where.Store(&grown)
		chunks = grown
	}
	chunks[h/nameChunk][h%nameChunk] = uint64(page)<<32 | uint64(off)
}

// addPage appends p to the pages (a new list: readers keep the one they
// loaded) and returns its index (under mu).
func (in *interner) addPage(p []byte) int {
	old := *in.pages.Load()
	grown := append(old[:len(old):len(old)], p)
	in.pages.Store(&grown)
	return len(old)
}

// Intern returns s's handle in the process's one table, adding s once.
func Intern(s string) uint32 { return names.intern(s) }

// NameOf returns handle h's string.
func NameOf(h uint32) string { return names.name(h) }

// Lookup returns s's handle when s was ever interned.
func Lookup(s string) (uint32, bool) { return names.lookup(s) }
