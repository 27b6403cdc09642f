package nip34

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func TestMaintainers(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	ev := &nostr.Event{Tags: nostr.Tags{
		{"maintainers", a, "not-a-key", strings.ToUpper(b)},
		{"maintainers"},
		{"maintainers", b},
	}}
	if got := Maintainers(ev); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("Maintainers = %v, want [a b] (invalid and upper-case keys left out)", got)
	}
}

func TestMaintainerSetAndStateAuthorised(t *testing.T) {
	// alice lists bob, bob lists carol and alice (a cycle), dave lists
	// erin; nobody lists dave.
	lists := map[string][]string{
		"alice": {"bob"},
		"bob":   {"carol", "alice"},
		"dave":  {"erin"},
	}
	listed := func(pk string) []string { return lists[pk] }
	got := slices.Sorted(maps.Keys(MaintainerSet("alice", listed)))
	if !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Fatalf("MaintainerSet(alice) = %v", got)
	}
	if got := slices.Sorted(maps.Keys(MaintainerSet("carol", listed))); !slices.Equal(got, []string{"carol"}) {
		t.Fatalf("MaintainerSet(carol) = %v: carol lists nobody", got)
	}
	owners := func(os ...string) func(func(string) bool) { return slices.Values(os) }
	for _, c := range []struct {
		author string
		hosted []string
		want   bool
	}{
		{"alice", []string{"alice"}, true},
		{"carol", []string{"alice"}, true}, // recursively through bob
		{"erin", []string{"alice"}, false},
		{"erin", []string{"alice", "dave"}, true},
		{"alice", nil, false}, // no hosted announcement of the identifier
		{"dave", []string{"carol"}, false},
	} {
		if got := StateAuthorised(c.author, owners(c.hosted...), listed); got != c.want {
			t.Errorf("StateAuthorised(%s, hosted owners %v) = %v, want %v", c.author, c.hosted, got, c.want)
		}
	}
}
