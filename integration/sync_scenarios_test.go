package integration

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// relayStatus returns the status of one relay as the sidecar reports it.
func relayStatus(sc *runningSidecar, url string) (status.Relay, bool) {
	for _, r := range sc.Status().Relays {
		if r.URL == url {
			return r, true
		}
	}
	return status.Relay{}, false
}

// waitState waits until the sidecar reports relay url in state.
func waitState(t *testing.T, sc *runningSidecar, url, state string) {
	t.Helper()
	testkit.WaitFor(t, syncTimeout, fmt.Sprintf("relay %s to reach state %s", url, state), func() bool {
		r, ok := relayStatus(sc, url)
		return ok && r.State == state
	})
}

// reqsAfter returns the REQ messages relay r received after t0.
func reqsAfter(r *harness.Relay, t0 time.Time) []harness.Msg {
	var out []harness.Msg
	for _, m := range r.Received(t0) {
		if m.Type == "REQ" {
			out = append(out, m)
		}
	}
	return out
}

// TestQuickReconnect: a remote restarted within the quick-reconnect window
// delivers the events written while it was down, and the REQs after the
// reconnect carry since (or are live, limit 0).
func TestQuickReconnect(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	repo := repoFor(alice, "quick", own, remote)
	mustPublish(t, own, repo)
	issue := alice.Issue(alice.RepoAddress("quick"), "before")
	remote.Inject(repo, issue)

	sc := startSidecar(t, fastConfig(own))
	waitHas(t, own, issue)
	// The issue is a root: wait until its Layer 3 is confirmed too, so
	// that everything is caught up with since after the reconnect.
	testkit.WaitFor(t, syncTimeout, "the issue never became a confirmed root", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.State == "connected" && r.RootsConfirmed == 1
	})

	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, remote.URL(), "disconnected")
	during := alice.Issue(alice.RepoAddress("quick"), "while down")
	reply := alice.Comment(issue, nil)
	remote.Inject(during, reply)
	restarted := time.Now()
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, during, reply)
	waitState(t, sc, remote.URL(), "connected")

	reqs := reqsAfter(remote, restarted)
	if len(reqs) == 0 {
		t.Fatal("no REQ after reconnect")
	}
	for _, m := range reqs {
		if !strings.Contains(m.Raw, `"since":`) && !strings.Contains(m.Raw, `"limit":0`) {
			t.Errorf("REQ after quick reconnect without since: %s", m.Raw)
		}
	}
}

// TestStaleReconnect: beyond the quick-reconnect window the relay is synced
// from scratch, so even old events written while it was away arrive.
func TestStaleReconnect(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	repo := repoFor(alice, "stale", own, remote)
	mustPublish(t, own, repo)
	remote.Inject(repo)

	cfg := fastConfig(own)
	cfg.Sync.QuickReconnectWindow = 500 * time.Millisecond
	cfg.Sync.SinceBuffer = 0
	sc := startSidecar(t, cfg)
	waitState(t, sc, remote.URL(), "connected")

	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, remote.URL(), "disconnected")
	// Old enough that no since-based catch-up would see it.
	old := alice.Issue(alice.RepoAddress("stale"), "old", signed.At(time.Now().Add(-48*time.Hour)))
	remote.Inject(old)
	time.Sleep(cfg.Sync.QuickReconnectWindow + 200*time.Millisecond)
	restarted := time.Now()
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, old)
	fresh := false
	for _, m := range reqsAfter(remote, restarted) {
		if !strings.Contains(m.Raw, `"since":`) && !strings.Contains(m.Raw, `"limit":0`) {
			fresh = true
		}
	}
	if !fresh {
		t.Fatal("no REQ without since after a stale reconnect")
	}
}

