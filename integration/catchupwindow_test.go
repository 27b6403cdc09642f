package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestQuickReconnectReconcilesWindow: on a NIP-77 relay a quick
// reconnect's subscriptions ask from the disconnection only, and the
// sync.since_buffer before it is reconciled: an event stored while the
// sidecar was away with a created_at minutes old arrives, and the events
// of that span it had already are not sent again (a REQ with since =
// disconnection − since_buffer sent every one); once caught up the live
// subscriptions drop their since.
func TestQuickReconnectReconcilesWindow(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	alice := signed.NewKey()
	repo := repoFor(alice, "window", own, remote)
	mustPublish(t, own, repo)
	var recent []*nostr.Event
	for i := range 60 {
		recent = append(recent, alice.Issue(alice.RepoAddress("window"), fmt.Sprint("recent ", i), signed.At(time.Now().Add(-10*time.Minute+time.Duration(i)*time.Second))))
	}
	remote.Inject(append([]*nostr.Event{repo}, recent...)...)

	sc := startSidecar(t, fastConfig(own))
	waitHas(t, own, recent...)
	testkit.WaitFor(t, syncTimeout, "the issues never became confirmed roots", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.State == "connected" && r.RootsConfirmed == len(recent)
	})
	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, remote.URL(), "disconnected")
	late := alice.Issue(alice.RepoAddress("window"), "stored late", signed.At(time.Now().Add(-5*time.Minute)))
	reply := alice.Comment(recent[0], nil)
	remote.Inject(late, reply)
	sentBefore := remote.Stats().Sent["EVENT"]
	restarted := time.Now()
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, late, reply)
	waitState(t, sc, remote.URL(), "connected")
	testkit.WaitFor(t, syncTimeout, "the catch-up never completed", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.State == "connected" && r.PendingBatches == 0
	})

	window := false
	for _, m := range remote.Received(restarted) {
		if m.Type == "NEG-OPEN" && strings.Contains(m.Raw, `"until":`) && strings.Contains(m.Raw, `"since":`) {
			window = true
		}
	}
	if !window {
		t.Error("no NEG-OPEN of the span before the disconnection")
	}
	// After the catch-up the subscriptions are live without since: an
	// event published now with a created_at an hour old (another relay's
	// history synced into this one) arrives; live filters that kept
	// since = disconnection − 2 s dropped it.
	old := alice.Issue(alice.RepoAddress("window"), "published late, signed an hour ago", signed.At(time.Now().Add(-time.Hour)))
	mustPublish(t, remote, old)
	waitHas(t, own, old)
	sentBefore++

	// late, reply and the announcement (Layer 1 asks since the
	// disconnection less consolidation_overlap; the test's announcement
	// may be that recent), not the 60 issues.
	if n := remote.Stats().Sent["EVENT"] - sentBefore; n > 5 {
		t.Errorf("the remote sent %d events after the reconnect for the 2 written while away: the catch-up read again what was synced", n)
	}
}
