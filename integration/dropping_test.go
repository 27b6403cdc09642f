package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// Relays that drop every connection but answer while it lasts: one speaks
// NIP-77 and cuts each TCP connection 1–3 s after it opened, one speaks
// only REQ and closes each connection with status 1011 after it sent 400
// events. Each holds a few thousand events about a hosted repository.
// The sidecar gets every event, resuming where each dropped connection
// left off instead of starting over, and reconnecting after the short
// reconnect wait because its connections achieved something: it needs at
// most twice the connections a naive client needs that reads everything
// with REQs, newest first, and on a drop reconnects at once and asks
// again below the oldest event it got.

// droppingIssues is how many issues each dropping relay holds (a comment
// on every fourth: 2,500 events).
const droppingIssues = 2000

// naiveResult is what naiveResume did.
type naiveResult struct {
	conns int
	took  time.Duration
	got   map[string]bool
}

// naiveResume reads every event of the relay at url as a simple resuming
// client does: REQs of pageSize newest first, each below the oldest event
// seen so far (until = its created_at: the ties at that second come again
// and are dropped as seen); when the connection drops it reconnects at
// once and asks on from there. It stops at the first REQ that ends with
// EOSE and brings nothing new. With publishTo set it publishes each page's
// new events there (100 awaiting their OK) before asking for the next: a
// naive fetch-and-publish loop, whose time counts the events reaching an
// own relay as the sidecar's does.
func naiveResume(t testing.TB, url, publishTo string, pageSize int) naiveResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	res := naiveResult{got: map[string]bool{}}
	var until *nostr.Timestamp
	start := time.Now()
	for seq := 0; ctx.Err() == nil; {
		c, err := harness.Dial(ctx, url)
		if err != nil {
			continue
		}
		res.conns++
		for {
			seq++
			page, err := c.Req(ctx, fmt.Sprint("naive", seq), nostr.Filter{Until: until, Limit: pageSize})
			var fresh []*nostr.Event
			for _, ev := range page.Events {
				if !res.got[ev.ID] {
					res.got[ev.ID] = true
					fresh = append(fresh, ev)
				}
				if until == nil || ev.CreatedAt < *until {
					ts := ev.CreatedAt
					until = &ts
				}
			}
			if publishTo != "" && len(fresh) > 0 {
				if err := harness.PublishWindow(ctx, publishTo, 100, fresh...); err != nil {
					t.Errorf("naive client: publishing to %s: %v", publishTo, err)
					return res
				}
			}
			if err != nil {
				break // dropped: reconnect at once
			}
			if page.EOSE && len(fresh) == 0 {
				c.Close()
				res.took = time.Since(start)
				return res
			}
		}
		c.Close()
	}
	// Errorf, not Fatalf: it may run beside another on a goroutine of its
	// own; the caller finds fewer events than the relay holds.
	t.Errorf("naive client on %s: not done within %s (%d events, %d connections)", url, syncTimeout, len(res.got), res.conns)
	return res
}

// connectsBetween counts the connections relay r accepted in [from, to].
func connectsBetween(r *harness.Relay, from, to time.Time) int {
	n := 0
	for _, m := range r.Received(from) {
		if m.Type == harness.TypeConnect && !m.Time.After(to) {
			n++
		}
	}
	return n
}

// droppingRepo publishes a hosted repository listing remote to own and
// injects droppingIssues issues (a minute apart) and a comment on every
// fourth into remote, signed in parallel; it returns the remote's events.
func droppingRepo(t testing.TB, own, remote *harness.Relay, d string) []*nostr.Event {
	t.Helper()
	alice := signed.NewKey()
	repo := repoFor(alice, d, own, remote)
	mustPublish(t, own, repo)
	base := time.Now().Add(-20 * 24 * time.Hour)
	evs := make([]*nostr.Event, droppingIssues)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < droppingIssues; i += 4 {
				evs[i] = alice.Issue(alice.RepoAddress(d), fmt.Sprint("issue ", i), signed.At(base.Add(time.Duration(i)*time.Minute)))
			}
		}()
	}
	wg.Wait()
	comments := make([]*nostr.Event, 0, droppingIssues/4)
	for i := 0; i < droppingIssues; i += 4 {
		comments = append(comments, alice.Comment(evs[i], nil, signed.At(base.Add(time.Duration(i)*time.Minute+time.Second))))
	}
	all := append([]*nostr.Event{repo}, append(evs, comments...)...)
	remote.Inject(all...)
	return all
}