// TestPagination: 5,000 matching events on a relay that caps REQ results
// at 500, 1,200 of them sharing one created_at: all arrive and the pager
// terminates.
func TestPagination(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "capped", ReqCap: 500})
	alice, bob := signed.NewKey(), signed.NewKey()
	repo := repoFor(alice, "big", own, remote)
	mustPublish(t, own, repo)
	addr := alice.RepoAddress("big")

	same := signed.WithCreatedAt(nostr.Timestamp(time.Now().Add(-time.Hour).Unix()))
	var evs []*nostr.Event
	base := time.Now().Add(-10 * 24 * time.Hour)
	for i := 0; i < 400; i++ {
		issue := bob.Issue(addr, fmt.Sprint("same second ", i), same)
		evs = append(evs, issue,
			bob.Status(signed.KindStatusClosed, issue, same),
			alice.Comment(repo, nil, same, signed.WithContent(fmt.Sprint("c", i))))
	}
	for i := len(evs); i < scaled(5000, 2000); i++ {
		evs = append(evs, bob.Issue(addr, fmt.Sprint("issue ", i), signed.At(base.Add(time.Duration(i)*time.Minute))))
	}
	remote.Inject(append([]*nostr.Event{repo}, evs...)...)

	sc := startSidecar(t, fastConfig(own))
	waitHas(t, own, evs...)
	waitState(t, sc, remote.URL(), "connected")
}

// TestConsolidation: 300 repositories on one relay, discovered a few at a
// time, keep the relay's open filters at or below the threshold and still
// sync everything.
func TestConsolidation(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	cfg := fastConfig(own)
	sc := startSidecar(t, cfg)

	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if r, ok := relayStatus(sc, remote.URL()); ok && int64(r.FiltersOpen) > peak.Load() {
				peak.Store(int64(r.FiltersOpen))
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	var issues []*nostr.Event
	for i := 0; i < 300; i += 10 {
		var anns []*nostr.Event
		for j := i; j < i+10; j++ {
			d := fmt.Sprintf("repo-%03d", j)
			ann := repoFor(alice, d, own, remote)
			issue := alice.Issue(alice.RepoAddress(d), "issue of "+d)
			remote.Inject(ann, issue)
			anns = append(anns, ann)
			issues = append(issues, issue)
		}
		mustPublish(t, own, anns...)
		time.Sleep(cfg.Sync.BatchWindow + 50*time.Millisecond)
	}
	waitHas(t, own, issues...)
	close(stop)
	<-done
	if p := peak.Load(); p > int64(cfg.Sync.ConsolidationThreshold) {
		t.Fatalf("open filters peaked at %d, threshold %d", p, cfg.Sync.ConsolidationThreshold)
	}
	if p := peak.Load(); p == 0 {
		t.Fatal("never observed an open filter")
	}
	if st := remote.Stats(); st.PeakSubsPerConn > cfg.Health.DefaultSubscriptionBudget {
		t.Fatalf("relay saw %d subscriptions on one connection, budget %d", st.PeakSubsPerConn, cfg.Health.DefaultSubscriptionBudget)
	}
	t.Logf("peak open filters %d, peak subscriptions per connection %d", peak.Load(), remote.Stats().PeakSubsPerConn)
}

// TestRejectedThenAccepted: an issue arrives before one of the
// repositories it belongs to is accepted; the own relay (stricter than
// usual: every repository an issue tags must be hosted) refuses it; once
// that announcement is accepted the issue is retried and lands.
func TestRejectedThenAccepted(t *testing.T) {
	strict := func(r *harness.Relay, ev *nostr.Event) (bool, string) {
		if ev.Kind == signed.KindIssue {
			for _, tag := range ev.Tags {
				if len(tag) >= 2 && tag[0] == "a" {
					parts := strings.SplitN(tag[1], ":", 3)
					if len(parts) != 3 || r.Count(nostr.Filter{Kinds: []int{30617}, Authors: []string{parts[1]}, Tags: nostr.TagMap{"d": {parts[2]}}}) == 0 {
						return false, "restricted: every tagged repository must be hosted here"
					}
				}
			}
			return true, ""
		}
		return harness.GraspPolicy()(r, ev)
	}
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: strict})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice, bob := signed.NewKey(), signed.NewKey()
	r1 := repoFor(alice, "one", own, remote)
	r2 := repoFor(bob, "two", own, remote)
	mustPublish(t, own, r1)
	issue := alice.Issue(alice.RepoAddress("one"), "spans two repos", signed.WithTags(nostr.Tag{"a", bob.RepoAddress("two")}))
	remote.Inject(r1, issue)

	sc := startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "the issue was never rejected", func() bool { return sc.Status().Rejected.Hot > 0 })
	if own.Has(issue.ID) {
		t.Fatal("issue accepted before its repository")
	}
	mustPublish(t, remote, r2) // reaches the own relay through Layer 1 live
	waitHas(t, own, r2, issue)
}

