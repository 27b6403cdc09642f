package neg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"unsafe"
)

// NIP-77 range modes.
const (
	modeSkip        = 0
	modeFingerprint = 1
	modeIDList      = 2

	buckets         = 16 // ranges a mismatching range is split into
	fingerprintSize = 16
	infiniteTS      = math.MaxInt64 // the timestamp of the infinite bound
	frameMargin     = 200           // room kept below the frame limit, as the reference does
)

// bound is a NIP-77 range bound: a timestamp and an id prefix of n bytes.
type bound struct {
	ts int64
	n  int
	id [idSize]byte
}

var infiniteBound = bound{ts: infiniteTS}

func itemBound(it *Item) bound {
	return bound{ts: int64(it.CreatedAt), n: idSize, id: it.ID}
}

// minimalBound is the shortest bound that separates prev from curr (prev <
// curr): curr's timestamp alone if they differ, otherwise curr's id up to
// and including the first byte that differs from prev's. Like the C++ and
// JS references it compares all 32 bytes; go-nostr compares only the first
// 16, so for two ids of one second sharing 16 or more leading bytes (not
// seen with sha256 ids) its messages differ from ours, both being valid.
func minimalBound(prev, curr *Item) bound {
	if curr.CreatedAt != prev.CreatedAt {
		return bound{ts: int64(curr.CreatedAt)}
	}
	shared := 0
	for shared < idSize && curr.ID[shared] == prev.ID[shared] {
		shared++
	}
	b := bound{ts: int64(curr.CreatedAt), n: min(shared+1, idSize)}
	copy(b.id[:], curr.ID[:b.n])
	return b
}

// Engine is one side of a NIP-77 reconciliation over a Storage, working on
// binary messages (the session hex-encodes them for the wire). It produces
// the same messages as go-nostr's and the reference implementations'
// engines, but keeps ids as 32-byte arrays throughout, decodes and encodes
// each message once, and reports the differences as slices instead of
// channels. Every input is bounds-checked: a malformed message is an error
// wrapping ErrInvalidMessage, never a panic.
//
// An Engine is not safe for concurrent use; its Storage may be shared.
type Engine struct {
	st         *Storage
	frameLimit int // math.MaxInt when unlimited
	client     bool
	maxIDs     int

	lastIn, lastOut int64
	need            [][idSize]byte
	have            [][idSize]byte // copied while the item is in cache
	haveSeen        []uint64       // bitset over st: item already in have
	theirs          map[[idSize]byte]bool
}

// NewClient returns the initiating side over st. frameLimit is the largest
// message it sends in bytes (0: unlimited, otherwise at least 4096); maxIDs
// caps the need plus have ids it collects (0: no cap).
func NewClient(st *Storage, frameLimit, maxIDs int) (*Engine, error) {
	return newEngine(st, frameLimit, maxIDs, true)
}

// NewServer returns the answering side over st, as a relay runs it.
func NewServer(st *Storage, frameLimit int) (*Engine, error) {
	return newEngine(st, frameLimit, 0, false)
}

func newEngine(st *Storage, frameLimit, maxIDs int, client bool) (*Engine, error) {
	if frameLimit != 0 && frameLimit < 4096 {
		return nil, fmt.Errorf("%w: frame limit %d: must be 0 (unlimited) or at least 4096", ErrInvalidOptions, frameLimit)
	}
	if frameLimit == 0 {
		frameLimit = math.MaxInt
	}
	if maxIDs <= 0 {
		maxIDs = math.MaxInt
	}
	if st == nil {
		st = NewStorage(nil)
	}
	return &Engine{st: st, frameLimit: frameLimit, client: client, maxIDs: maxIDs}, nil
}

// Initiate returns the client's first message: the whole set as 16
// fingerprinted ranges, or as an id list when it has fewer than 32 items.
func (e *Engine) Initiate() string {
	e.lastOut = 0
	w := hexWriter{b: makeNoZero(2 * (1 + min(e.st.Size(), 2*buckets)*idSize + buckets*(fingerprintSize+12)))}
	w.byte(ProtocolVersion)
	e.splitRange(&w, 0, e.st.Size(), infiniteBound)
	return w.String()
}

