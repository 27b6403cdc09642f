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
