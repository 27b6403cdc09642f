package reposync

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// The status's pending repositories and roots of a relay, kept as batches
// come and go, are the items of its pending batches: while they run, once
// they are done, and after the relay's connection is torn down or it is
// resynced in full.
func TestPendingTotalsFollowBatches(t *testing.T) {
	h := newHistoricEnv(t)
	check := func(when string, wantRepos int) { // wantRepos -1: any
		t.Helper()
		repos, roots := 0, 0
		for _, b := range h.e.pending[testRelay] {
			repos += b.Items.Repos.Len()
			roots += b.Items.Roots.Len()
		}
		if wantRepos >= 0 && repos != wantRepos {
			t.Fatalf("%s: %d repositories pending, want %d", when, repos, wantRepos)
		}
		h.e.refreshSnapshot()
		for _, rs := range h.e.Status().Relays {
			if rs.URL == testRelay && (rs.ReposPending != repos || rs.RootsPending != roots) {
				t.Errorf("%s: status says %d repositories and %d roots pending, the batches hold %d and %d",
					when, rs.ReposPending, rs.RootsPending, repos, roots)
			}
		}
	}
	start := func(n int) {
		for i := range n {
			items := repoindex.NewItems()
			ref := nip34.RepoRef(nostr.GeneratePrivateKey()[:64], "pending")
			items.Repos.Add(ref)
			for j := 0; j <= i; j++ {
				items.Roots.Add(nostr.GeneratePrivateKey()[:64])
			}
			h.e.sched.startBatch(h.r, items, nip34.Layer2([]string{ref}, 100, nil), false)
		}
	}
	start(3)
	check("three batches started", 3)
	h.drain(t)
	check("all done", 0)
	start(2)
	h.e.fullResync(h.r)
	check("after a full resync (which syncs the relay's repository afresh)", -1)
	h.drain(t)
	start(2)
	h.e.teardown(h.r)
	check("after the connection was torn down", 0)
}
