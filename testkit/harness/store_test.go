package harness_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// storeModel is the obviously-correct reference for harness.Store.
type storeModel struct {
	byID   map[string]*nostr.Event
	byAddr map[string]*nostr.Event
}

func addrKey(ev *nostr.Event) string {
	if nostr.IsAddressableKind(ev.Kind) || nostr.IsReplaceableKind(ev.Kind) {
		return fmt.Sprintf("%d:%s:%s", ev.Kind, ev.PubKey, ev.Tags.GetD())
	}
	return ""
}

func (m storeModel) put(ev *nostr.Event) {
	if m.byID[ev.ID] != nil {
		return
	}
	if a := addrKey(ev); a != "" {
		if old := m.byAddr[a]; old != nil {
			if old.CreatedAt > ev.CreatedAt || (old.CreatedAt == ev.CreatedAt && old.ID < ev.ID) {
				return
			}
			delete(m.byID, old.ID)
		}
		m.byAddr[a] = ev
	}
	m.byID[ev.ID] = ev
}

func (m storeModel) remove(id string) {
	if ev := m.byID[id]; ev != nil {
		delete(m.byID, id)
		if a := addrKey(ev); a != "" && m.byAddr[a] == ev {
			delete(m.byAddr, a)
		}
	}
}

func (m storeModel) match(f nostr.Filter) []string {
	var out []*nostr.Event
	for _, ev := range m.byID {
		if f.Matches(ev) {
			out = append(out, ev)
		}
	}
	slices.SortFunc(out, func(a, b *nostr.Event) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(b.ID, a.ID)
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	ids := make([]string, len(out))
	for i, ev := range out {
		ids[i] = ev.ID
	}
	return ids
}

func randomEvent(rng *rand.Rand) *nostr.Event {
	kinds := []int{1, 1617, 1111, 30617, 30618, 10002}
	ev := &nostr.Event{
		ID:        fmt.Sprintf("%064x", rng.Uint64()),
		PubKey:    fmt.Sprintf("pk%d", rng.IntN(3)),
		Kind:      kinds[rng.IntN(len(kinds))],
		CreatedAt: nostr.Timestamp(1000 + rng.IntN(40)), // many ties
		Tags:      nostr.Tags{},
	}
	if nostr.IsAddressableKind(ev.Kind) {
		ev.Tags = append(ev.Tags, nostr.Tag{"d", fmt.Sprintf("d%d", rng.IntN(2))})
	}
	for j := rng.IntN(4); j > 0; j-- {
		key := []string{"a", "e", "E", "p", "q", "t"}[rng.IntN(6)]
		ev.Tags = append(ev.Tags, nostr.Tag{key, fmt.Sprintf("v%d", rng.IntN(5))})
	}
	return ev
}

func randomFilter(rng *rand.Rand, known []*nostr.Event) nostr.Filter {
	var f nostr.Filter
	if rng.IntN(3) == 0 {
		f.Kinds = []int{[]int{1, 1617, 30617, 30618, 7}[rng.IntN(5)]}
	}
	if rng.IntN(4) == 0 {
		f.Authors = []string{fmt.Sprintf("pk%d", rng.IntN(3))}
	}
	if rng.IntN(2) == 0 {
		key := []string{"a", "e", "E", "p", "q", "t", "d"}[rng.IntN(7)]
		f.Tags = nostr.TagMap{key: {fmt.Sprintf("v%d", rng.IntN(5)), fmt.Sprintf("d%d", rng.IntN(2))}}
	}
	if rng.IntN(6) == 0 && len(known) > 0 {
		f.IDs = []string{known[rng.IntN(len(known))].ID, "missing"}
	}
	if rng.IntN(3) == 0 {
		s := nostr.Timestamp(1000 + rng.IntN(40))
		f.Since = &s
	}
	if rng.IntN(3) == 0 {
		u := nostr.Timestamp(1000 + rng.IntN(40))
		f.Until = &u
	}
	if rng.IntN(2) == 0 {
		f.Limit = 1 + rng.IntN(20)
	}
	return f
}

// checkStore runs a random sequence of puts (single and bulk), removals and
// queries against the store and the model.
func checkStore(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := harness.NewStore()
	m := storeModel{byID: map[string]*nostr.Event{}, byAddr: map[string]*nostr.Event{}}
	var known []*nostr.Event
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(10); {
		case op < 4:
			ev := randomEvent(rng)
			known = append(known, ev)
			s.Put(ev)
			m.put(ev)
		case op < 5:
			batch := make([]*nostr.Event, 64+rng.IntN(100))
			for i := range batch {
				batch[i] = randomEvent(rng)
				if i > 0 && rng.IntN(10) == 0 {
					batch[i] = batch[rng.IntN(i)] // duplicates within a batch
				}
			}
			known = append(known, batch...)
			s.Put(batch...)
			for _, ev := range batch {
				m.put(ev)
			}
		case op < 6 && len(known) > 0:
			ev := known[rng.IntN(len(known))]
			s.Remove(ev.ID)
			m.remove(ev.ID)
		default:
			f := randomFilter(rng, known)
			var got []string
			for _, ev := range s.Match(f, 0) {
				got = append(got, ev.ID)
			}
			if want := m.match(f); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: filter %s: got %d ids, want %d", seed, step, f, len(got), len(want))
			}
		}
		if s.Len() != len(m.byID) {
			t.Fatalf("seed %d step %d: Len %d, model %d", seed, step, s.Len(), len(m.byID))
		}
	}
}

func TestHarnessStoreMatchesModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		checkStore(t, seed)
	}
}

func FuzzHarnessStore(f *testing.F) {
	for _, seed := range []uint64{0, 7, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkStore(t, seed) })
}
