package reposync

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

func TestComputeActions(t *testing.T) {
	targets := map[string]repoindex.Target{
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
	targets := map[string]repoindex.Target{}
	relays := map[string]*RelayState{}
	for i := 0; i < 20; i++ {
		url := fmt.Sprintf("wss://r%02d", 19-i)
		targets[url] = items([]string{"x"}, nil)
		relays[url] = &RelayState{Status: ConnectedHistoricSyncFailures, Confirmed: repoindex.NewItems()}
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

func BenchmarkComputeActions10kRepos(b *testing.B) {
	repos := repoindex.RepoSyncIndex{}
	relays := map[string]*RelayState{}
	for r := 0; r < 100; r++ {
		relays[fmt.Sprintf("wss://relay%03d", r)] = &RelayState{Status: Connected, Confirmed: repoindex.NewItems()}
	}
	for i := 0; i < 10000; i++ {
		n := &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
		for j := 0; j < 3; j++ {
			n.Relays.Add(fmt.Sprintf("wss://relay%03d", (i*7+j*13)%100))
		}
		for j := 0; j < 5; j++ {
			n.Roots.Add(fmt.Sprintf("%064x", i*5+j))
		}
		repos[fmt.Sprintf("30617:%064x:repo%d", i, i)] = n
	}
	// Half of everything confirmed already.
	targets := repoindex.DeriveRelayTargets(repos, nil)
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
		_ = computeActions(repoindex.DeriveRelayTargets(repos, nil), nil, relays)
	}
}
func items(repos, roots []string) repoindex.Items {
	return repoindex.Items{Repos: repoindex.SetOf(repos...), Roots: repoindex.SetOf(roots...)}
}
