package integration

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestDiscoveryChain: the own relay hosts R1, which lists remote A; A holds
// R2's announcement listing remote B; B holds R2's patches and issues.
// Starting from only the own relay, everything about R1 and R2 ends up in
// the own relay.
func TestDiscoveryChain(t *testing.T) {
	own := ownRelay(t)
	a := harness.Start(t, harness.RelayOptions{Name: "A"})
	b := harness.Start(t, harness.RelayOptions{Name: "B"})
	alice, bob := signed.NewKey(), signed.NewKey()

	r1 := repoFor(alice, "r1", own, a)
	mustPublish(t, own, r1)
	r1Issue := bob.Issue(alice.RepoAddress("r1"), "bug in r1")
	a.Inject(r1, r1Issue)

	r2 := repoFor(bob, "r2", own, b)
	a.Inject(r2)
	r2Patch := alice.Patch(bob.RepoAddress("r2"))
	r2Issue := alice.Issue(bob.RepoAddress("r2"), "bug in r2")
	r2Comment := bob.Comment(r2Issue, nil)
	r2Reply := alice.PatchReply(bob.RepoAddress("r2"), r2Patch, nil)
	b.Inject(r2, r2Patch, r2Issue, r2Comment, r2Reply)

	startSidecar(t, fastConfig(own))
	waitHas(t, own, r1Issue, r2, r2Patch, r2Issue, r2Comment, r2Reply)
}

// TestFreshStartAllLayers pulls full history for repos, root events and
// replies, including A-, E- and q-tagged events.
func TestFreshStartAllLayers(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", ReqCap: 500})
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := repoFor(alice, "proj", own, remote)
	mustPublish(t, own, repo)
	addr := alice.RepoAddress("proj")

	old := signed.At(time.Now().Add(-30 * 24 * time.Hour))
	issue := bob.Issue(addr, "old issue", old)
	patch := bob.Patch(addr, old)
	pr := bob.PR(addr, "0123456789abcdef0123456789abcdef01234567")
	status := alice.Status(signed.KindStatusApplied, patch)
	comment := alice.Comment(issue, nil)  // E/e tagged
	repoComment := bob.Comment(repo, nil) // A/a tagged
	quote := bob.Sign(&nostr.Event{Kind: 1, Tags: nostr.Tags{{"q", issue.ID}}, Content: "see this", CreatedAt: nostr.Now()})
	quoteRepo := bob.Sign(&nostr.Event{Kind: 1, Tags: nostr.Tags{{"q", addr}}, Content: "nice repo", CreatedAt: nostr.Now()})
	upperA := bob.Sign(&nostr.Event{Kind: 1111, Tags: nostr.Tags{{"A", addr}, {"K", "30617"}}, Content: "upper A", CreatedAt: nostr.Now()})
	all := []*nostr.Event{repo, issue, patch, pr, status, comment, repoComment, quote, quoteRepo, upperA}
	remote.Inject(all...)
	unrelated := bob.Issue(bob.RepoAddress("elsewhere"), "not ours")
	remote.Inject(unrelated)

	sc := startSidecar(t, fastConfig(own))
	waitHas(t, own, all...)
	if own.Has(unrelated.ID) {
		t.Fatal("an unrelated issue reached the own relay")
	}
	waitState(t, sc, remote.URL(), "connected")
}

// TestLiveEvent: an event published to a remote after sync reaches the own
// relay within the batch window plus a second.
func TestLiveEvent(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	repo := repoFor(alice, "live", own, remote)
	mustPublish(t, own, repo)
	remote.Inject(repo)
	sc := startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "remote never confirmed the repository", func() bool {
		st := sc.Status()
		return len(st.Relays) == 1 && st.Relays[0].State == "connected" && st.Relays[0].ReposConfirmed == 1
	})

	issue := alice.Issue(alice.RepoAddress("live"), "fresh")
	mustPublish(t, remote, issue)
	start := time.Now()
	waitHas(t, own, issue)
	t.Logf("live event arrived after %s", time.Since(start))
	// The issue is a new root: its replies are synced too.
	reply := alice.Comment(issue, nil)
	mustPublish(t, remote, reply)
	waitHas(t, own, reply)
}
