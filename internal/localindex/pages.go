package localindex

// entryPages stores the entries in fixed pages of pageLen instead of one
// slice: the index grows without the slack of append's capacity (up to a
// quarter) and without copying every entry into a larger array, whose old
// copy stays in the process's memory until the collector frees it.
type entryPages struct {
	pages []*[pageLen]entry
	n     int
}

const (
	pageBits = 12
	pageLen  = 1 << pageBits // 4,096 entries, 192 KiB
)

// at returns the entry in slot (slot < len()).
func (p *entryPages) at(slot uint32) *entry {
	return &p.pages[slot>>pageBits][slot&(pageLen-1)]
}

// len is the number of slots in use or freed.
func (p *entryPages) len() int { return p.n }

// push stores e in a new slot and returns it.
func (p *entryPages) push(e entry) uint32 {
	if p.n == len(p.pages)*pageLen {
		p.pages = append(p.pages, new([pageLen]entry))
	}
	slot := uint32(p.n)
	*p.at(slot) = e
	p.n++
	return slot
}

// tagArena holds the entries' tag refs in pages of tagPageLen refs: like
// entryPages, growing never copies what is stored, and the slack is one
// page. An entry's refs are contiguous within one page (a page holds
// more than MaxTagsPerEvent allows); an offset is page<<tagPageBits |
// index.
type tagArena struct {
	pages [][]uint32 // each of capacity tagPageLen
	used  int        // refs stored, in all pages
}

const (
	tagPageBits = 16
	tagPageLen  = 1 << tagPageBits // 65,536 refs, 256 KiB
)

// of returns the n refs stored at off.
func (a *tagArena) of(off uint32, n uint16) []uint32 {
	if n == 0 {
		return nil
	}
	i := off & (tagPageLen - 1)
	return a.pages[off>>tagPageBits][i : i+uint32(n)]
}

// add stores refs and returns their offset.
func (a *tagArena) add(refs []uint32) uint32 {
	if len(refs) == 0 {
		return 0
	}
	if n := len(a.pages); n == 0 || len(a.pages[n-1])+len(refs) > tagPageLen {
		a.pages = append(a.pages, make([]uint32, 0, tagPageLen))
	}
	last := len(a.pages) - 1
	off := uint32(last)<<tagPageBits | uint32(len(a.pages[last]))
	a.pages[last] = append(a.pages[last], refs...)
	a.used += len(refs)
	return off
}

// pageArray is a growable array in pages of arrayPageLen elements (the
// interners' keys and counts): no copy when it grows, slack of one page.
type pageArray[T any] struct {
	pages []*[arrayPageLen]T
	n     int
}

const (
	arrayPageBits = 10
	arrayPageLen  = 1 << arrayPageBits
)

func (p *pageArray[T]) at(i uint32) *T { return &p.pages[i>>arrayPageBits][i&(arrayPageLen-1)] }

func (p *pageArray[T]) len() int { return p.n }

// push appends v and returns its index.
func (p *pageArray[T]) push(v T) uint32 {
	if p.n == len(p.pages)*arrayPageLen {
		p.pages = append(p.pages, new([arrayPageLen]T))
	}
	i := uint32(p.n)
	*p.at(i) = v
	p.n++
	return i
}
