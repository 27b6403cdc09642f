package reposync

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"
)

// interner maps strings to handles and back. Handles are never reused:
// the table grows with every string ever added to a set (it holds each
// once; the sets hold handles). Lookups may run on any goroutine.
//
// The strings live in pointer-free pages of bytes, not as strings of
// their own: a root id (64 lowercase hex characters, most of the table)
// is kept as its 32 bytes, the rest as they are, each behind a one-byte
// header. The large profile's ~500,000 roots cost ~52 bytes each here
// (BenchmarkPerRootBytes/names), where a string each and a []string
// table cost ~90, and the collector no longer visits one object per root.
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
	// hexIDLen is the length of a root id in hex.
	hexIDLen = 64
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

// key is a string as the table compares and hashes it: the 32 bytes of a
// lowercase hex id (bin), else the string's own bytes.
type key struct {
	s   string
	bin [32]byte
	hex bool
}

func keyOf(s string) key {
	k := key{s: s}
	k.hex = len(s) == hexIDLen && decodeLowerHex(&k.bin, s)
	return k
}

func (k *key) bytes() []byte {
	if k.hex {
		return k.bin[:]
	}
	return unsafe.Slice(unsafe.StringData(k.s), len(k.s))
}

func (k *key) hash(seed maphash.Seed) uint64 {
	if k.hex {
		return maphash.Bytes(seed, k.bin[:])
	}
	return maphash.String(seed, k.s)
}

// decodeLowerHex decodes 64 lowercase hex characters into b; false when
// s is anything else (upper case is kept as text: it is another string).
func decodeLowerHex(b *[32]byte, s string) bool {
	for i := range b {
		hi, ok1 := lowerNibble(s[2*i])
		lo, ok2 := lowerNibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		b[i] = hi<<4 | lo
	}
	return true
}

func lowerNibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// record returns handle h's stored bytes and whether they are a hex id's.
func (in *interner) record(h uint32) ([]byte, bool) {
	w := (*in.where.Load())[h/nameChunk][h%nameChunk]
	rec := (*in.pages.Load())[w>>32][uint32(w):]
	hdr, n := binary.Uvarint(rec)
	return rec[n : n+int(hdr>>1)], hdr&1 != 0
}

// name returns handle h's string: a hex id's is made from its bytes, any
// other is the stored bytes themselves (never changed).
func (in *interner) name(h uint32) string {
	rec, isHex := in.record(h)
	if isHex {
		return hex.EncodeToString(rec)
	}
	if len(rec) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(rec), len(rec))
}

// lookup returns s's handle, if s has one.
func (in *interner) lookup(s string) (uint32, bool) {
	k := keyOf(s)
	in.mu.RLock()
	h, ok := in.find(&k)
	in.mu.RUnlock()
	return h, ok
}

// find is lookup under mu.
func (in *interner) find(k *key) (uint32, bool) {
	mask := uint64(len(in.slots) - 1)
	want := k.bytes()
	for i := k.hash(in.seed) & mask; ; i = (i + 1) & mask {
		v := in.slots[i]
		if v == 0 {
			return 0, false
		}
		if rec, isHex := in.record(v - 1); isHex == k.hex && bytes.Equal(rec, want) {
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
	k := keyOf(s)
	in.mu.RLock()
	h, ok := in.find(&k)
	in.mu.RUnlock()
	if ok {
		return h
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if h, ok := in.find(&k); ok {
		return h
	}
	h = uint32(in.n)
	in.store(h, &k)
	in.n++
	if 4*in.n >= 3*len(in.slots) { // load 3/4: double
		slots := make([]uint32, 2*len(in.slots))
		for x := range uint32(in.n - 1) {
			rec, isHex := in.record(x)
			kx := key{hex: isHex}
			if isHex {
				kx.bin = [32]byte(rec)
			} else {
				kx.s = in.name(x)
			}
			in.place(slots, kx.hash(in.seed), x)
		}
		in.slots = slots
	}
	in.place(in.slots, k.hash(in.seed), h)
	return h
}

// store writes handle h's record and locates it (under mu).
func (in *interner) store(h uint32, k *key) {
	b := k.bytes()
	var hdr [binary.MaxVarintLen64]byte
	flag := uint64(0)
	if k.hex {
		flag = 1
	}
	hn := binary.PutUvarint(hdr[:], uint64(len(b))<<1|flag)
	size := hn + len(b)
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
	copy(pages[page][off+hn:], b)
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
