package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestLiveLayer3ByKind: after a quick reconnect the live Layer 3 asks
// comments by #K and PR updates by kind instead of naming every root under
// #E; a comment on a known root published live arrives, one on a foreign
// root that the same kind filter brings is dropped on arrival. The
// catch-up batch asks comments written while away the same way.
func TestLiveLayer3ByKind(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := repoFor(alice, "bykind", own, remote)
	mustPublish(t, own, repo)
	issue := alice.Issue(alice.RepoAddress("bykind"), "known")
	remote.Inject(repo, issue)
	foreignRepo := bob.Announcement("elsewhere", signed.WithRelays(remote.URL()))
	foreignIssue := bob.Issue(bob.RepoAddress("elsewhere"), "foreign")
	remote.Inject(foreignRepo, foreignIssue)

	sc := startSidecar(t, fastConfig(own))
	waitHas(t, own, issue)
	testkit.WaitFor(t, syncTimeout, "the issue never became a confirmed root", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.State == "connected" && r.RootsConfirmed == 1
	})
	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, remote.URL(), "disconnected")
	// Written while the sidecar was away: the catch-up batch asks them by
	// #K with since; the nested comment names the root only under E.
	downTop := alice.Comment(issue, nil)
	downNested := bob.Comment(issue, downTop)
	foreignTop := bob.Comment(foreignIssue, nil)
	downForeign := alice.Comment(foreignIssue, foreignTop)
	remote.Inject(foreignTop, downTop, downNested, downForeign)
	restarted := time.Now()
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, remote.URL(), "connected")
	waitHas(t, own, downTop, downNested)
	// Live REQs (since the disconnect: they are the catch-up too) ask
	// comments by #K and name the root under e and q only.
	testkit.WaitFor(t, syncTimeout, "no live #K subscription after the reconnect", func() bool {
		for _, m := range reqsAfter(remote, restarted) {
			if strings.HasPrefix(m.SubID, "l") && strings.Contains(m.Raw, `"since":`) && strings.Contains(m.Raw, `"#K":`) {
				return true
			}
		}
		return false
	})
	for _, m := range reqsAfter(remote, restarted) {
		if strings.Contains(m.Raw, `"#K":`) && strings.Contains(m.Raw, `"#E":`) {
			t.Errorf("live REQ after a quick reconnect names roots under #E: %s", m.Raw)
		}
	}

	// Not the ids of the comments above (same author, parent and second).
	foreign := bob.Comment(foreignIssue, foreignTop, signed.WithContent("live foreign reply"))
	known := bob.Comment(issue, nil)
	nested := alice.Comment(issue, known)
	noMatch := func() float64 {
		return testkit.Metric(t, sc.Registry, "ngit_sync_events_invalid_total", map[string]string{"reason": "no_match"})
	}
	before := noMatch()
	mustPublish(t, remote, foreign, known, nested)
	waitHas(t, own, known, nested)
	// The #K subscription brought the foreign reply too: it was dropped
	// on arrival, not published.
	testkit.WaitFor(t, syncTimeout, "the reply on a foreign root was not dropped as no_match", func() bool {
		return noMatch() >= before+1
	})
	if own.Has(foreign.ID) || own.Has(downForeign.ID) || own.Has(foreignTop.ID) {
		t.Fatal("a comment on a foreign root reached the own relay through the #K subscription")
	}
}
