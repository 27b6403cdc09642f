package repoindex

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

func items(repos, roots []string) Items {
	return Items{Repos: SetOf(repos...), Roots: SetOf(roots...)}
}

func TestDeriveRelayTargets(t *testing.T) {
	repos := RepoSyncIndex{
		"r1": {Relays: SetOf("wss://a", "wss://b"), Roots: SetOf("e1")},
		"r2": {Relays: SetOf("wss://b"), Roots: SetOf("e2", "e3")},
		"r3": {Relays: NewSet(), Roots: SetOf("e4")},
	}
	got := DeriveRelayTargets(repos, []string{"wss://boot"})
	want := map[string]Target{
		"wss://a":    items([]string{"r1"}, []string{"e1"}),
		"wss://b":    items([]string{"r1", "r2"}, []string{"e1", "e2", "e3"}),
		"wss://boot": items([]string{"r1", "r2", "r3"}, []string{"e1", "e2", "e3", "e4"}),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for url, want := range want {
		one, ok := DeriveRelayTarget(repos, url, url == "wss://boot")
		if !ok || !reflect.DeepEqual(one, want) {
			t.Fatalf("DeriveRelayTarget(%s) = %v, %v; want %v", url, one, ok, want)
		}
	}
	if _, ok := DeriveRelayTarget(repos, "wss://nobody", false); ok {
		t.Fatal("a relay no repository lists is a target")
	}
	// A bootstrap relay is a target even with no repositories.
	if got := DeriveRelayTargets(RepoSyncIndex{}, []string{"wss://boot"}); len(got) != 1 {
		t.Fatalf("empty index: got %v", got)
	}
}

func TestParseAnnouncement(t *testing.T) {
	pk := "aa" + fmt.Sprintf("%062d", 0)
	ev := &nostr.Event{Kind: 30617, PubKey: pk, CreatedAt: 10, Tags: nostr.Tags{
		{"d", "proj"},
		{"relays", "wss://a.example", "wss://own.example", "ftp://bad"},
		{"relays", "wss://A.example/"},
		{"clone", "https://grasp.example/npub1xyz/proj.git", "https://github.com/x/proj.git", "http://plain.example/npub1abc/proj.git"},
		{"clone", "https://other.example/npub1xyz/notproj.git"},
	}}
	isOwn := func(u string) bool { return u == "wss://own.example" }
	a, err := ParseAnnouncement(ev, isOwn, 10)
	if err != nil {
		t.Fatal(err)
	}
	if a.Ref != "30617:"+pk+":proj" || a.CreatedAt != 10 {
		t.Fatalf("ref %q created %d", a.Ref, a.CreatedAt)
	}
	want := []string{"wss://a.example", "wss://grasp.example", "ws://plain.example"}
	if !reflect.DeepEqual(a.Relays, want) {
		t.Fatalf("relays %v, want %v", a.Relays, want)
	}
	if a.Dropped != 1 {
		t.Fatalf("dropped %d, want 1 (ftp)", a.Dropped)
	}
	limited, _ := ParseAnnouncement(ev, isOwn, 1)
	if len(limited.Relays) != 1 || limited.Dropped != 3 {
		t.Fatalf("limit 1: %v dropped %d", limited.Relays, limited.Dropped)
	}
	if _, err := ParseAnnouncement(&nostr.Event{Kind: 30617}, nil, 10); err == nil {
		t.Fatal("announcement without d accepted")
	}
}

// Parsing an announcement interns nothing: the handle table keeps every
// string for the process's life, and anyone can publish an announcement
// naming thousands of relay URLs the limit then refuses.
func TestParseAnnouncementInternsNothing(t *testing.T) {
	tags := nostr.Tags{{"d", "many"}}
	for i := range 500 {
		tags = append(tags, nostr.Tag{"relays", fmt.Sprintf("wss://never-interned-%d.example", i)})
	}
	ev := &nostr.Event{Kind: 30617, PubKey: "bb" + fmt.Sprintf("%062d", 0), CreatedAt: 10, Tags: tags}
	if _, err := ParseAnnouncement(ev, nil, 10); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if _, ok := names.lookup(fmt.Sprintf("wss://never-interned-%d.example", i)); ok {
			t.Fatalf("relay URL %d of a parsed announcement was interned", i)
		}
	}
}

