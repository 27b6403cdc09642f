package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
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
	k := signed.NewKey()
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
			signed.WithCreatedAt(nostr.Now()-nostr.Timestamp(i/3)))) // three a second, within since_buffer
	}
	remote.Inject(missed...)
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, missed...)
}

// TestQuickReconnectSinceSubscriptionPaged: after a quick reconnect the
// live subscriptions carry since and are the catch-up: a filter that got
// nothing new is sent once with since (not again in a separate catch-up
// batch; after its EOSE once more without, live only), and
// the one filter whose answer reached the relay's cap (a root with 700
// replies written while away, on a relay capping REQs at 300) is paged on
// with until below what came, so every reply arrives.
func TestQuickReconnectSinceSubscriptionPaged(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "capped", ReqCap: 300})
	k := signed.NewKey()
	busyAnn, quietAnn := repoFor(k, "busy", own, remote), repoFor(k, "quiet", own, remote)
	busy := k.Issue(k.RepoAddress("busy"), "busy root")
	quiet := k.Issue(k.RepoAddress("quiet"), "quiet root")
	mustPublish(t, own, busyAnn, quietAnn)
	remote.Inject(busyAnn, quietAnn, busy, quiet)

	cfg := fastConfig(own)
	cfg.Sync.ValuesPerFilter = 1 // one filter per root: the quiet root's are its own
	sc := startSidecar(t, cfg)
	waitHas(t, own, busy, quiet)
	waitRelay(t, sc, remote.URL(), "first sync complete", func(r status.Relay) bool {
		return r.State == "connected" && r.PendingBatches == 0 && r.RootsConfirmed == 2
	})

	if err := remote.Stop(); err != nil {
		t.Fatal(err)
	}
	waitState(t, sc, remote.URL(), "disconnected")
	var missed []*nostr.Event
	for i := range scaled(700, 400) {
		missed = append(missed, k.Reply(busy, signed.WithContent(fmt.Sprintf("reply %d", i)),
			signed.WithCreatedAt(nostr.Now()-nostr.Timestamp(i/3))))
	}
	remote.Inject(missed...)
	restarted := time.Now()
	if err := remote.Restart(); err != nil {
		t.Fatal(err)
	}
	waitHas(t, own, missed...)
	waitRelay(t, sc, remote.URL(), "catch-up complete", func(r status.Relay) bool {
		return r.State == "connected" && r.PendingBatches == 0
	})

	// Each filter goes out once with since (the catch-up and the live
	// tail alike) and, after its EOSE, once without (limit 0: the same
	// filters live, which no longer drop what is stored late with an
	// older created_at).
	quietNamed, quietLive, busyPaged := 0, 0, 0
	for _, m := range reqsAfter(remote, restarted) {
		if strings.Contains(m.Raw, `"limit":0`) {
			quietLive += strings.Count(m.Raw, quiet.ID)
			if strings.Contains(m.Raw, `"since":`) {
				t.Errorf("live REQ with since after the catch-up: %s", m.Raw)
			}
			continue
		}
		quietNamed += strings.Count(m.Raw, quiet.ID)
		if strings.Contains(m.Raw, busy.ID) && strings.Contains(m.Raw, `"until":`) {
			busyPaged++
			if !strings.Contains(m.Raw, `"since":`) {
				t.Errorf("paging REQ without since: %s", m.Raw)
			}
		}
	}
	if quietNamed != 2 || quietLive > 2 {
		t.Errorf("the quiet root was named %d times with since and %d live after the reconnect, want 2 and at most 2 (its #e and #q filters, once each way)", quietNamed, quietLive)
	}
	if busyPaged == 0 {
		t.Error("the capped filter was not paged with until")
	}
}

