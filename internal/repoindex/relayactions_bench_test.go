package repoindex

import (
	"fmt"
	"testing"
)

// BenchmarkRelayActions times one relay's recomputation at steady state
// (everything it is asked about confirmed, nothing new): 10,000
// repositories of 47 roots each, the relay listed by one in ten.
//
//	go test -run '^$' -bench RelayActions -count 3 ./internal/reposync/
func BenchmarkRelayActions(b *testing.B) {
	const url = "wss://bench-relay-actions"
	repos := RepoSyncIndex{}
	st := &RelayState{URL: url, Status: Connected, Confirmed: NewItems()}
	for i := 0; i < 10_000; i++ {
		ref := fmt.Sprintf("30617:%064x:bench-%d", i, i)
		needs := &RepoNeeds{Relays: NewSet(), Roots: NewSet()}
		if i%10 == 0 {
			needs.Relays.Add(url)
		}
		for j := 0; j < 47; j++ {
			needs.Roots.Add(fmt.Sprintf("%064x", 1<<48+i*47+j))
		}
		repos[ref] = needs
		if i%10 == 0 {
			st.Confirmed.Repos.Add(ref)
			st.Confirmed.Roots.AddAll(needs.Roots)
		}
	}
	for b.Loop() {
		if add := RelayActions(repos, url, false, nil, st); !add.Empty() {
			b.Fatal("new items at steady state")
		}
	}
}
