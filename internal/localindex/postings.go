package localindex

// postingMap lists, per tag ref, the slots of the entries carrying it.
// Most refs are named by one event (a root id by its one reply): their
// slot is the map's value itself; a ref with more slots has its list in
// lists, the value pointing there with listBit set. A one-slot ref costs
// a map entry of 8 bytes instead of a slice header and an array.
type postingMap struct {
	m         map[uint32]uint32
	lists     [][]uint32
	freeLists []uint32
}

// listBit marks a value that indexes lists (slots stay below 2^31:
// Options.MaxEvents is at most 2^27-1).
const listBit = 1 << 31

func newPostingMap() postingMap { return postingMap{m: map[uint32]uint32{}} }

// add records slot under ref.
func (p *postingMap) add(ref, slot uint32) {
	v, ok := p.m[ref]
	switch {
	case !ok:
		p.m[ref] = slot
	case v&listBit == 0:
		var li uint32
		if n := len(p.freeLists); n > 0 {
			li = p.freeLists[n-1]
			p.freeLists = p.freeLists[:n-1]
			p.lists[li] = append(p.lists[li][:0], v, slot)
		} else {
			li = uint32(len(p.lists))
			p.lists = append(p.lists, []uint32{v, slot})
		}
		p.m[ref] = li | listBit
	default:
		li := v &^ listBit
		p.lists[li] = append(p.lists[li], slot)
	}
}

// remove forgets slot under ref.
func (p *postingMap) remove(ref, slot uint32) {
	v, ok := p.m[ref]
	switch {
	case !ok:
	case v&listBit == 0:
		if v == slot {
			delete(p.m, ref)
		}
	default:
		li := v &^ listBit
		list := p.lists[li]
		for i, s := range list {
			if s == slot {
				list[i] = list[len(list)-1]
				list = list[:len(list)-1]
				break
			}
		}
		switch len(list) {
		case 1:
			p.m[ref] = list[0]
			p.lists[li] = nil
			p.freeLists = append(p.freeLists, li)
		default:
			p.lists[li] = list
		}
	}
}

// slots returns ref's slots; one is the storage of a one-slot answer.
// The result is valid until the next change.
func (p *postingMap) slots(ref uint32, one *[1]uint32) []uint32 {
	v, ok := p.m[ref]
	switch {
	case !ok:
		return nil
	case v&listBit == 0:
		one[0] = v
		return one[:]
	}
	return p.lists[v&^listBit]
}

// count is len(slots(ref)).
func (p *postingMap) count(ref uint32) int {
	v, ok := p.m[ref]
	switch {
	case !ok:
		return 0
	case v&listBit == 0:
		return 1
	}
	return len(p.lists[v&^listBit])
}
