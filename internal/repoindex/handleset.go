package repoindex

import (
	"iter"
	"math/bits"
	"slices"
)

// Per-root state in handles: every root id, repository address and relay
// URL the engine keeps in a set is interned once as a uint32 handle
// (names), and a set holds handles. A root is a member of many sets at
// once (the repository index, each relay's confirmed items, its pending
// batches, the kind subscription's refs), so what one membership costs is
// what the sync's memory grows with: a handle in a small map, one bit of
// its span once dense, instead of a string header in a map of strings
// (BenchmarkPerRootBytes compares them).

// HandleSet is a set of interned strings (Set). It starts as a sorted slice of
// handles (a repository's roots, its relays), becomes a map of handles
// past maxSmall members, and a bitset over the span of its handles once
// that is smaller (denseBitsPerItem). Not safe for concurrent use (as a
// map).
type HandleSet struct {
	small  []uint32 // sorted; while sparse and dense are nil
	sparse map[uint32]struct{}
	// dense, once non-nil: bit h-64*base of words is handle h.
	dense []uint64
	base  uint32
	n     int
	// denseAt is the size at which a map is next checked (maybeDense):
	// every 1/16 of its size, so a large sparse set is scanned O(1) times
	// per member.
	denseAt int
}

// Set is a Set of strings, held as handles; nil is an empty Set for
// reading.
type Set = *HandleSet

// denseBitsPerItem: a sparse set turns dense once its handles' span is at
// most this many bits per member (a map of handles costs several bytes a member).
const denseBitsPerItem = 64

// maxSmall is the most members a set keeps in its sorted slice (an insert
// moves up to that many handles).
const maxSmall = 256

// NewSet returns an empty set.
func NewSet() Set { return &HandleSet{} }

// Len is the number of members.
func (s *HandleSet) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Has tells whether v is a member.
func (s *HandleSet) Has(v string) bool {
	if s == nil || s.n == 0 {
		return false
	}
	h, ok := names.lookup(v)
	return ok && s.HasH(h)
}

// HasH tells whether handle h is a member.
func (s *HandleSet) HasH(h uint32) bool {
	if s == nil || s.n == 0 {
		return false
	}
	if s.dense != nil {
		w := int(h/64) - int(s.base)
		return w >= 0 && w < len(s.dense) && s.dense[w]&(1<<(h%64)) != 0
	}
	if s.sparse == nil {
		_, ok := slices.BinarySearch(s.small, h)
		return ok
	}
	_, ok := s.sparse[h]
	return ok
}

// Add adds v.
func (s *HandleSet) Add(v string) { s.AddH(names.intern(v)) }

func (s *HandleSet) AddH(h uint32) {
	if s.dense != nil {
		if !s.denseCovers(h) {
			s.toSparse()
		} else {
			s.setBit(h)
			return
		}
	}
	if s.sparse == nil {
		i, ok := slices.BinarySearch(s.small, h)
		if ok {
			return
		}
		if len(s.small) < maxSmall {
			s.small = slices.Insert(s.small, i, h)
			s.n++
			return
		}
		s.sparse = make(map[uint32]struct{}, 2*maxSmall)
		for _, x := range s.small {
			s.sparse[x] = struct{}{}
		}
		s.small = nil
	}
	if _, ok := s.sparse[h]; ok {
		return
	}
	s.sparse[h] = struct{}{}
	s.n++
	if s.n >= s.denseAt {
		s.denseAt = s.n + max(64, s.n/16)
		s.maybeDense()
	}
}

// setBit sets h's bit, growing the words to cover it.
func (s *HandleSet) setBit(h uint32) {
	w := h / 64
	switch {
	case w < s.base:
		grown := make([]uint64, int(s.base-w)+len(s.dense))
		copy(grown[s.base-w:], s.dense)
		s.dense, s.base = grown, w
	case int(w-s.base) >= len(s.dense):
		s.dense = append(s.dense, make([]uint64, int(w-s.base)-len(s.dense)+1)...)
	}
	i := w - s.base
	if s.dense[i]&(1<<(h%64)) == 0 {
		s.dense[i] |= 1 << (h % 64)
		s.n++
	}
}

