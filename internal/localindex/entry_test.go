package localindex

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/neg"
)

// An entry keeps created_at in 4 bytes and the kind in 2: values beyond
// (before 1970, from 2106 on, kinds of 65535 and more) go to side tables
// and every answer stays exact, through removal, slot reuse and the
// journal.
func TestCreatedAtAndKindBeyondEntryFields(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 48 {
		t.Fatalf("entry is %d bytes, want 48", n)
	}
	r := rand.New(rand.NewPCG(5, 6))
	times := []int64{0, 1, 1_700_000_000, math.MaxUint32 - 1, math.MaxUint32, math.MaxUint32 + 1, 1 << 40, -1, math.MinInt32}
	kinds := []int{0, 1, 1111, 30617, 65534, 65535, 65536, 1 << 20, math.MaxUint32}
	var events []*nostr.Event
	for i := range 400 {
		events = append(events, &nostr.Event{
			ID: randHex(r), PubKey: randHex(r),
			CreatedAt: nostr.Timestamp(times[i%len(times)]), Kind: kinds[(i/3)%len(kinds)],
			Tags: nostr.Tags{{"e", randHex(r)}},
		})
	}
	x := mustNew(t, DefaultOptions())
	x.EnableJournal()
	for _, ev := range events {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	filters := []nostr.Filter{
		{},
		{Since: ts(math.MaxUint32)},
		{Until: ts(math.MaxUint32 - 1)},
		{Since: ts(-1), Until: ts(0)},
		{Until: ts(-2)},
		{Kinds: []int{65535}},
		{Kinds: []int{65534, 65536, math.MaxUint32}},
		{Kinds: []int{1 << 20}, Since: ts(1 << 40)},
		{Tags: nostr.TagMap{"e": {events[7].Tags[0][1], events[300].Tags[0][1]}}},
	}
	check := func(name string, y *Index, evs []*nostr.Event) {
		t.Helper()
		for _, f := range filters {
			items, err := y.AppendMatching(nil, f)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := itemIDs(items), bruteForce(evs, f); !slices.Equal(got, want) {
				t.Fatalf("%s: filter %v: %d ids, want %d", name, f, len(got), len(want))
			}
			byID := map[[32]byte]nostr.Timestamp{}
			for _, ev := range evs {
				k, _ := event.DecodeID(ev.ID)
				byID[k] = ev.CreatedAt
			}
			for _, it := range items {
				if it.CreatedAt != byID[it.ID] {
					t.Fatalf("%s: item created_at %d, want %d", name, it.CreatedAt, byID[it.ID])
				}
			}
		}
	}
	check("added", x, events)

	// Removing every other event frees its side-table values; slots
	// reused by events of ordinary values keep none.
	var kept []*nostr.Event
	for i, ev := range events {
		if i%2 == 0 {
			x.Remove(ev.ID)
		} else {
			kept = append(kept, ev)
		}
	}
	check("after removal", x, kept)
	bigC, bigK := len(x.bigCreated), len(x.bigKinds)
	for range 200 {
		ev := &nostr.Event{ID: randHex(r), PubKey: randHex(r), CreatedAt: 1_700_000_000, Kind: 1}
		kept = append(kept, ev)
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(x.bigCreated) != bigC || len(x.bigKinds) != bigK {
		t.Fatalf("side tables grew to %d/%d from %d/%d with ordinary values", len(x.bigCreated), len(x.bigKinds), bigC, bigK)
	}
	check("slots reused", x, kept)

	chunk, _ := x.DrainJournal()
	y := mustNew(t, DefaultOptions())
	if err := y.LoadChunk(chunk); err != nil {
		t.Fatal(err)
	}
	check("journal replayed", y, kept)
	var want []neg.Item
	want, _ = x.AppendMatching(want, nostr.Filter{})
	got, _ := y.AppendMatching(nil, nostr.Filter{})
	less := func(a, b neg.Item) int { return slices.Compare(a.ID[:], b.ID[:]) }
	slices.SortFunc(want, less)
	slices.SortFunc(got, less)
	if !slices.Equal(want, got) {
		t.Fatal("replayed index answers differently")
	}
}

// The filled mark is kept in the entry, not persisted, and cleared by
// ClearFilled and by removal.
func TestFilledMark(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	ev := &nostr.Event{ID: randHex(r), PubKey: randHex(r), Kind: 1617, CreatedAt: 5, Tags: nostr.Tags{{"a", "30617:x:y"}}}
	x := mustNew(t, DefaultOptions())
	x.EnableJournal()
	if x.MarkFilled(ev.ID) || x.Filled(ev.ID) || x.MarkFilled("zz") {
		t.Fatal("an event not indexed marked filled")
	}
	if err := x.Add(ev); err != nil {
		t.Fatal(err)
	}
	if !x.MarkFilled(ev.ID) || !x.Filled(ev.ID) {
		t.Fatal("indexed event not marked")
	}
	items, _ := x.AppendMatching(nil, nostr.Filter{Tags: nostr.TagMap{"a": {"30617:x:y"}}, Kinds: []int{1617}})
	if len(items) != 1 || items[0].CreatedAt != 5 {
		t.Fatalf("marked event answers %v", items)
	}
	chunk, _ := x.DrainJournal()
	y := mustNew(t, DefaultOptions())
	if err := y.LoadChunk(chunk); err != nil || !y.Has(ev.ID) || y.Filled(ev.ID) {
		t.Fatalf("replayed: err %v, has %v, filled %v (the mark is not persisted)", err, y.Has(ev.ID), y.Filled(ev.ID))
	}
	x.ClearFilled()
	if x.Filled(ev.ID) || !x.Has(ev.ID) {
		t.Fatal("ClearFilled")
	}
	x.MarkFilled(ev.ID)
	x.Remove(ev.ID)
	if err := x.Add(ev); err != nil || x.Filled(ev.ID) {
		t.Fatal("mark survived removal")
	}
}

// Dedupe marks: set by Add and MarkSeenID, aged by RotateSeen through two
// generations, cleared by ForgetSeenID and RotateSeen(true); only indexed
// ids can carry one.
func TestSeenMarks(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	ev := &nostr.Event{ID: randHex(r), PubKey: randHex(r), Kind: 1, CreatedAt: 1}
	id, _ := event.DecodeID(ev.ID)
	x := mustNew(t, DefaultOptions())
	if x.SeenID(id) || x.MarkSeenID(id) {
		t.Fatal("an id not indexed is marked")
	}
	if err := x.Add(ev); err != nil || !x.SeenID(id) {
		t.Fatal("Add did not mark")
	}
	x.RotateSeen(false)
	if !x.SeenID(id) {
		t.Fatal("forgotten after one rotation")
	}
	x.RotateSeen(false)
	if x.SeenID(id) || !x.Has(ev.ID) {
		t.Fatal("still marked after two rotations, or removed")
	}
	if !x.MarkSeenID(id) || !x.SeenID(id) {
		t.Fatal("MarkSeenID")
	}
	x.ForgetSeenID(id)
	if x.SeenID(id) {
		t.Fatal("ForgetSeenID")
	}
	_ = x.Add(ev) // already indexed: marks again
	x.RotateSeen(true)
	if x.SeenID(id) {
		t.Fatal("RotateSeen(true)")
	}
}

// AddNew indexes with the filled mark, also an event indexed before
// (the self-subscription showed it before its OK came); Add does not, and
// ClearFilled clears it.
func TestAddNewMarksFilled(t *testing.T) {
	x := mustNew(t, DefaultOptions())
	evs := genEvents(3, 3, 2, 2)
	if err := x.Add(evs[0]); err != nil {
		t.Fatal(err)
	}
	if err := x.AddNew(evs[1]); err != nil {
		t.Fatal(err)
	}
	if err := x.Add(evs[2]); err != nil {
		t.Fatal(err)
	}
	if err := x.AddNew(evs[2]); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, true, true} {
		k, _ := event.DecodeID(evs[i].ID)
		if !x.Has(evs[i].ID) || x.Filled(evs[i].ID) != want || !x.SeenID(k) {
			t.Errorf("event %d: indexed %v, filled %v (want %v), seen %v", i, x.Has(evs[i].ID), x.Filled(evs[i].ID), want, x.SeenID(k))
		}
	}
	if x.Len() != 3 {
		t.Errorf("Len %d, want 3", x.Len())
	}
	x.ClearFilled()
	if x.Filled(evs[1].ID) || x.Filled(evs[2].ID) {
		t.Error("filled marks kept after ClearFilled")
	}
}
