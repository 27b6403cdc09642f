package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestRootsPendingAtStopLearnedAfterRestart: roots the sidecar published
// whose self-subscription batch was not applied when it stopped are in
// the saved local index but not in the saved repository index, and they
// are older than the restart's paging of the own relay reaches back. The
// restarted sidecar still learns them and syncs the discussion under them.
func TestRootsPendingAtStopLearnedAfterRestart(t *testing.T) {
	w := newStateWorld(t, 5, 2)
	dir := t.TempDir()
	sc := startSidecar(t, stateConfig(t, w.own, dir))
	waitHas(t, w.own, w.all...)
	sc.Stop(t)

	// A second repository, announced on the own relay while the sidecar
	// is down; its history, an hour old, is on the remote relay only.
	repo2 := repoFor(w.alice, "proj2", w.own, w.remote)
	mustPublish(t, w.own, repo2)
	addr := w.alice.RepoAddress("proj2")
	old := signed.At(time.Now().Add(-time.Hour))
	var roots, discussion []*nostr.Event
	for i := range 3 {
		root := w.bob.Issue(addr, fmt.Sprintf("pending %d", i), old)
		roots = append(roots, root)
		discussion = append(discussion, w.alice.Comment(root, nil, old))
	}
	w.remote.Inject(roots...)
	w.remote.Inject(discussion...)

	// Second run: the sidecar reads the announcement with the own relay's
	// history and syncs the repository's roots, but its live self batches
	// are never applied (the window is an hour and no quiet spell ends
	// one): it stops with the roots on the own relay and in its local
	// index, not in its repository index.
	cfg := stateConfig(t, w.own, dir)
	cfg.Sync.BatchWindow, cfg.Sync.BatchQuiet = time.Hour, 0
	sc2 := startSidecar(t, cfg)
	waitHas(t, w.own, roots...)
	testkit.WaitFor(t, syncTimeout, "the roots in the local index", func() bool {
		for _, ev := range roots {
			if !sc2.LocalIndex().Has(ev.ID) {
				return false
			}
		}
		return true
	})
	time.Sleep(5 * cfg.State.FlushInterval)
	for _, ev := range discussion {
		if w.own.Has(ev.ID) {
			t.Fatal("the discussion was synced before the restart: the roots were learned, the test proves nothing")
		}
	}
	sc2.Stop(t)

	startSidecar(t, stateConfig(t, w.own, dir))
	waitHas(t, w.own, discussion...)
}
