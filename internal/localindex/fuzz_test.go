package localindex

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// FuzzMatching compares AppendMatching with nostr.Filter.Matches on a small
// generated set plus one event carrying the fuzzed tag, after an optional
// removal.
func FuzzMatching(f *testing.F) {
	f.Add(uint64(1), uint8(20), uint8(3), "e", "x", "x", int64(0), int64(0), uint8(0))
	f.Add(uint64(2), uint8(40), uint8(0), "a", "30617:ab:repo", "30617:ab:repo", int64(1_700_000_000), int64(1_705_000_000), uint8(5))
	f.Add(uint64(3), uint8(5), uint8(1), "p", "v", "v", int64(-1), int64(-1), uint8(1))
	f.Add(uint64(4), uint8(9), uint8(2), "E", strings.Repeat("ab", 32), strings.Repeat("AB", 32), int64(0), int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, seed uint64, n, mask uint8, tagName, tagVal, filterVal string, since, until int64, removeEvery uint8) {
		events := genEvents(seed, int(n%60)+1, 3, 2)
		extra := *events[0]
		extra.ID = strings.Repeat("0", 63) + "1"
		extra.Tags = nostr.Tags{{tagName, tagVal}, {"e", tagVal}}
		events = append(events, &extra)

		x := mustNew(t, DefaultOptions())
		for _, ev := range events {
			if err := x.Add(ev); err != nil {
				t.Fatal(err)
			}
		}
		var kept []*nostr.Event
		for i, ev := range events {
			if removeEvery > 0 && i%int(removeEvery) == 0 {
				x.Remove(ev.ID)
				continue
			}
			kept = append(kept, ev)
		}

		var fl nostr.Filter
		if mask&1 != 0 {
			fl.Tags = nostr.TagMap{tagName: {filterVal, tagVal}}
		}
		if mask&2 != 0 {
			fl.Kinds = []int{events[0].Kind, 1111}
		}
		if mask&4 != 0 {
			fl.Authors = []string{events[0].PubKey}
		}
		if mask&8 != 0 {
			fl.IDs = []string{extra.ID, events[0].ID, filterVal}
		}
		if since >= 0 && mask&16 != 0 {
			fl.Since = ts(int(since))
		}
		if until >= 0 && mask&32 != 0 {
			fl.Until = ts(int(until))
		}
		got, err := x.AppendMatching(nil, fl)
		if mask&1 != 0 {
			if _, ok := letterCode(tagName); !ok {
				if !errors.Is(err, ErrCannotAnswer) {
					t.Fatalf("tag %q: err = %v, want ErrCannotAnswer", tagName, err)
				}
				return
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteForce(kept, fl); !slices.Equal(itemIDs(got), want) {
			t.Fatalf("filter %v: got %v, want %v", fl, itemIDs(got), want)
		}
	})
}