func TestWantedRelaysAreTheTargets(t *testing.T) {
	repos := RepoSyncIndex{
		"30617:a:x": {Relays: SetOf("wss://r1", "wss://r2"), Roots: SetOf("e1")},
		"30617:a:y": {Relays: SetOf("wss://r2"), Roots: SetOf()},
		"30617:a:z": {Relays: SetOf(), Roots: SetOf("e2")},
	}
	for _, boot := range [][]string{nil, {"wss://boot"}} {
		targets := DeriveRelayTargets(repos, boot)
		wanted := WantedRelays(repos, boot)
		if wanted.Len() != len(targets) {
			t.Fatalf("bootstrap %v: wanted %v, targets %v", boot, wanted.Sorted(), targets)
		}
		for url := range targets {
			if !wanted.Has(url) {
				t.Errorf("bootstrap %v: %s has a target but is not wanted", boot, url)
			}
		}
	}
}

func TestComputeActions(t *testing.T) {
	targets := map[string]Target{
		"wss://up":        items([]string{"r1", "r2", "r3"}, []string{"e1", "e2"}),
		"wss://down":      items([]string{"r1"}, nil),
		"wss://untouched": items([]string{"r1"}, nil),
		"wss://done":      items([]string{"r1"}, []string{"e1"}),
	}
	relays := map[string]*RelayState{
		"wss://up":   {Status: Connected, Confirmed: items([]string{"r1"}, []string{"e1"})},
		"wss://down": {Status: Disconnected, Confirmed: items(nil, nil)},
		"wss://done": {Status: Syncing, Confirmed: items([]string{"r1"}, []string{"e1"})},
	}
	pending := map[string][]*PendingBatch{
		"wss://up": {{ID: 1, Items: items([]string{"r2"}, nil)}},
	}
	got := ComputeActions(targets, pending, relays)
	want := []AddFilters{{Relay: "wss://up", Items: items([]string{"r3"}, []string{"e2"})}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestComputeActionsSorted(t *testing.T) {
	targets := map[string]Target{}
	relays := map[string]*RelayState{}
	for i := 0; i < 20; i++ {
		url := fmt.Sprintf("wss://r%02d", 19-i)
		targets[url] = items([]string{"x"}, nil)
		relays[url] = &RelayState{Status: ConnectedHistoricSyncFailures, Confirmed: NewItems()}
	}
	got := ComputeActions(targets, nil, relays)
	if len(got) != 20 {
		t.Fatalf("got %d actions", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].Relay >= got[i].Relay {
			t.Fatalf("not sorted at %d: %s >= %s", i, got[i-1].Relay, got[i].Relay)
		}
	}
}

func TestRelayStatus(t *testing.T) {
	for s, want := range map[RelayStatus]bool{Disconnected: false, Connecting: false, Syncing: true, Connected: true, ConnectedHistoricSyncFailures: true} {
		if s.IsUp() != want {
			t.Errorf("%s.IsUp() = %v", s, !want)
		}
	}
}

func BenchmarkComputeActions10kRepos(b *testing.B) {
	repos := RepoSyncIndex{}
	relays := map[string]*RelayState{}
	for r := 0; r < 100; r++ {
		relays[fmt.Sprintf("wss://relay%03d", r)] = &RelayState{Status: Connected, Confirmed: NewItems()}
	}
	for i := 0; i < 10000; i++ {
		n := &RepoNeeds{Relays: NewSet(), Roots: NewSet()}
		for j := 0; j < 3; j++ {
			n.Relays.Add(fmt.Sprintf("wss://relay%03d", (i*7+j*13)%100))
		}
		for j := 0; j < 5; j++ {
			n.Roots.Add(fmt.Sprintf("%064x", i*5+j))
		}
		repos[fmt.Sprintf("30617:%064x:repo%d", i, i)] = n
	}
	// Half of everything confirmed already.
	targets := DeriveRelayTargets(repos, nil)
	for url, t := range targets {
		i := 0
		for ref := range t.Repos.All() {
			if i%2 == 0 {
				relays[url].Confirmed.Repos.Add(ref)
			}
			i++
		}
	}
	b.ResetTimer()
	b.ReportAllocs()
	for b.Loop() {
		_ = ComputeActions(DeriveRelayTargets(repos, nil), nil, relays)
	}
}

func TestItemsWithin(t *testing.T) {
	it := NewItems()
	it.Repos.Add("30617:a:x")
	it.Repos.Add("30617:a:y")
	it.Roots.Add("r1")
	it.Roots.Add("r2")
	o := NewItems()
	o.Repos.Add("30617:a:y")
	o.Repos.Add("30617:a:z")
	o.Roots.Add("r2")
	got := it.Within(o)
	if got.Repos.Len() != 1 || !got.Repos.Has("30617:a:y") || got.Roots.Len() != 1 || !got.Roots.Has("r2") {
		t.Fatalf("Within = %v %v, want [30617:a:y] [r2]", got.Repos.Sorted(), got.Roots.Sorted())
	}
	if !it.Within(NewItems()).Empty() {
		t.Fatal("Within nothing is not empty")
	}
}