// Reconcile processes one hex message from the other side and returns the
// hex answer. For the client, "" means the reconciliation is complete and
// Result holds the differences. A server answers a message of another
// protocol version with its own version byte only, as NIP-77 asks.
//
// Messages are read and written as hex directly: ids and fingerprints are
// decoded where they are compared and encoded where they are written, so a
// large message is not converted as a whole in either direction.
func (e *Engine) Reconcile(msg string) (string, error) {
	if len(msg)%2 != 0 {
		return "", fmt.Errorf("%w: odd hex length %d", ErrInvalidMessage, len(msg))
	}
	r := hexReader{s: msg}
	v, err := r.byte()
	if err != nil {
		return "", err
	}
	e.lastIn, e.lastOut = 0, 0
	// An answer to fingerprints can be twenty times larger (each range of
	// about 15 items becomes their ids): reserve that much up to 64 MiB
	// more, so a large answer is not copied while it grows — but never
	// more than every item of ours could take (its id, or its share of a
	// split's fingerprints). A sidecar's first sync has few items of its
	// own in each session and answers mostly with less than it received
	// (an eighth of the bytes): twenty times every message was a large
	// share of all the memory a large first sync allocated (reserved memory
	// counts for the collector's pacing even where it is never written).
	hint, most := min(20*len(msg), len(msg)+64<<20), math.MaxInt
	hint = min(hint, len(msg)+2*e.st.Size()*(idSize+fingerprintSize+12))
	if e.frameLimit < math.MaxInt/4 {
		most = 2*e.frameLimit + 8192
		hint = min(hint, 2*e.frameLimit)
	}
	w := hexWriter{b: makeNoZero(hint + 8192), most: most}
	w.byte(ProtocolVersion)
	if v != ProtocolVersion {
		if e.client {
			return "", fmt.Errorf("%w: unsupported protocol version 0x%02x", ErrInvalidMessage, v)
		}
		return w.String(), nil
	}

	size := e.st.Size()
	var prevBound bound
	prevIndex := 0
	skipping := false
	for r.left() > 0 {
		// This range's answer is appended to full from mark on, and cut
		// off again if it does not fit the frame limit.
		mark := w.len()
		// Enough room for any answer but a server's id list, so appends
		// never reallocate with Go's 1.25× growth for large slices.
		w.reserve(2048)
		finishSkip := func() {
			if skipping {
				skipping = false
				e.writeBound(&w, &prevBound)
				w.byte(modeSkip)
			}
		}
		cur, err := e.readBound(&r)
		if err != nil {
			return "", err
		}
		mode, err := r.varint()
		if err != nil {
			return "", err
		}
		lower := prevIndex
		upper := e.st.lowerBound(prevIndex, size, &cur)

		switch mode {
		case modeSkip:
			skipping = true

		case modeFingerprint:
			var theirs [fingerprintSize]byte
			if err := r.read(theirs[:]); err != nil {
				return "", err
			}
			if theirs == e.st.FingerprintBytes(lower, upper) {
				skipping = true
			} else {
				finishSkip()
				e.splitRange(&w, lower, upper, cur)
			}

		case modeIDList:
			n, err := r.varint()
			if err != nil {
				return "", err
			}
			if n > uint64(r.left()/idSize) {
				return "", fmt.Errorf("%w: id list of %d ids in %d bytes", ErrInvalidMessage, n, r.left())
			}
			if e.client {
				if err := e.diff(&r, int(n), lower, upper); err != nil {
					return "", err
				}
				skipping = true
				break
			}
			// The server does not look at the ids, but checks they are hex.
			if err := r.skip(int(n) * idSize); err != nil {
				return "", err
			}
			// The server answers with its own ids for the range, as many as
			// the frame limit allows (counted without this range's skip
			// bound, as the reference implementation does).
			finishSkip()
			end := cur
			k := upper - lower
			if room := e.frameLimit - frameMargin - mark/2; room < 0 {
				k = 0
			} else if room/idSize+1 < k {
				k = room/idSize + 1
			}
			if k < upper-lower {
				end = itemBound(&e.st.items[lower+k])
				upper = lower + k
			}
			w.reserve(2 * (k*idSize + 64))
			e.writeBound(&w, &end)
			w.byte(modeIDList)
			w.varint(uint64(k))
			for i := lower; i < upper; i++ {
				w.id(&e.st.items[i].ID)
			}
			// This answer stays even when it overruns the frame limit: the
			// limit check below then only adds the closing fingerprint.
			mark = w.len()

		default:
			return "", fmt.Errorf("%w: unknown mode %d", ErrInvalidMessage, mode)
		}

		if e.frameLimit-frameMargin < w.size() {
			// Over the frame limit: drop this range's answer and send one
			// fingerprint for everything from here on; the other side
			// splits it again in the next round.
			w.truncate(mark)
			fp := e.st.FingerprintBytes(upper, size)
			e.writeBound(&w, &infiniteBound)
			w.byte(modeFingerprint)
			w.bytes(fp[:])
			break
		}
		prevIndex = upper
		prevBound = cur
	}
	if e.client && w.size() == 1 {
		return "", nil
	}
	return w.String(), nil
}

