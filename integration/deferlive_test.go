package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/harness"
	"github.com/grasp-sync/grasp-sync/internal/testkit"
)

// TestDeferredLiveFiltersCatchUp: during a relay's first sync the live
// per-root filters of a root wait for the relay's pending batches
// (sync.live_defer_max); a comment published on the remote after the
// root's history was reconciled, while nothing live asks for it, still
// reaches the own relay: the consolidation that opens the root's live
// filters asks with since reaching back to when the root was added, and
// the relay returns the comment as a stored event. The remote answers REQs
// 2 s late (NIP-77 is not delayed), so the root's batch stays pending.
func TestDeferredLiveFiltersCatchUp(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true, Faults: harness.Faults{Delay: 2 * time.Second}})
	alice, bob := harness.NewKey(), harness.NewKey()
	repo := repoFor(alice, "deferred", own, remote)
	issue := alice.Issue(alice.RepoAddress("deferred"), "known root", harness.At(time.Now().Add(-time.Hour)))
	old := bob.Comment(issue, nil, harness.At(time.Now().Add(-time.Hour)))
	mustPublish(t, own, repo, issue)
	remote.Inject(repo, issue, old)

	start := time.Now()
	sc := startSidecar(t, fastConfig(own))
	// The root's #e filter was reconciled: the relay answered its NEG-OPEN.
	testkit.WaitFor(t, syncTimeout, "the root's history was never reconciled", func() bool {
		opened := map[string]bool{}
		for _, m := range remote.Received(start) {
			if m.Type == "NEG-OPEN" && strings.Contains(m.Raw, `"#e":["`+issue.ID) {
				opened[m.SubID] = true
			}
		}
		for _, m := range remote.Sent(start) {
			if opened[m.SubID] && (m.Type == "NEG-MSG" || m.Type == "NEG-ERR") {
				return true
			}
		}
		return false
	})
	for _, m := range reqsAfter(remote, start) {
		if strings.Contains(m.Raw, issue.ID) {
			t.Fatalf("a REQ named the root while the relay's batches were pending: %s", m.Raw)
		}
	}
	if r, _ := relayStatus(sc, remote.URL()); r.PendingBatches == 0 || r.State != "syncing" {
		t.Fatalf("relay %s with %d pending batches, want syncing with the root's batch pending", r.State, r.PendingBatches)
	}
	published := time.Now()
	reply := alice.Comment(issue, nil)
	mustPublish(t, remote, reply)

	waitHas(t, own, old, reply)
	waitState(t, sc, remote.URL(), "connected")
	// It came with the REQ that opened the root's live filters, since
	// before the root was added.
	var live []harness.Msg
	for _, m := range reqsAfter(remote, start) {
		if strings.Contains(m.Raw, issue.ID) {
			live = append(live, m)
		}
	}
	if len(live) == 0 || live[0].Time.Before(published) {
		t.Fatalf("REQs naming the root %v, want the first after the comment was published", live)
	}
	for _, f := range reqFilters(t, live[0].Raw) {
		if slices.Contains(f.Tags["e"], issue.ID) && (f.Since == nil || *f.Since > nostr.Timestamp(start.Unix())) {
			t.Fatalf("the root's live filter %v has no since before the sidecar started (%d)", f, start.Unix())
		}
	}
}

// reqFilters are the filters of a REQ message.
func reqFilters(t *testing.T, raw string) []nostr.Filter {
	t.Helper()
	var msg []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &msg); err != nil || len(msg) < 3 {
		t.Fatalf("not a REQ: %s (%v)", raw, err)
	}
	fs := make([]nostr.Filter, len(msg)-2)
	for i, m := range msg[2:] {
		if err := json.Unmarshal(m, &fs[i]); err != nil {
			t.Fatalf("REQ filter %s: %v", m, err)
		}
	}
	return fs
}
