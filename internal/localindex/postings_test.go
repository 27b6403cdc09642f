package localindex

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPostingMapAgainstModel adds and removes random (ref, slot) pairs
// and compares every ref's slots with a plain map of lists.
func TestPostingMapAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := newPostingMap()
	model := map[uint32][]uint32{}
	for step := range 20000 {
		ref := uint32(rng.IntN(50))
		if rng.IntN(3) == 0 && len(model[ref]) > 0 {
			list := model[ref]
			i := rng.IntN(len(list))
			slot := list[i]
			model[ref] = slices.Delete(slices.Clone(list), i, i+1)
			p.remove(ref, slot)
		} else {
			slot := uint32(step)
			model[ref] = append(model[ref], slot)
			p.add(ref, slot)
		}
		var one [1]uint32
		got := slices.Clone(p.slots(ref, &one))
		want := slices.Clone(model[ref])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || p.count(ref) != len(want) {
			t.Fatalf("step %d ref %d: slots %v (count %d), want %v", step, ref, got, p.count(ref), want)
		}
	}
	for ref, want := range model {
		if len(want) == 0 {
			if _, ok := p.m[ref]; ok {
				t.Errorf("ref %d: empty but still in the map", ref)
			}
		}
	}
}
