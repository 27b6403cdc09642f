// Package neg runs NIP-77 negentropy reconciliation sessions for the sidecar:
// a protocol engine over 32-byte ids (Engine, byte-for-byte compatible with
// go-nostr's and the reference implementations'), a prefix-sum item storage
// that also serves go-nostr's engine, a session runner over a small
// connection interface, and time-window splitting when a relay refuses a
// filter as too large ("blocked:").
package neg

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"iter"
	"math/bits"
	"slices"
	"sort"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"

	"github.com/grasp-sync/grasp-sync/internal/event"
)

// Item is one element of a negentropy set: an event's created_at and its
// 32-byte id.
type Item struct {
	CreatedAt nostr.Timestamp
	ID        event.ID
}

// Compare orders items by created_at, then id bytes, as NIP-77 requires.
func (it Item) Compare(o Item) int {
	if c := cmp.Compare(it.CreatedAt, o.CreatedAt); c != 0 {
		return c
	}
	return bytes.Compare(it.ID[:], o.ID[:])
}

// ItemFromHex builds an Item from a created_at and a 64-character hex id.
func ItemFromHex(createdAt nostr.Timestamp, id string) (Item, error) {
	it := Item{CreatedAt: createdAt}
	if len(id) != 64 {
		return it, fmt.Errorf("%w: id %q is not 64 hex characters", ErrInvalidItem, id)
	}
	if _, err := hex.Decode(it.ID[:], []byte(id)); err != nil {
		return it, fmt.Errorf("%w: id %q: %w", ErrInvalidItem, id, err)
	}
	return it, nil
}

// sum256 is a 256-bit unsigned integer as four little-endian 64-bit limbs,
// matching the NIP-77 fingerprint accumulator (ids added as little-endian
// 256-bit numbers, modulo 2^256).
type sum256 [4]uint64

func (s sum256) add(id *event.ID) sum256 {
	var r sum256
	var c uint64
	for i := range 4 {
		r[i], c = bits.Add64(s[i], binary.LittleEndian.Uint64(id[i*8:]), c)
	}
	return r
}

func (s sum256) sub(o sum256) sum256 {
	var r sum256
	var b uint64
	for i := range 4 {
		r[i], b = bits.Sub64(s[i], o[i], b)
	}
	return r
}

// Storage is a sealed, sorted negentropy set that implements
// negentropy.Storage. Ids are kept decoded and every range fingerprint is
// computed in O(1) from prefix sums, with a correct 256-bit carry. It is
// immutable after construction and safe for concurrent use by several
// sessions.
type Storage struct {
	items []Item
	sums  []sum256 // sums[i] = sum of items[0:i].ID mod 2^256
}

var _ negentropy.Storage = (*Storage)(nil)

// NewStorage sorts items, drops exact duplicates and items with a negative
// created_at (NIP-77 timestamps are unsigned), and builds the prefix sums.
// It may reorder the slice and keep it.
func NewStorage(items []Item) *Storage {
	items = slices.DeleteFunc(items, func(it Item) bool { return it.CreatedAt < 0 })
	items = sortItems(items)
	items = slices.Compact(items)
	sums := make([]sum256, len(items)+1)
	for i := range items {
		sums[i+1] = sums[i].add(&items[i].ID)
	}
	return &Storage{items: items, sums: sums}
}

// sortItems sorts items in NIP-77 order; sorted input is detected.
func sortItems(items []Item) []Item {
	if slices.IsSortedFunc(items, Item.Compare) {
		return items
	}
	slices.SortFunc(items, func(a, b Item) int {
		if c := cmp.Compare(a.CreatedAt, b.CreatedAt); c != 0 {
			return c
		}
		// The first 8 bytes as a big-endian integer: cheap, same order as
		// bytes.Compare.
		if c := cmp.Compare(binary.BigEndian.Uint64(a.ID[:8]), binary.BigEndian.Uint64(b.ID[:8])); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[8:], b.ID[8:])
	})
	return items
}

// Size is the number of distinct items.
func (s *Storage) Size() int { return len(s.items) }

// Item returns the i-th item in NIP-77 order.
func (s *Storage) Item(i int) Item { return s.items[i] }