// TestOwnRelayRestart: the own relay restarts in the middle of a sync and
// nothing is lost.
func TestOwnRelayRestart(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", ReqCap: 500})
	alice := signed.NewKey()
	repo := repoFor(alice, "restart", own, remote)
	mustPublish(t, own, repo)
	var evs []*nostr.Event
	base := time.Now().Add(-time.Hour)
	for i := 0; i < scaled(3000, 600); i++ {
		evs = append(evs, alice.Issue(alice.RepoAddress("restart"), fmt.Sprint(i), signed.At(base.Add(time.Duration(i)*time.Second))))
	}
	remote.Inject(append([]*nostr.Event{repo}, evs...)...)

	startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "sync never started", func() bool {
		return own.Count(nostr.Filter{Kinds: []int{signed.KindIssue}}) > 200
	})
	if err := own.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, evs...)
}

// TestFullResync: the 23–25 h timer, shrunk, finds an event deleted from
// the own relay's store behind the sidecar's back.
func TestFullResync(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	repo := repoFor(alice, "resync", own, remote)
	mustPublish(t, own, repo)
	issue := alice.Issue(alice.RepoAddress("resync"), "keep me")
	remote.Inject(repo, issue)

	cfg := fastConfig(own)
	cfg.Sync.FullResyncMin = 2 * time.Second
	cfg.Sync.FullResyncMax = 3 * time.Second
	sc := startSidecar(t, cfg)
	waitHas(t, own, issue)
	waitState(t, sc, remote.URL(), "connected")
	own.Delete(issue.ID)
	if own.Has(issue.ID) {
		t.Fatal("delete did not work")
	}
	testkit.WaitFor(t, syncTimeout, "the full resync to restore the deleted event", func() bool { return own.Has(issue.ID) })
}

// TestSelfSubscriptionPagesCappedOwnRelay: an own relay that caps every REQ
// at 50 events (strfry caps at 500) still yields every announcement and
// root to the sidecar, which pages through its history; a reply to the
// oldest root, held only by the remote, arrives through Layer 3.
func TestSelfSubscriptionPagesCappedOwnRelay(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(), ReqCap: 50})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	const repos = 120
	base := time.Now().Add(-repos * time.Minute)
	var issues []*nostr.Event
	for i := range repos {
		d := fmt.Sprintf("r%03d", i)
		at := base.Add(time.Duration(i) * time.Minute)
		ann := alice.Announcement(d, signed.WithRelays(own.URL(), remote.URL()), signed.At(at),
			signed.WithClone("http://"+own.Addr()+"/"+alice.Npub()+"/"+d+".git"))
		issue := alice.Issue(alice.RepoAddress(d), "issue in "+d, signed.At(at.Add(30*time.Second)))
		mustPublish(t, own, ann, issue)
		remote.Inject(ann, issue)
		issues = append(issues, issue)
	}
	reply := alice.Comment(issues[0], nil)
	remote.Inject(reply)

	sc := startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "the sidecar did not learn every repository and root from the capped own relay", func() bool {
		st := sc.Status()
		return st.Repositories == repos && st.RootEvents == repos
	})
	waitHas(t, own, reply)
}
