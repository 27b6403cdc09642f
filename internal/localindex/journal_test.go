package localindex

import (
	"errors"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// journalFilters are the filters the round-trip tests compare on.
func journalFilters(events []*nostr.Event) []nostr.Filter {
	fs := []nostr.Filter{{}, {Kinds: []int{30617, 30618}}, {Kinds: []int{1111}, Since: ts(1_703_000_000)}}
	for _, ev := range events[:40] {
		for _, tag := range ev.Tags {
			if len(tag) >= 2 && len(tag[0]) == 1 && tag[0] != "p" && tag[0] != "K" && tag[0] != "P" {
				fs = append(fs, nostr.Filter{Tags: nostr.TagMap{tag[0]: {tag[1]}}})
			}
		}
		fs = append(fs, nostr.Filter{Authors: []string{ev.PubKey}})
	}
	return fs
}

func sameAnswers(t *testing.T, want, got *Index, fs []nostr.Filter) {
	t.Helper()
	if want.Len() != got.Len() {
		t.Fatalf("restored index holds %d events, want %d", got.Len(), want.Len())
	}
	for _, f := range fs {
		a, err := want.AppendMatching(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := got.AppendMatching(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(itemIDs(a), itemIDs(b)) {
			t.Fatalf("filter %v: restored index answers %d ids, original %d", f, len(b), len(a))
		}
	}
}

// TestJournalRoundTrip: chunks drained between adds and removes, replayed in
// order into an empty index, answer every filter as the original does; so
// does a snapshot.
func TestJournalRoundTrip(t *testing.T) {
	events := genEvents(3, 20_000, 40, 25)
	x := mustNew(t, DefaultOptions())
	x.EnableJournal()
	var chunks [][]byte
	bytes := 0
	for i, ev := range events {
		if err := x.Add(ev); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			x.Remove(events[i-2].ID) // removed after a drain or within the same one
		}
		if i%13 == 5 {
			x.Remove(ev.ID)
			if err := x.Add(ev); err != nil { // removed and added again
				t.Fatal(err)
			}
		}
		if i%1000 == 999 {
			c, _ := x.DrainJournal()
			chunks = append(chunks, c)
			bytes += len(c)
		}
	}
	if c, _ := x.DrainJournal(); c != nil {
		chunks = append(chunks, c)
		bytes += len(c)
	}
	if c, _ := x.DrainJournal(); c != nil {
		t.Fatalf("a second drain returned %d bytes, want nothing", len(c))
	}
	y := mustNew(t, DefaultOptions())
	for _, c := range chunks {
		if err := y.LoadChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	fs := journalFilters(events)
	sameAnswers(t, x, y, fs)
	t.Logf("journal: %d chunks, %.1f bytes/event added", len(chunks), float64(bytes)/float64(len(events)))

	snap := x.Snapshot(5000)
	z := mustNew(t, DefaultOptions())
	sb := 0
	for _, c := range snap {
		sb += len(c)
		if err := z.LoadChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	sameAnswers(t, x, z, fs)
	t.Logf("snapshot: %d chunks, %.1f bytes/event", len(snap), float64(sb)/float64(x.Len()))
	if per := float64(sb) / float64(x.Len()); per > 89 {
		t.Errorf("snapshot costs %.1f bytes/event, more than the 89 the in-memory index costs", per)
	}
}

// TestLoadChunkRefusesDamage: every truncation of a chunk and a flipped
// version byte give ErrBadChunk, never a panic.
func TestLoadChunkRefusesDamage(t *testing.T) {
	events := genEvents(4, 300, 5, 5)
	x := mustNew(t, DefaultOptions())
	x.EnableJournal()
	for _, ev := range events {
		x.Add(ev)
	}
	x.Remove(events[0].ID)
	c, removed := x.DrainJournal()
	if removed != 1 {
		t.Fatalf("drain reports %d removals, want 1", removed)
	}
	for n := 0; n < len(c); n += 7 {
		y := mustNew(t, DefaultOptions())
		if err := y.LoadChunk(c[:n]); !errors.Is(err, ErrBadChunk) {
			t.Fatalf("chunk cut at %d of %d: err %v, want ErrBadChunk", n, len(c), err)
		}
	}
	bad := slices.Clone(c)
	bad[0] = 99
	if err := mustNew(t, DefaultOptions()).LoadChunk(bad); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("bad version: err %v", err)
	}
}

// Clear empties the index, and the drained journal empties a persisted copy.
func TestClearIsJournalled(t *testing.T) {
	events := genEvents(5, 2000, 10, 10)
	x := mustNew(t, DefaultOptions())
	x.EnableJournal()
	for _, ev := range events {
		x.Add(ev)
	}
	first, _ := x.DrainJournal()
	x.Clear()
	if x.Len() != 0 || x.Has(events[0].ID) {
		t.Fatalf("after Clear: %d events", x.Len())
	}
	if err := x.Add(events[1]); err != nil {
		t.Fatal(err)
	}
	second, _ := x.DrainJournal()
	y := mustNew(t, DefaultOptions())
	for _, c := range [][]byte{first, second} {
		if err := y.LoadChunk(c); err != nil {
			t.Fatal(err)
		}
	}
	if y.Len() != 1 || !y.Has(events[1].ID) {
		t.Fatalf("replayed after Clear: %d events", y.Len())
	}
	sameAnswers(t, x, y, journalFilters(events))
}
