package reposync

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
)

// TestLiveMatchByKind: the kind filters of Layer 3 hand on only events
// about known roots or repositories; per-root filters stay literal.
func TestLiveMatchByKind(t *testing.T) {
	items := newItems()
	items.Roots.add("aa")
	items.Repos.add("30617:p:d")
	fs := nip34.Live(nip34.Layers23Live(items.Repos.sorted(), items.Roots.sorted(), 100, nil))
	match := liveMatch(fs, referTo(items))
	items.Roots.add("ff") // the check works on a copy taken at open
	cases := []struct {
		name string
		ev   *nostr.Event
		want bool
	}{
		{"comment on a known root", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "aa"}, {"K", "1617"}, {"e", "cc"}}}, true},
		{"comment on a foreign root", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "ff"}, {"K", "1617"}, {"e", "ff"}}}, false},
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
	plain := nip34.Live(nip34.Layers23(items.Repos.sorted(), items.Roots.sorted(), 100, nil))
	if !liveMatch(plain, referTo(items))(&nostr.Event{Kind: 1111, Tags: nostr.Tags{{"E", "ff"}}}) {
		t.Fatal("per-root E filter no longer matches")
	}
}