// Range yields the items in [begin, end) with hex ids, as the engine wants.
// Ids are encoded in chunks that share one allocation, so a retained id
// keeps at most one chunk (4 KiB) alive.
func (s *Storage) Range(begin, end int) iter.Seq2[int, negentropy.Item] {
	return func(yield func(int, negentropy.Item) bool) {
		const chunk = 64
		var buf [chunk * 64]byte
		for c := begin; c < end; c += chunk {
			n := min(chunk, end-c)
			for i := range n {
				hex.Encode(buf[i*64:], s.items[c+i].ID[:])
			}
			str := string(buf[:n*64])
			for i := range n {
				if !yield(c+i, negentropy.Item{Timestamp: s.items[c+i].CreatedAt, ID: str[i*64 : (i+1)*64]}) {
					return
				}
			}
		}
	}
}

// GetBound returns the bound of the idx-th item, or the infinite bound past
// the end.
func (s *Storage) GetBound(idx int) negentropy.Bound {
	if idx < len(s.items) {
		it := &s.items[idx]
		return negentropy.Bound{Item: negentropy.Item{Timestamp: it.CreatedAt, ID: hex.EncodeToString(it.ID[:])}}
	}
	return negentropy.InfiniteBound
}

// FindLowerBound returns the index of the first item in [begin, end) that is
// not less than bound, or end.
func (s *Storage) FindLowerBound(begin, end int, bound negentropy.Bound) int {
	var prefix [32]byte
	n := min(len(bound.ID)/2, 32)
	// A malformed bound id decodes partially; messages reaching the engine
	// were validated, so this only guards direct callers.
	if m, err := hex.Decode(prefix[:n], []byte(bound.ID[:n*2])); err != nil {
		n = m
	}
	p := prefix[:n]
	ts := bound.Timestamp
	return begin + sort.Search(end-begin, func(i int) bool {
		it := &s.items[begin+i]
		if it.CreatedAt != ts {
			return it.CreatedAt > ts
		}
		return bytes.Compare(it.ID[:], p) >= 0
	})
}

// lowerBound is FindLowerBound for a decoded bound. Messages walk the set
// in ascending order and each bound usually lies close to the previous
// one, so it gallops from begin before it bisects.
func (s *Storage) lowerBound(begin, end int, b *bound) int {
	less := func(i int) bool { // items[i] < b
		it := &s.items[i]
		if int64(it.CreatedAt) != b.ts {
			return int64(it.CreatedAt) < b.ts
		}
		return bytes.Compare(it.ID[:], b.id[:b.n]) < 0
	}
	// Find a window (lo, hi] with items[lo] < b <= items[hi] by doubling.
	lo, hi := begin-1, end
	for step := 1; lo+step < end; step *= 2 {
		if !less(lo + step) {
			hi = lo + step
			break
		}
		lo += step
	}
	lo++ // first candidate
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if less(m) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Fingerprint returns the hex NIP-77 fingerprint of the items in [begin, end).
func (s *Storage) Fingerprint(begin, end int) string {
	fp := s.FingerprintBytes(begin, end)
	return hex.EncodeToString(fp[:])
}

// FingerprintBytes returns the NIP-77 fingerprint of the items in
// [begin, end): the first 16 bytes of sha256(sum of ids mod 2^256 as 32
// little-endian bytes || varint(count)).
func (s *Storage) FingerprintBytes(begin, end int) [negentropy.FingerprintSize]byte {
	d := s.sums[end].sub(s.sums[begin])
	var buf [32 + 10]byte
	for i := range 4 {
		binary.LittleEndian.PutUint64(buf[i*8:], d[i])
	}
	n := 32 + putVarint(buf[32:], uint64(end-begin))
	h := sha256.Sum256(buf[:n])
	var out [negentropy.FingerprintSize]byte
	copy(out[:], h[:])
	return out
}

// putVarint writes n as a NIP-77 varint (big-endian base-128, high bit set on
// all but the last byte) and returns the number of bytes written.
func putVarint(dst []byte, n uint64) int {
	var tmp [10]byte
	i := len(tmp) - 1
	tmp[i] = byte(n & 0x7f)
	n >>= 7
	for n != 0 {
		i--
		tmp[i] = byte(n&0x7f) | 0x80
		n >>= 7
	}
	return copy(dst, tmp[i:])
}
