package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
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
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := repoFor(alice, "deferred", own, remote)
	issue := alice.Issue(alice.RepoAddress("deferred"), "known root", signed.At(time.Now().Add(-time.Hour)))
	old := bob.Comment(issue, nil, signed.At(time.Now().Add(-time.Hour)))
	mustPublish(t, own, repo, issue)
	remote.Inject(repo, issue, old)

	start := time.Now()
	cfg := fastConfig(own)
	// The relay holds every answer 2 s, one after another: a consolidation
	// asking Layer 1, the kind subscription and the per-root filters gets
	// its last EOSE well after fastConfig's EOSE timeout on a loaded machine.
	cfg.Sync.EOSETimeout = 30 * time.Second
	sc := startSidecar(t, cfg)
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

// TestKindSubscriptionKeptAcrossConsolidations: consolidations ask Layer 3
// per root by e and q only and keep the relay's kind subscription (#K
// comments, PR updates) open: it is sent once per connection, however many
// consolidations follow, and a nested comment naming its root only under E
// arrives through it; one on a foreign root is dropped on arrival.
func TestKindSubscriptionKeptAcrossConsolidations(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := repoFor(alice, "kinds-0", own, remote)
	issue := alice.Issue(alice.RepoAddress("kinds-0"), "known root")
	mustPublish(t, own, repo)
	remote.Inject(repo, issue)
	foreignRepo := bob.Announcement("elsewhere", signed.WithRelays(remote.URL()))
	foreignIssue := bob.Issue(bob.RepoAddress("elsewhere"), "foreign")
	remote.Inject(foreignRepo, foreignIssue)

	cfg := fastConfig(own)
	cfg.Sync.ConsolidationThreshold = 4 // a consolidation for each repository added below
	start := time.Now()
	sc := startSidecar(t, cfg)
	waitHas(t, own, issue)
	testkit.WaitFor(t, syncTimeout, "the root never became confirmed", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.State == "connected" && r.RootsConfirmed == 1
	})
	// Steady state: each repository added goes over the threshold.
	var later []*nostr.Event
	for i := 1; i <= 3; i++ {
		d := fmt.Sprintf("kinds-%d", i)
		ann := repoFor(alice, d, own, remote)
		iss := alice.Issue(alice.RepoAddress(d), "issue of "+d)
		remote.Inject(ann, iss)
		mustPublish(t, own, ann)
		waitHas(t, own, iss)
		later = append(later, iss)
		testkit.WaitFor(t, syncTimeout, "the new root never became confirmed", func() bool {
			r, _ := relayStatus(sc, remote.URL())
			return r.State == "connected" && r.RootsConfirmed == 1+i
		})
	}
	layer1, kinds := 0, 0
	for _, m := range reqsAfter(remote, start) {
		switch m.SubID {
		case "l1":
			layer1++
		case "lk":
			kinds++
		}
		if strings.Contains(m.Raw, `"since":`) && strings.Contains(m.Raw, `"#E":`) {
			t.Errorf("a consolidation's REQ names roots under #E: %s", m.Raw)
		}
	}
	if layer1 < 3 || kinds != 1 {
		t.Fatalf("Layer 1 sent %d times (a consolidation each), the kind subscription %d times; want 3 or more, and once", layer1, kinds)
	}

	top := bob.Comment(issue, nil)
	nested := alice.Comment(issue, top) // names the root under E only
	// A reply to a comment on a foreign root: the kind filter asks
	// replies to comments (#k 1111) and brings it; a top-level comment is
	// its root's #e filter's.
	foreignTop := bob.Comment(foreignIssue, nil)
	foreign := alice.Comment(foreignIssue, foreignTop)
	mustPublish(t, remote, top, nested, foreignTop, foreign)
	waitHas(t, own, top, nested)
	testkit.WaitFor(t, syncTimeout, "the comment on a foreign root was not dropped as no_match", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_events_invalid_total", map[string]string{"reason": "no_match"}) >= 1
	})
	if own.Has(foreign.ID) || own.Has(foreignTop.ID) {
		t.Fatal("a comment on a foreign root reached the own relay through the kind subscription")
	}
}