func TestDroppingRelaysConverge(t *testing.T) {
	own := ownRelay(t)
	cutter := harness.Start(t, harness.RelayOptions{Name: "cutter", Negentropy: true, ReqCap: 500,
		Faults: harness.Faults{CutAfter: time.Second, CutAfterMax: 3 * time.Second}})
	closer := harness.Start(t, harness.RelayOptions{Name: "closer", ReqCap: 500,
		Faults: harness.Faults{CloseAfterEvents: 400}})
	relays := []*harness.Relay{cutter, closer}
	want := map[*harness.Relay][]*nostr.Event{
		cutter: droppingRepo(t, own, cutter, "cut"),
		closer: droppingRepo(t, own, closer, "closed"),
	}

	naive := map[*harness.Relay]naiveResult{}
	naiveConns := 0
	for _, r := range relays {
		from := time.Now()
		n := naiveResume(t, r.URL(), "", 500)
		if len(n.got) != r.Len() {
			t.Fatalf("naive client got %d of the %d events of %s", len(n.got), r.Len(), r.URL())
		}
		naive[r] = n
		naiveConns += connectsBetween(r, from, time.Now())
		t.Logf("%s: the naive client read its %d events over %d connections in %s", r.Options().Name, len(n.got), n.conns, n.took.Round(time.Millisecond))
	}

	// The health settings are the defaults (a 5 s first backoff, a 5
	// minute stability period): a connection that delivered counts as
	// no failure, so they never come into play.
	cfg := fastConfig(own)
	def := health.DefaultConfig()
	cfg.Health.BackoffBase, cfg.Health.BackoffMax, cfg.Health.StabilityPeriod = def.BackoffBase, def.BackoffMax, def.StabilityPeriod
	log, logs := observedLogger(t)
	start := time.Now()
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	maxFailures := 0
	done := map[*harness.Relay]time.Time{} // when all of the relay's events were on the own relay
	missing := func() int {
		total := 0
		for _, r := range relays {
			n := 0
			for _, ev := range want[r] {
				if !own.Has(ev.ID) {
					n++
				}
			}
			if n == 0 && done[r].IsZero() {
				done[r] = time.Now()
			}
			total += n
			if st, ok := relayStatus(sc, r.URL()); ok {
				maxFailures = max(maxFailures, st.Failures)
			}
		}
		return total
	}
	testkit.WaitFor(t, syncTimeout, "every event of the dropping relays on the own relay", func() bool {
		if n := missing(); n > 0 {
			if time.Since(start) > 20*time.Second && time.Since(start)%(5*time.Second) < testkit.PollInterval {
				t.Logf("after %s: %d events missing; connections %d and %d", time.Since(start).Round(time.Second), n,
					connectsBetween(cutter, start, time.Now()), connectsBetween(closer, start, time.Now()))
			}
			return false
		}
		return true
	})
	// The connections each relay took until its events were all there.
	sidecarConns := 0
	for _, r := range relays {
		sent, reqs, negs := 0, 0, 0
		for _, m := range r.Sent(start) {
			if m.Type == "EVENT" && !m.Time.After(done[r]) {
				sent++
			}
		}
		for _, m := range r.Received(start) {
			switch {
			case m.Time.After(done[r]):
			case m.Type == "REQ":
				reqs++
			case m.Type == "NEG-OPEN":
				negs++
			}
		}
		conns := connectsBetween(r, start, done[r])
		sidecarConns += conns
		t.Logf("%s: all %d events on the own relay after %s; it sent the sidecar %d events over %d connections (%d REQs, %d NEG-OPENs)",
			r.Options().Name, r.Len(), done[r].Sub(start).Round(time.Millisecond), sent, conns, reqs, negs)
		// Each event once per relay, ties at a page's edge aside: starting
		// over on every reconnect sent most events several times, and
		// sweeping a root's `E` filter beside its `e` filter every NIP-22
		// comment twice.
		if sent*5 > r.Len()*6 {
			t.Errorf("%s sent the sidecar %d events for its %d (%.2fx, more than 1.2x): it was asked again what it had sent", r.Options().Name, sent, r.Len(), float64(sent)/float64(r.Len()))
		}
		// /status says the same: events received against events new.
		if st, ok := relayStatus(sc, r.URL()); !ok || st.EventsNew == 0 || st.EventsNew > st.EventsReceived || st.EventsNew > uint64(r.Len()) {
			t.Errorf("%s: /status events_new %d against events_received %d, for %d events held", r.Options().Name, st.EventsNew, st.EventsReceived, r.Len())
		} else {
			t.Logf("%s: /status %d events received, %d new", r.Options().Name, st.EventsReceived, st.EventsNew)
		}
	}
	took, naiveTook := max(done[cutter].Sub(start), done[closer].Sub(start)), naive[cutter].took+naive[closer].took
	t.Logf("converged in %s with %d connections; the naive client took %s with %d: %.1fx its time (BENCHMARKS.md, \"Relays that drop every connection\")",
		took.Round(time.Millisecond), sidecarConns, naiveTook.Round(time.Millisecond), naiveConns, took.Seconds()/naiveTook.Seconds())
	if sidecarConns > 2*naiveConns {
		t.Errorf("the sidecar needed %d connections, more than twice the naive client's %d", sidecarConns, naiveConns)
	}
	if maxFailures > 1 {
		t.Errorf("a relay's failure count reached %d: connections that delivered counted as failures", maxFailures)
	}
	// A relay that closed (a close frame) a connection that had delivered
	// events to its historic sync is reconnected after health.resume_wait,
	// not health.reconnect_wait; one that cuts connections still waits.
	for _, r := range []*harness.Relay{closer} {
		quick := 0
		for _, e := range logs.FilterMessageSnippet("dropped a connection that had answered").All() {
			wait, _ := e.ContextMap()["retry_in"].(time.Duration)
			if e.ContextMap()["relay"] == r.URL() && wait <= time.Duration(float64(cfg.Health.ResumeWait)*(1+cfg.Health.Jitter)) {
				quick++
			}
		}
		if quick == 0 {
			t.Errorf("%s: no drop was reconnected after health.resume_wait (%s)", r.Options().Name, cfg.Health.ResumeWait)
		}
	}
	if fresh := logs.FilterMessageSnippet("fresh sync").Len(); fresh != 2 {
		t.Errorf("%d fresh syncs, want one per relay: a reconnect after a drop resumes", fresh)
	}
	if n := logs.FilterMessageSnippet("resuming").Len(); n == 0 {
		t.Error("no reconnect said it was resuming")
	}
	for _, r := range relays {
		if lines := linesAbout(logs, r.URL()); len(lines) > 0 {
			t.Logf("%s: %d log lines, the first: %s", r.Options().Name, len(lines), strings.Join(lines[:min(3, len(lines))], " | "))
		}
	}
}
