package repoindex

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRelayActionsAgreesWithComputeActions: the one-relay diff without the
// target is what computeActions makes of DeriveRelayTarget, on random
// indexes with confirmed and pending items, shared roots, bootstrap relays
// and relays that are down.
func TestRelayActionsAgreesWithComputeActions(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 4))
	urls := []string{"wss://a", "wss://b", "wss://c", "wss://d"}
	for round := 0; round < 300; round++ {
		repos := RepoSyncIndex{}
		for i := 0; i < rng.IntN(30); i++ {
			needs := &RepoNeeds{Relays: NewSet(), Roots: NewSet()}
			for _, u := range urls {
				if rng.IntN(3) == 0 {
					needs.Relays.Add(u)
				}
			}
			for j := 0; j < rng.IntN(6); j++ {
				needs.Roots.Add(fmt.Sprintf("root%d", rng.IntN(60))) // shared between repos at times
			}
			repos[fmt.Sprintf("30617:p:%d", i)] = needs
		}
		relays := map[string]*RelayState{}
		pending := map[string][]*PendingBatch{}
		for _, u := range urls {
			st := &RelayState{URL: u, Status: RelayStatus(rng.IntN(5)), Confirmed: NewItems()}
			relays[u] = st
			for ref, needs := range repos {
				if rng.IntN(2) == 0 {
					st.Confirmed.Repos.Add(ref)
				}
				for id := range needs.Roots.All() {
					switch rng.IntN(4) {
					case 0:
						st.Confirmed.Roots.Add(id)
					case 1:
						b := &PendingBatch{Items: NewItems()}
						b.Items.Roots.Add(id)
						if rng.IntN(2) == 0 {
							b.Items.Repos.Add(ref)
						}
						pending[u] = append(pending[u], b)
					}
				}
			}
		}
		for _, u := range urls {
			boot := u == "wss://d" && rng.IntN(2) == 0
			got := RelayActions(repos, u, boot, pending[u], relays[u])
			want := NewItems()
			if tg, ok := DeriveRelayTarget(repos, u, boot); ok {
				if acts := ComputeActions(map[string]Target{u: tg}, pending, relays); len(acts) == 1 {
					want = acts[0].Items
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %s (bootstrap %v): relayActions = %v, computeActions = %v", round, u, boot, got, want)
			}
		}
	}
}

// BenchmarkRecomputeRelay: one relay's compute_actions at the medium
// profile's size (2,000 repositories on 10 relays, 3 each, 25 roots each;
// the relay's history read but for one repository, 4 batches pending):
// target is the target built first (DeriveRelayTarget, computeActions),
// direct is relayActions.
func BenchmarkRecomputeRelay(b *testing.B) {
	const url = "wss://relay003.example"
	repos := RepoSyncIndex{}
	for i := 0; i < 2000; i++ {
		needs := &RepoNeeds{Relays: NewSet(), Roots: NewSet()}
		for j := 0; j < 3; j++ {
			needs.Relays.Add(fmt.Sprintf("wss://relay%03d.example", (i+j*3)%10))
		}
		for j := 0; j < 25; j++ {
			needs.Roots.Add(fmt.Sprintf("%064x", i*25+j))
		}
		repos[fmt.Sprintf("30617:%064x:repo-%d", i, i)] = needs
	}
	st := &RelayState{URL: url, Status: Syncing, Confirmed: NewItems()}
	var pending []*PendingBatch
	n := 0
	for ref, needs := range repos {
		if !needs.Relays.Has(url) {
			continue
		}
		if n++; n <= 4 {
			pending = append(pending, &PendingBatch{Items: Items{Repos: SetOf(ref), Roots: needs.Roots}})
			continue
		}
		if n == 5 {
			continue // new
		}
		st.Confirmed.Repos.Add(ref)
		st.Confirmed.Roots.AddAll(needs.Roots)
	}
	relays := map[string]*RelayState{url: st}
	b.Run("target", func(b *testing.B) {
		for b.Loop() {
			t, _ := DeriveRelayTarget(repos, url, false)
			if acts := ComputeActions(map[string]Target{url: t}, map[string][]*PendingBatch{url: pending}, relays); len(acts) != 1 || acts[0].Items.Roots.Len() != 25 {
				b.Fatalf("actions %v", acts)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if add := RelayActions(repos, url, false, pending, st); add.Roots.Len() != 25 {
				b.Fatalf("actions %v", add)
			}
		}
	})
}
