package reposync

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"testing"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// BenchmarkTrackedRepoMemory reports the heap held per tracked repository
// by the sync indexes with 10,000 repositories (5 root events each) spread
// over 100 relays, half of it confirmed.
func BenchmarkTrackedRepoMemory(b *testing.B) {
	const repos, relayCount = 10000, 100
	var perRepo float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		idx, relays := trackedIndexes(repos, relayCount)
		targets := repoindex.DeriveRelayTargets(idx, nil)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRepo = float64(after.HeapAlloc-before.HeapAlloc) / repos
		runtime.KeepAlive(idx)
		runtime.KeepAlive(relays)
		runtime.KeepAlive(targets)
	}
	b.ReportMetric(perRepo, "bytes/repo")
}

// trackedIndexes builds a RepoSyncIndex of n repositories, each listing 3
// of relayCount relays and 5 root events, and relay states with half of
// each relay's targets confirmed.
func trackedIndexes(n, relayCount int) (repoindex.RepoSyncIndex, map[string]*repoindex.RelayState) {
	repos := repoindex.RepoSyncIndex{}
	relays := map[string]*repoindex.RelayState{}
	for r := 0; r < relayCount; r++ {
		relays[fmt.Sprintf("wss://relay%03d.example", r)] = &repoindex.RelayState{Status: repoindex.Connected, Confirmed: repoindex.NewItems()}
	}
	root := make([]byte, 32)
	for i := 0; i < n; i++ {
		need := &repoindex.RepoNeeds{Relays: repoindex.NewSet(), Roots: repoindex.NewSet()}
		for j := 0; j < 3; j++ {
			need.Relays.Add(fmt.Sprintf("wss://relay%03d.example", (i*7+j*13)%relayCount))
		}
		for j := 0; j < 5; j++ {
			rand.Read(root)
			need.Roots.Add(hex.EncodeToString(root))
		}
		pk := make([]byte, 32)
		rand.Read(pk)
		repos[nip34.RepoRef(hex.EncodeToString(pk), fmt.Sprintf("repo-%d", i))] = need
	}
	for url, t := range repoindex.DeriveRelayTargets(repos, nil) {
		i := 0
		for ref := range t.Repos.All() {
			if i%2 == 0 {
				relays[url].Confirmed.Repos.Add(ref)
			}
			i++
		}
		i = 0
		for root := range t.Roots.All() {
			if i%2 == 0 {
				relays[url].Confirmed.Roots.Add(root)
			}
			i++
		}
	}
	return repos, relays
}