// Result returns the ids the other side has and we do not (need) and the
// ids we have and the other side lacks (have), as hex strings without
// duplicates.
func (e *Engine) Result() (need, have []string) {
	return hexIDs(dedupIDs(e.need)), hexIDs(e.have)
}

// addHave records our i-th item as one the other side lacks, once.
func (e *Engine) addHave(i int) {
	if e.haveSeen == nil {
		e.haveSeen = make([]uint64, (e.st.Size()+63)/64)
	}
	if e.haveSeen[i/64]&(1<<(i%64)) != 0 {
		return
	}
	e.haveSeen[i/64] |= 1 << (i % 64)
	e.have = append(e.have, e.st.items[i].ID)
}

// dedupIDs drops repeated ids, keeping the first of each, with an
// open-addressing set. The ids come from the relay, which chooses them
// freely, so they are hashed with a per-call random seed: ids crafted to
// collide cannot make the probing quadratic. An honest peer never reports
// an id twice; this guards against one that does.
func dedupIDs(ids [][idSize]byte) [][idSize]byte {
	if len(ids) < 2 {
		return ids
	}
	size := 1
	for size < 2*len(ids) {
		size *= 2
	}
	seed := maphash.MakeSeed()
	slots := make([]int32, size) // index into out + 1; 0 is empty
	out := ids[:0]               // in place: out never overtakes the reading index
	for _, id := range ids {
		h := maphash.Comparable(seed, id) & uint64(size-1)
		dup := false
		for ; slots[h] != 0; h = (h + 1) & uint64(size-1) {
			if out[slots[h]-1] == id {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, id)
			slots[h] = int32(len(out))
		}
	}
	return out
}

// hexIDs encodes ids, sharing one backing string.
func hexIDs(ids [][idSize]byte) []string {
	if len(ids) == 0 {
		return nil
	}
	return splitIDs(encodeHex(unsafe.Slice(&ids[0][0], len(ids)*idSize)), len(ids))
}

// splitIDs cuts n consecutive 64-character ids out of s.
func splitIDs(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s[i*2*idSize : (i+1)*2*idSize]
	}
	return out
}

