package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/harness"
	"github.com/grasp-sync/grasp-sync/internal/testkit"
)

// TestRootsLearnedFromTheirOKWhenTheEchoCameFirst: the own relay answers
// late, so the echo of each root the sidecar publishes reaches its
// self-subscription while the root is still in flight. Those echoes are
// not decoded; each root's OK hands it on as its echo, and the discussion
// under every root is synced all the same.
func TestRootsLearnedFromTheirOKWhenTheEchoCameFirst(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice, bob := harness.NewKey(), harness.NewKey()
	repo := repoFor(alice, "echo", own, remote)
	mustPublish(t, own, repo)
	sc := startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "the remote relay never synced", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.State == "connected"
	})
	// OKs (and everything else the own relay answers) come late; live
	// events, the echoes among them, do not.
	own.SetFaults(harness.Faults{Delay: 300 * time.Millisecond})
	var roots, discussion []*nostr.Event
	for i := range 4 {
		issue := bob.Issue(alice.RepoAddress("echo"), fmt.Sprintf("issue %d", i))
		patch := bob.Patch(alice.RepoAddress("echo"))
		roots = append(roots, issue, patch)
		discussion = append(discussion, alice.Comment(issue, nil), alice.Comment(patch, nil))
	}
	mustPublish(t, remote, roots...)
	waitHas(t, own, roots...)
	mustPublish(t, remote, discussion...)
	waitHas(t, own, discussion...)
	if n := testkit.Metric(t, sc.Registry, "ngit_sync_own_echoes_skipped_total", nil); n < 1 {
		t.Fatalf("%v echoes skipped: every echo came after its OK, the test proves nothing", n)
	}
}