// TestQuickReconnectSinceSubscriptionRefused: a relay answering the
// since-bounded live subscriptions of a quick reconnect with CLOSED, or
// never sending their EOSE, fails the catch-up (connected with historic
// sync failures), and the failed batch is retried with the REQ pager once
// the relay serves again, bringing what was written while away.
func TestQuickReconnectSinceSubscriptionRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		faults harness.Faults
		served bool // the stored events come, only the EOSE does not
	}{
		{"CLOSED", harness.Faults{ReqClosed: "error: shutting down"}, false},
		{"no EOSE", harness.Faults{NoEOSE: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			own := ownRelay(t)
			remote := harness.Start(t, harness.RelayOptions{Name: "refusing"})
			k := signed.NewKey()
			ann := repoFor(k, "refused", own, remote)
			mustPublish(t, own, ann)
			remote.Inject(ann)

			cfg := fastConfig(own)
			cfg.Sync.EOSETimeout = time.Second
			cfg.Sync.HistoricRetryBase = 2 * time.Second
			cfg.Sync.HistoricRetryMax = 2 * time.Second
			sc := startSidecar(t, cfg)
			waitRelay(t, sc, remote.URL(), "first sync complete", func(r status.Relay) bool {
				return r.State == "connected" && r.PendingBatches == 0 && r.ReposConfirmed == 1
			})
			if err := remote.Stop(); err != nil {
				t.Fatal(err)
			}
			waitState(t, sc, remote.URL(), "disconnected")
			missed := k.Issue(k.RepoAddress("refused"), "while away", signed.WithCreatedAt(nostr.Now()-60))
			remote.Inject(missed)
			remote.SetFaults(c.faults)
			if err := remote.Restart(); err != nil {
				t.Fatal(err)
			}
			waitState(t, sc, remote.URL(), "connected_historic_sync_failures")
			if !c.served && own.Has(missed.ID) {
				t.Fatal("the event arrived although the relay refused every REQ")
			}
			remote.SetFaults(harness.Faults{})
			waitHas(t, own, missed)
			waitState(t, sc, remote.URL(), "connected")
		})
	}
}

// TestTrustedRelayBackoffAndNewestFirstCap: a trusted relay goes through
// the health tracker: while it refuses connections its attempts back off
// (and it is reported with failures) instead of following the cycle
// interval; once it answers, a cycle capped at 10 events fetches the 10
// newest of the 30 it is missing, not an arbitrary subset.
func TestTrustedRelayBackoffAndNewestFirstCap(t *testing.T) {
	own := ownRelay(t)
	archive := harness.Start(t, harness.RelayOptions{Name: "archive", Negentropy: true})
	k := signed.NewKey()
	ann := repoFor(k, "archived", own)
	mustPublish(t, own, ann)
	now := time.Now()
	var issues []*nostr.Event // newest first
	for i := range 30 {
		issues = append(issues, k.Issue(k.RepoAddress("archived"), fmt.Sprintf("issue %d", i), signed.At(now.Add(-time.Duration(i)*time.Minute))))
	}
	archive.Inject(ann)
	archive.Inject(issues...)
	archive.SetFaults(harness.Faults{Refuse: true})

	cfg := fastConfig(own)
	cfg.TrustedRelays = []string{archive.URL()}
	cfg.Trusted.Interval = 3 * time.Second
	cfg.Trusted.Lookback = 24 * time.Hour
	cfg.Trusted.MaxEventsPerCycle = 10
	cfg.Health.BackoffBase = 100 * time.Millisecond
	cfg.Health.BackoffMax = 400 * time.Millisecond
	sc := startSidecar(t, cfg)

	// Backing off: more than one attempt within one cycle interval, each
	// counted as a failure of the relay's health.
	testkit.WaitFor(t, syncTimeout, "trusted relay failures counted by the health tracker", func() bool {
		f, ok := testkit.Series(t, sc.Registry, "ngit_sync_relay_failures", map[string]string{"relay": archive.URL()})
		return ok && f >= 3
	})
	if refused := archive.Stats().Refused; refused < 3 {
		t.Fatalf("%d attempts refused, want the backoff's retries", refused)
	}
	archive.SetFaults(harness.Faults{})
	testkit.WaitFor(t, syncTimeout, "a capped cycle", func() bool {
		n := 0
		for _, ev := range issues {
			if own.Has(ev.ID) {
				n++
			}
		}
		return n >= 10
	})
	for i, ev := range issues {
		if got, want := own.Has(ev.ID), i < 10; got != want {
			t.Errorf("issue %d (%s old): on the own relay %v, want %v", i, time.Duration(i)*time.Minute, got, want)
		}
	}
}

