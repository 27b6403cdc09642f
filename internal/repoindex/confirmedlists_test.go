package repoindex

import (
	"slices"
	"testing"
)

// TestConfirmedListsRebuildOnlyOnChange: the lists and their generation
// stay while the relay's confirmed items do not change; a change, or the
// relay tracked again (another state), rebuilds them with a new
// generation; Keep forgets relays no longer tracked.
func TestConfirmedListsRebuildOnlyOnChange(t *testing.T) {
	var c ConfirmedLists
	rs := &RelayState{URL: "wss://a", Confirmed: NewItems()}
	rs.Confirmed.Repos.Add("30617:x:one")
	repos, _, g1 := c.Of(rs)
	if !slices.Equal(repos, []string{"30617:x:one"}) {
		t.Fatalf("repos %v", repos)
	}
	if _, _, g := c.Of(rs); g != g1 {
		t.Fatalf("unchanged state: generation %d, want %d", g, g1)
	}
	rs.Confirmed.Repos.Add("30617:x:two")
	rs.ConfirmedGen++
	repos, _, g2 := c.Of(rs)
	if g2 == g1 || len(repos) != 2 {
		t.Fatalf("after a change: generation %d (was %d), repos %v", g2, g1, repos)
	}
	again := &RelayState{URL: "wss://a", Confirmed: NewItems(), ConfirmedGen: rs.ConfirmedGen}
	if repos, _, g := c.Of(again); g == g2 || len(repos) != 0 {
		t.Fatalf("tracked again: generation %d (was %d), repos %v", g, g2, repos)
	}
	c.Keep(func(string) bool { return false })
	if len(c.m) != 0 {
		t.Fatalf("%d relays kept", len(c.m))
	}
}
