package reposync

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/filtermatch"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// TestLiveMatchByKind: the kind filters of Layer 3 hand on only events
// about known roots or repositories; per-root filters stay literal.
func TestLiveMatchByKind(t *testing.T) {
	items := repoindex.NewItems()
	items.Roots.Add("aa")
	items.Repos.Add("30617:p:d")
	fs := nip34.Live(nip34.Layers23Live(items.Repos.Sorted(), items.Roots.Sorted(), 100, nil))
	match := liveMatch(fs, repoindex.ReferTo(items))
	items.Roots.Add("ff") // the check works on a copy taken at open
	cases := []struct {
		name string
		ev   *nostr.Event
		want bool
	}{
		{"reply to a comment on a known root", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "aa"}, {"K", "1617"}, {"e", "cc"}, {"k", "1111"}}}, true},
		{"top-level comment on a known root (per-root e)", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "aa"}, {"K", "1617"}, {"e", "aa"}, {"k", "1617"}}}, true},
		{"reply to a comment on a foreign root", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "ff"}, {"K", "1617"}, {"e", "cc"}, {"k", "1111"}}}, false},
		{"comment on a foreign root", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "ff"}, {"K", "1617"}, {"e", "ff"}, {"k", "1617"}}}, false},
		{"PR update of a foreign repository", &nostr.Event{Kind: 1619, Tags: nostr.Tags{{"E", "ff"}, {"a", "30617:x:y"}}}, false},
		{"PR update of a hosted repository", &nostr.Event{Kind: 1619, Tags: nostr.Tags{{"E", "ff"}, {"a", "30617:p:d"}}}, true},
		{"reply to a known root", &nostr.Event{Kind: 1, Tags: nostr.Tags{{"e", "aa"}}}, true},
		{"quote of a known root", &nostr.Event{Kind: 1, Tags: nostr.Tags{{"q", "aa"}}}, true},
		{"reply to a foreign root", &nostr.Event{Kind: 1, Tags: nostr.Tags{{"e", "ff"}}}, false},
		{"status of a known root", &nostr.Event{Kind: 1630, Tags: nostr.Tags{{"e", "aa"}}}, true},
	}
	for _, c := range cases {
		if got := match(c.ev); got != c.want {
			t.Errorf("%s: match = %v, want %v", c.name, got, c.want)
		}
	}
	// Without kind filters the check is the filters themselves.
	plain := nip34.Live(nip34.Layers23(items.Repos.Sorted(), items.Roots.Sorted(), 100, nil))
	if !liveMatch(plain, repoindex.ReferTo(items))(&nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "ff"}}}) {
		t.Fatal("per-root E filter no longer matches")
	}
}

// liveMatch is a live subscription's check of what arrives
// (openLiveMatch's).
func liveMatch(fs []nostr.Filter, refers func(*nostr.Event) bool) func(*nostr.Event) bool {
	return filtermatch.Checked(fs, nip34.ByKind, refers)
}

// scanLiveMatch is liveMatch as it was, with go-nostr's matching: the
// reference the compiled one is compared with.
func scanLiveMatch(fs []nostr.Filter, refers func(*nostr.Event) bool) func(*nostr.Event) bool {
	return func(ev *nostr.Event) bool {
		checked := false
		for _, f := range fs {
			if !f.Matches(ev) {
				continue
			}
			if !nip34.ByKind(f) {
				return true
			}
			if !checked {
				if refers(ev) {
					return true
				}
				checked = true
			}
		}
		return false
	}
}

// TestLiveMatchAgreesWithScan: liveMatch with kind filters decides as the
// scan over go-nostr's Matches did, on Layers23Live of random items and
// random events about them.
func TestLiveMatchAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 2))
	kinds := []int{1, 1111, 1617, 1619, 1630}
	for round := 0; round < 300; round++ {
		it := repoindex.NewItems()
		for range rng.IntN(40) {
			it.Roots.Add(fmt.Sprintf("%02x", rng.IntN(80)))
		}
		for range rng.IntN(10) {
			it.Repos.Add(fmt.Sprintf("30617:p:%d", rng.IntN(20)))
		}
		fs := nip34.Live(nip34.Layers23Live(it.Repos.Sorted(), it.Roots.Sorted(), 1+rng.IntN(8), nil))
		got, want := liveMatch(fs, repoindex.ReferTo(it)), scanLiveMatch(fs, repoindex.ReferTo(it))
		for range 50 {
			ev := &nostr.Event{Kind: kinds[rng.IntN(len(kinds))]}
			for range rng.IntN(4) {
				v := fmt.Sprintf("%02x", rng.IntN(80))
				if rng.IntN(3) == 0 {
					v = fmt.Sprintf("30617:p:%d", rng.IntN(20))
				}
				ev.Tags = append(ev.Tags, nostr.Tag{[]string{"e", "E", "q", "a", "A", "K"}[rng.IntN(6)], v})
			}
			if rng.IntN(2) == 0 {
				ev.Tags = append(ev.Tags, nostr.Tag{"K", nip34.RootKindValues[rng.IntN(4)]})
			}
			if g, w := got(ev), want(ev); g != w {
				t.Fatalf("items %v\nevent %v\nliveMatch %v, scan %v", it, ev, g, w)
			}
		}
	}
}