// TestTrustedRelayDialsAreBudgeted: a trusted relay's dials take tokens
// from its request budget as a remote's do. The relay refuses every
// connection and the failure backoff is 50–100 ms, so without the budget
// it would be dialled ~40 times in 4 s; with a burst of 2 and 1 a second
// it is dialled at most 2 + 1×4 (+1 for the edges).
func TestTrustedRelayDialsAreBudgeted(t *testing.T) {
	own := ownRelay(t)
	archive := harness.Start(t, harness.RelayOptions{Name: "archive-refusing", Negentropy: true})
	archive.SetFaults(harness.Faults{Refuse: true})
	cfg := fastConfig(own)
	cfg.TrustedRelays = []string{archive.URL()}
	cfg.Trusted.Interval = 50 * time.Millisecond
	cfg.Health.BackoffBase, cfg.Health.BackoffMax = 50*time.Millisecond, 100*time.Millisecond
	cfg.Health.RequestBurst, cfg.Health.RequestRate = 2, 1
	startSidecar(t, cfg)
	testkit.WaitFor(t, syncTimeout, "the trusted relay dialled", func() bool { return archive.Stats().Refused >= 1 })
	from, refusedFrom := time.Now(), archive.Stats().Refused
	time.Sleep(4 * time.Second)
	took, refused := time.Since(from), archive.Stats().Refused-refusedFrom
	if most := 2 + int(took.Seconds()) + 1; refused > most || refused < 2 {
		t.Fatalf("%d dials refused in %s, want 2 to %d (the budget's burst and rate)", refused, took.Round(time.Millisecond), most)
	}
	t.Logf("%d dials refused in %s", refused, took.Round(time.Millisecond))
}

// TestTrustedRelayNegCappedCycle: a trusted archive relay that answers
// NIP-77 with its 500 newest events only (khatru on slicestore), reconciled
// with a per-cycle limit: the cycle checks the set as a historic sync does,
// finds the events below it with a REQ and pages them, so the own relay
// ends with all 800, and the truncation is counted.
func TestTrustedRelayNegCappedCycle(t *testing.T) {
	own := ownRelay(t)
	archive := harness.Start(t, harness.RelayOptions{Name: "archive-capped", Negentropy: true, NegCap: 500})
	k := signed.NewKey()
	ann := repoFor(k, "capped-archive", own)
	mustPublish(t, own, ann)
	now := time.Now()
	var issues []*nostr.Event
	for i := range 800 {
		issues = append(issues, k.Issue(k.RepoAddress("capped-archive"), fmt.Sprintf("issue %d", i), signed.At(now.Add(-time.Duration(i)*time.Minute))))
	}
	archive.Inject(ann)
	archive.Inject(issues...)

	cfg := fastConfig(own)
	cfg.TrustedRelays = []string{archive.URL()}
	cfg.Trusted.Interval = time.Second
	cfg.Trusted.Lookback = 2 * 24 * time.Hour
	cfg.Trusted.MaxEventsPerCycle = 5000
	sc := startSidecar(t, cfg)
	waitHas(t, own, issues...)
	if v := testkit.Metric(t, sc.Registry, "ngit_sync_truncation_detected_total", map[string]string{"relay": archive.URL(), "kind": "negentropy"}); v < 1 {
		t.Errorf("truncation metric = %v, want >= 1", v)
	}
}