// diff compares the other side's id list with our items in [lower, upper).
func (e *Engine) diff(r *hexReader, n, lower, upper int) error {
	ours := e.st.items[lower:upper]
	var id [idSize]byte
	if len(ours) <= 64 && n <= 256 {
		// Small lists (the usual case: fewer than 32 ids on each side): a
		// 128-slot open-addressing table of our first 8 bytes.
		var keys [64]uint64
		var slots [128]uint8 // 0: empty, else index into ours + 1
		var matched uint64   // bit j: ours[j] is in their list
		for j := range ours {
			k := binary.LittleEndian.Uint64(ours[j].ID[:8])
			keys[j] = k
			h := k & 127
			for slots[h] != 0 {
				h = (h + 1) & 127
			}
			slots[h] = uint8(j + 1)
		}
		for range n {
			if err := r.read(id[:]); err != nil {
				return err
			}
			k := binary.LittleEndian.Uint64(id[:8])
			found := false
			for h := k & 127; slots[h] != 0; h = (h + 1) & 127 {
				j := slots[h] - 1
				if keys[j] == k && bytes.Equal(ours[j].ID[8:], id[8:]) {
					matched |= 1 << j
					found = true
					break
				}
			}
			if !found {
				e.need = append(e.need, id)
			}
		}
		for j := range ours {
			if matched&(1<<j) == 0 {
				e.addHave(lower + j)
			}
		}
	} else {
		if e.theirs == nil {
			e.theirs = make(map[[idSize]byte]bool, n)
		}
		clear(e.theirs)
		for range n {
			if err := r.read(id[:]); err != nil {
				return err
			}
			e.theirs[id] = false
		}
		for j := range ours {
			if _, ok := e.theirs[ours[j].ID]; ok {
				e.theirs[ours[j].ID] = true
			} else {
				e.addHave(lower + j)
			}
		}
		for id, matched := range e.theirs {
			if !matched {
				e.need = append(e.need, id)
			}
		}
		if len(e.theirs) > 1<<16 {
			e.theirs = nil // do not keep a huge map for the next round
		}
	}
	if len(e.need)+len(e.have) > e.maxIDs {
		return fmt.Errorf("%w: more than %d ids", ErrLimit, e.maxIDs)
	}
	return nil
}

// splitRange describes our items in [lower, upper) up to upperBound: as an
// id list when there are fewer than 32, otherwise as 16 fingerprinted
// buckets.
func (e *Engine) splitRange(w *hexWriter, lower, upper int, upperBound bound) {
	n := upper - lower
	if n < 2*buckets {
		w.reserve(2 * (n*idSize + 64))
		e.writeBound(w, &upperBound)
		w.byte(modeIDList)
		w.varint(uint64(n))
		for i := lower; i < upper; i++ {
			w.id(&e.st.items[i].ID)
		}
		return
	}
	per, extra := n/buckets, n%buckets
	cur := lower
	for i := 0; i < buckets; i++ {
		size := per
		if i < extra {
			size++
		}
		fp := e.st.FingerprintBytes(cur, cur+size)
		cur += size
		next := upperBound
		if cur != upper {
			next = minimalBound(&e.st.items[cur-1], &e.st.items[cur])
		}
		e.writeBound(w, &next)
		w.byte(modeFingerprint)
		w.bytes(fp[:])
	}
}

// writeBound appends b, its timestamp as a delta from the previous bound
// written in this message plus one (0 is infinity).
func (e *Engine) writeBound(w *hexWriter, b *bound) {
	if b.ts == infiniteTS {
		e.lastOut = infiniteTS
		w.byte(0)
	} else {
		// Bounds are written in ascending order; a smaller timestamp can only
		// follow from a malformed message, and is written as no step (the
		// reader then stays where it was, and so does lastOut).
		delta := max(b.ts-e.lastOut, 0)
		e.lastOut += delta
		w.varint(uint64(delta) + 1)
	}
	w.varint(uint64(b.n))
	w.bytes(b.id[:b.n])
}

func (e *Engine) readBound(r *hexReader) (bound, error) {
	var b bound
	d, err := r.varint()
	if err != nil {
		return b, err
	}
	if d == 0 {
		b.ts = infiniteTS
	} else {
		ts := uint64(e.lastIn) + (d - 1) // both below 2^63: no uint64 overflow
		b.ts = int64(min(ts, infiniteTS))
	}
	e.lastIn = b.ts
	n, err := r.varint()
	if err != nil {
		return b, err
	}
	if n > idSize {
		return b, fmt.Errorf("%w: bound id prefix of %d bytes", ErrInvalidMessage, n)
	}
	b.n = int(n)
	return b, r.read(b.id[:b.n])
}
