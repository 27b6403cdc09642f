package integration

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// An own relay that cuts every TCP connection 1–3 s after it opened: the
// publisher's, the self-subscription's and the local set's. Three remote
// relays (NIP-77, REQ-only capped at 500, both) hold three hosted
// repositories' issues, patches and PRs with the comments, replies and
// statuses under them; the comments and replies tag only their root, so
// they are asked for only once discovery learned the root from the own
// relay. Nothing is lost (every event ends up on the own relay, EVENTs cut
// before their OK are sent again on a later connection), discovery learns
// every root although the self-subscription misses what is stored while it
// reconnects, and nothing is read again in full: what the own relay sends
// the sidecar stays within a small multiple of what it holds, and each
// remote relay sends at most 1.2 times what it holds.

// ownDropIssues is how many issues each repository has (scaled down under
// the race detector).
func ownDropIssues() int {
	if raceEnabled {
		return 150
	}
	return 400
}

// ownDropRepo builds a repository listing own and remotes, and its events:
// n issues a minute apart, a comment on each, a status on every other, a
// kind 1 reply on every fourth, a patch and a PR with a comment each. It
// returns the announcement, the events and the roots among them.
func ownDropRepo(own *harness.Relay, d string, n int, remotes ...*harness.Relay) (ann *nostr.Event, evs []*nostr.Event, roots []string) {
	k := harness.NewKey()
	ann = repoFor(k, d, own, remotes...)
	addr := k.RepoAddress(d)
	base := time.Now().Add(-30 * 24 * time.Hour)
	at := func(i int, off time.Duration) harness.Option {
		return harness.At(base.Add(time.Duration(i)*time.Minute + off))
	}
	issues := make([]*nostr.Event, n)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				issues[i] = k.Issue(addr, fmt.Sprint("issue ", i), at(i, 0))
			}
		}()
	}
	wg.Wait()
	patch := k.Patch(addr, at(n, 0))
	pr := k.PR(addr, harness.FakeCommit(d), at(n+1, 0))
	evs = append(evs, issues...)
	evs = append(evs, patch, pr, k.Comment(patch, nil, at(n, time.Second)), k.Comment(pr, nil, at(n+1, time.Second)))
	for i, is := range issues {
		evs = append(evs, k.Comment(is, nil, at(i, time.Second)))
		if i%2 == 0 {
			evs = append(evs, k.Status(harness.KindStatusOpen, is, at(i, 2*time.Second)))
		}
		if i%4 == 0 {
			evs = append(evs, k.Reply(is, at(i, 3*time.Second)))
		}
		roots = append(roots, is.ID)
	}
	roots = append(roots, patch.ID, pr.ID)
	return ann, evs, roots
}

func TestOwnRelayDroppingConnections(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(),
		Faults: harness.Faults{CutAfter: time.Second, CutAfterMax: 3 * time.Second, Latency: 10 * time.Millisecond}})
	if os.Getenv("NOCUT") != "" {
		own.SetFaults(harness.Faults{Latency: 10 * time.Millisecond})
	}
	neg := harness.Start(t, harness.RelayOptions{Name: "neg", Negentropy: true})
	req := harness.Start(t, harness.RelayOptions{Name: "req", ReqCap: 500})
	both := harness.Start(t, harness.RelayOptions{Name: "both", Negentropy: true, ReqCap: 500})
	remotes := []*harness.Relay{neg, req, both}
	n := ownDropIssues()

	// alpha is on neg and req (both hold all of it), beta on req, gamma on
	// both.
	var want []*nostr.Event
	var roots []string
	for _, r := range []struct {
		d      string
		relays []*harness.Relay
	}{{"alpha", []*harness.Relay{neg, req}}, {"beta", []*harness.Relay{req}}, {"gamma", []*harness.Relay{both}}} {
		ann, evs, rs := ownDropRepo(own, r.d, n, r.relays...)
		own.Inject(ann)
		for _, rel := range r.relays {
			rel.Inject(append([]*nostr.Event{ann}, evs...)...)
		}
		want = append(want, evs...)
		roots = append(roots, rs...)
	}

	cfg := fastConfig(own)
	cfg.State.Dir = t.TempDir()
	cfg.Publisher.Window = 20
	cfg.Sync.RootWait = time.Second
	start := time.Now()
	sc := startSidecar(t, cfg)
	missing := func() int {
		m := 0
		for _, ev := range want {
			if !own.Has(ev.ID) {
				m++
			}
		}
		return m
	}
	testkit.WaitFor(t, syncTimeout, "every remote event on the own relay", func() bool {
		if m := missing(); m > 0 {
			if time.Since(start)%(5*time.Second) < testkit.PollInterval {
				st := sc.Status()
				t.Logf("after %s: %d of %d events missing; %d of %d roots known", time.Since(start).Round(time.Second), m, len(want), st.RootEvents, len(roots))
			}
			return false
		}
		return true
	})
	testkit.WaitFor(t, syncTimeout, "discovery knows every root", func() bool {
		return sc.Status().RootEvents == len(roots)
	})
	took := time.Since(start)

	// The own relay's side: connections, EVENTs cut before their OK and
	// sent again, what it sent the sidecar.
	conns, cut, resent := 0, 0, 0
	okd := map[string]bool{}
	for _, m := range own.Sent(start) {
		if m.Type == "OK" {
			okd[m.EventID] = true
		}
	}
	type sending struct{ conn int }
	firstConn := map[string]int{}
	later := map[string]bool{}
	for _, m := range own.Received(start) {
		switch m.Type {
		case harness.TypeConnect:
			conns++
		case "EVENT":
			if c, ok := firstConn[m.EventID]; !ok {
				firstConn[m.EventID] = m.Conn
			} else if c != m.Conn {
				later[m.EventID] = true
			}
		}
	}
	_ = sending{}
	resent = len(later)
	sentEvents := 0
	for _, m := range own.Sent(start) {
		if m.Type == "EVENT" {
			sentEvents++
		}
	}
	t.Logf("converged in %s over %d own relay connections; %d of %d events sent again on a later connection (%d cut before an OK: %d)",
		took.Round(time.Millisecond), conns, resent, len(firstConn), cut, len(firstConn)-len(okd))
	t.Logf("the own relay holds %d events and sent the sidecar %d", own.Len(), sentEvents)
	if conns < 4 {
		t.Errorf("only %d connections to the own relay: the cuts never came into play", conns)
	}
	// Every event the own relay holds was read back at most a few times:
	// the first fill, the self-subscription's pages and echoes, the
	// reconciliations' reads. A reread of everything on every reconnect
	// sends it once per connection.
	if limit := 3 * own.Len(); sentEvents > limit {
		t.Errorf("the own relay sent the sidecar %d events for its %d (limit %d): reconnects read it again", sentEvents, own.Len(), limit)
	}
	for _, r := range remotes {
		sent := 0
		for _, m := range r.Sent(start) {
			if m.Type == "EVENT" {
				sent++
			}
		}
		t.Logf("%s holds %d events and sent the sidecar %d", r.Options().Name, r.Len(), sent)
		if sent*10 > r.Len()*12 {
			t.Errorf("%s sent the sidecar %d events for its %d: more than 1.2 times", r.Options().Name, sent, r.Len())
		}
	}
}
