package reposync

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

func items(repos, roots []string) Items {
	return Items{Repos: setOf(repos...), Roots: setOf(roots...)}
}

func TestDeriveRelayTargets(t *testing.T) {
	repos := RepoSyncIndex{
		"r1": {Relays: setOf("wss://a", "wss://b"), Roots: setOf("e1")},
		"r2": {Relays: setOf("wss://b"), Roots: setOf("e2", "e3")},
		"r3": {Relays: set{}, Roots: setOf("e4")},
	}
	got := deriveRelayTargets(repos, []string{"wss://boot"})
	want := map[string]Target{
		"wss://a":    items([]string{"r1"}, []string{"e1"}),
		"wss://b":    items([]string{"r1", "r2"}, []string{"e1", "e2", "e3"}),
		"wss://boot": items([]string{"r1", "r2", "r3"}, []string{"e1", "e2", "e3", "e4"}),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for url, want := range want {
		one, ok := deriveRelayTarget(repos, url, url == "wss://boot")
		if !ok || !reflect.DeepEqual(one, want) {
			t.Fatalf("deriveRelayTarget(%s) = %v, %v; want %v", url, one, ok, want)
		}
	}
	if _, ok := deriveRelayTarget(repos, "wss://nobody", false); ok {
		t.Fatal("a relay no repository lists is a target")
	}
	// A bootstrap relay is a target even with no repositories.
	if got := deriveRelayTargets(RepoSyncIndex{}, []string{"wss://boot"}); len(got) != 1 {
		t.Fatalf("empty index: got %v", got)
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
	got := computeActions(targets, pending, relays)
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
		relays[url] = &RelayState{Status: ConnectedHistoricSyncFailures, Confirmed: newItems()}
	}
	got := computeActions(targets, nil, relays)
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

func TestNormalizeRelayURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"wss://Relay.Example.com/", "wss://relay.example.com", ""},
		{"wss://relay.example.com:443", "wss://relay.example.com", ""},
		{"ws://relay.example.com:80/path/", "ws://relay.example.com/path", ""},
		{"ws://127.0.0.1:7777", "ws://127.0.0.1:7777", ""},
		{"ws://[::1]:7777/", "ws://[::1]:7777", ""},
		{" wss://a.b ", "wss://a.b", ""},
		{"https://relay.example.com", "", "scheme"},
		{"file:///etc/passwd", "", "scheme"},
		{"wss://user:pw@relay.example.com", "", "credentials"},
		{"wss://", "", "no host"},
		{"", "", "empty"},
	}
	for _, tt := range tests {
		got, err := NormalizeRelayURL(tt.in)
		if tt.err != "" {
			if err == nil || !contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
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

func TestRootRefs(t *testing.T) {
	repo := "30617:" + fmt.Sprintf("%064d", 1) + ":proj"
	tests := []struct {
		name string
		ev   *nostr.Event
		ok   bool
	}{
		{"issue", &nostr.Event{Kind: 1621, Tags: nostr.Tags{{"a", repo}}}, true},
		{"pr", &nostr.Event{Kind: 1618, Tags: nostr.Tags{{"a", repo}}}, true},
		{"root patch", &nostr.Event{Kind: 1617, Tags: nostr.Tags{{"a", repo}, {"t", "root"}}}, true},
		{"patch without e", &nostr.Event{Kind: 1617, Tags: nostr.Tags{{"a", repo}}}, true},
		{"reply patch", &nostr.Event{Kind: 1617, Tags: nostr.Tags{{"a", repo}, {"e", "x"}}}, false},
		{"comment", &nostr.Event{Kind: 1111, Tags: nostr.Tags{{"a", repo}}}, false},
		{"issue without a", &nostr.Event{Kind: 1621}, false},
		{"issue with bad a", &nostr.Event{Kind: 1621, Tags: nostr.Tags{{"a", "1:x"}}}, false},
	}
	for _, tt := range tests {
		refs, ok := RootRefs(tt.ev)
		if ok != tt.ok || ok && !reflect.DeepEqual(refs, []string{repo}) {
			t.Errorf("%s: got %v %v", tt.name, refs, ok)
		}
	}
}

func TestRejectedIndex(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	r := NewRejectedIndex(RejectedConfig{HotTTL: time.Minute, HotMax: 2, ColdTTL: time.Hour, ColdMax: 3}, clock)
	id := func(i int) string { return fmt.Sprintf("%064x", i) }
	ev := func(i int, ref string) *nostr.Event {
		return &nostr.Event{ID: id(i), CreatedAt: nostr.Timestamp(i), Kind: 1111, Tags: nostr.Tags{{"e", ref}}}
	}
	r.Add(ev(1, "root"))
	r.Add(ev(2, "root"))
	r.Add(ev(3, "other"))
	if hot, cold := r.Len(); hot != 2 || cold != 3 {
		t.Fatalf("len %d/%d, want 2 hot (bounded) / 3 cold", hot, cold)
	}
	// Event 1 was evicted from the hot cache: accepting "root" retries 2
	// and forgets 1 so the next sync fetches it again.
	retry, forgotten := r.DependencyAccepted("root")
	if len(retry) != 1 || retry[0].ID != id(2) || !reflect.DeepEqual(forgotten, []string{id(1)}) {
		t.Fatalf("retry %v forgotten %v", retry, forgotten)
	}
	if r.Has(id(1)) || r.Has(id(2)) || !r.Has(id(3)) {
		t.Fatal("dependents not forgotten")
	}
	r.Add(ev(4, "x"))
	r.Add(ev(5, "x"))
	r.Add(ev(6, "x"))
	if _, cold := r.Len(); cold != 3 {
		t.Fatalf("cold %d, want bounded at 3", cold)
	}
	if r.Has(id(3)) {
		t.Fatal("oldest cold entry not evicted")
	}
	now = now.Add(2 * time.Hour)
	r.Expire()
	if hot, cold := r.Len(); hot != 0 || cold != 0 {
		t.Fatalf("after TTL: %d/%d", hot, cold)
	}
	var n int
	r.Add(ev(7, "y"))
	r.Items(func(int64, [32]byte) { n++ })
	if n != 1 {
		t.Fatalf("Items yielded %d", n)
	}
}

func TestSeenSet(t *testing.T) {
	now := time.Unix(0, 0)
	s := newSeenSet(4, time.Minute, func() time.Time { return now })
	k := func(i byte) [32]byte { return [32]byte{i} }
	if !s.Mark(k(1)) || s.Mark(k(1)) {
		t.Fatal("Mark is not check-and-set")
	}
	s.Mark(k(2))
	s.Mark(k(3)) // rotates: cur {3}, old {1,2}
	if !s.Has(k(1)) || !s.Has(k(3)) {
		t.Fatal("lost an id on size rotation")
	}
	s.Mark(k(4))
	s.Mark(k(5)) // rotates again: old {3,4}
	if s.Has(k(1)) {
		t.Fatal("size bound not applied")
	}
	now = now.Add(31 * time.Second)
	if !s.Has(k(5)) {
		t.Fatal("forgot an id before ttl/2")
	}
	now = now.Add(61 * time.Second)
	if s.Has(k(5)) || s.Len() != 0 {
		t.Fatal("remembered an id past the ttl")
	}
	s.Mark(k(9))
	s.Forget(k(9))
	if s.Has(k(9)) {
		t.Fatal("Forget did not forget")
	}
}

func TestReferences(t *testing.T) {
	ev := &nostr.Event{Kind: 30618, Tags: nostr.Tags{{"d", "proj"}, {"e", "x"}, {"a", "30617:p:proj"}, {"p", "ignored"}, {"E", "y"}, {"q", "z"}}}
	got := References(ev)
	want := []string{"30617:*:proj", "x", "30617:p:proj", "y", "z"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func BenchmarkComputeActions10kRepos(b *testing.B) {
	repos := RepoSyncIndex{}
	relays := map[string]*RelayState{}
	for r := 0; r < 100; r++ {
		relays[fmt.Sprintf("wss://relay%03d", r)] = &RelayState{Status: Connected, Confirmed: newItems()}
	}
	for i := 0; i < 10000; i++ {
		n := &RepoNeeds{Relays: set{}, Roots: set{}}
		for j := 0; j < 3; j++ {
			n.Relays.add(fmt.Sprintf("wss://relay%03d", (i*7+j*13)%100))
		}
		for j := 0; j < 5; j++ {
			n.Roots.add(fmt.Sprintf("%064x", i*5+j))
		}
		repos[fmt.Sprintf("30617:%064x:repo%d", i, i)] = n
	}
	// Half of everything confirmed already.
	targets := deriveRelayTargets(repos, nil)
	for url, t := range targets {
		i := 0
		for ref := range t.Repos {
			if i%2 == 0 {
				relays[url].Confirmed.Repos.add(ref)
			}
			i++
		}
	}
	b.ResetTimer()
	b.ReportAllocs()
	for b.Loop() {
		_ = computeActions(deriveRelayTargets(repos, nil), nil, relays)
	}
}

func TestRejectedAfterDependencyAcceptedRetriesOnce(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRejectedIndex(RejectedConfig{HotTTL: time.Minute, HotMax: 10, ColdTTL: time.Hour, ColdMax: 10}, func() time.Time { return now })
	reply := &nostr.Event{ID: fmt.Sprintf("%064x", 1), Kind: 1111, Tags: nostr.Tags{{"E", "root"}}}
	// The root's acceptance is reported before the reply's rejection.
	r.DependencyAccepted("root")
	if !r.Add(reply) {
		t.Fatal("a rejection after its dependency's acceptance was not retried")
	}
	if r.Has(reply.ID) {
		t.Fatal("an event to retry was recorded as rejected")
	}
	if r.Add(reply) || !r.Has(reply.ID) {
		t.Fatal("the second rejection was retried again instead of recorded")
	}
	other := &nostr.Event{ID: fmt.Sprintf("%064x", 2), Kind: 1111, Tags: nostr.Tags{{"E", "root"}}}
	now = now.Add(2 * time.Minute)
	if r.Add(other) {
		t.Fatal("retried for an acceptance older than the hot TTL")
	}
}