// denseCovers tells whether the bitset may grow to h and stay within
// denseBitsPerItem bits a member: handles only grow, so a set that turned
// dense early would otherwise pay the span of every handle issued since
// for one late member.
func (s *HandleSet) denseCovers(h uint32) bool {
	w := uint64(h / 64)
	lo, hi := uint64(s.base), uint64(s.base)+uint64(len(s.dense))-1
	if w >= lo && w <= hi {
		return true
	}
	lo, hi = min(lo, w), max(hi, w)
	return (hi-lo+1)*64 <= uint64(s.n+1)*denseBitsPerItem
}

// toSparse turns a dense set back into a map of handles.
func (s *HandleSet) toSparse() {
	s.sparse = make(map[uint32]struct{}, s.n+1)
	for i, word := range s.dense {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			s.sparse[(s.base+uint32(i))*64+uint32(b)] = struct{}{}
			word &= word - 1
		}
	}
	s.dense, s.base = nil, 0
	s.denseAt = s.n + max(64, s.n/16)
}

// maybeDense turns a sparse set dense when the bitset is the smaller.
func (s *HandleSet) maybeDense() {
	lo, hi := ^uint32(0), uint32(0)
	for h := range s.sparse {
		lo, hi = min(lo, h), max(hi, h)
	}
	if uint64(hi-lo) > uint64(s.n)*denseBitsPerItem {
		return
	}
	s.base = lo / 64
	s.dense = make([]uint64, hi/64-s.base+1)
	for h := range s.sparse {
		s.dense[h/64-s.base] |= 1 << (h % 64)
	}
	s.sparse = nil
}

// handles yields the members' handles.
func (s *HandleSet) Handles() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		if s == nil {
			return
		}
		if s.dense == nil && s.sparse == nil {
			for _, h := range s.small {
				if !yield(h) {
					return
				}
			}
			return
		}
		if s.dense == nil {
			for h := range s.sparse {
				if !yield(h) {
					return
				}
			}
			return
		}
		for i, w := range s.dense {
			for w != 0 {
				b := uint32(bits.TrailingZeros64(w))
				w &= w - 1
				if !yield((s.base+uint32(i))*64 + b) {
					return
				}
			}
		}
	}
}

// All yields the members.
func (s *HandleSet) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		for h := range s.Handles() {
			if !yield(names.name(h)) {
				return
			}
		}
	}
}

// AddAll adds o's members.
func (s *HandleSet) AddAll(o Set) {
	if o == nil || o.n == 0 {
		return
	}
	if s.dense != nil && o.dense != nil {
		for i, w := range o.dense {
			if w == 0 {
				continue
			}
			lo := (o.base + uint32(i)) * 64
			s.setBit(lo + uint32(bits.TrailingZeros64(w))) // grows the words
			s.setBit(lo + 63 - uint32(bits.LeadingZeros64(w)))
			j := o.base + uint32(i) - s.base
			s.n += bits.OnesCount64(w &^ s.dense[j])
			s.dense[j] |= w
		}
		return
	}
	if s.dense == nil && s.n == 0 && o.dense != nil {
		s.sparse, s.small = nil, nil
		s.dense, s.base, s.n = slices.Clone(o.dense), o.base, o.n
		return
	}
	for h := range o.Handles() {
		s.AddH(h)
	}
}

// List returns the members in no order.
func (s *HandleSet) List() []string {
	out := make([]string, 0, s.Len())
	for v := range s.All() {
		out = append(out, v)
	}
	return out
}

// Sorted returns the members in order.
func (s *HandleSet) Sorted() []string {
	out := s.List()
	slices.Sort(out)
	return out
}

func SetOf(vs ...string) Set {
	s := NewSet()
	for _, v := range vs {
		s.Add(v)
	}
	return s
}
