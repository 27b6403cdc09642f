package integration

import (
	"fmt"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/harness"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/internal/testkit"
)

// waitRelay waits until the sidecar reports relay url in a state for which
// ok holds.
func waitRelay(t *testing.T, sc *runningSidecar, url, what string, ok func(status.Relay) bool) {
	t.Helper()
	testkit.WaitFor(t, syncTimeout, url+": "+what, func() bool {
		for _, r := range sc.Status().Relays {
			if r.URL == url {
				return ok(r)
			}
		}
		return false
	})
}

// TestQuickReconnectCatchUpPagedPastCap: a remote relay that caps every REQ
// at 500 events goes away after the first sync and comes back within the
// quick-reconnect window holding 1,200 new events of the repository. The
// catch-up (since = disconnect − since_buffer) is paged like any historic
// REQ: every event arrives, not the newest 500.
func TestQuickReconnectCatchUpPagedPastCap(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "capped", ReqCap: 500})
	k := harness.NewKey()
	ann := repoFor(k, "busy", own, remote)
	first := k.Issue(k.RepoAddress("busy"), "before")
	mustPublish(t, own, ann)
	remote.Inject(ann, first)

	cfg := fastConfig(own)
	cfg.Negentropy.Enabled = false // the first sync pages too
	sc := startSidecar(t, cfg)
	waitHas(t, own, ann, first)
	waitRelay(t, sc, remote.URL(), "first sync complete", func(r status.Relay) bool {
		return r.State == "connected" && r.PendingBatches == 0 && r.ReposConfirmed == 1
	})

	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	n := scaled(1200, 600)
	var missed []*nostr.Event
	for i := range n {
		missed = append(missed, k.Issue(k.RepoAddress("busy"), fmt.Sprintf("while away %d", i),
			harness.WithCreatedAt(nostr.Now()-nostr.Timestamp(i/3)))) // three a second, within since_buffer
	}
	remote.Inject(missed...)
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, missed...)
}
