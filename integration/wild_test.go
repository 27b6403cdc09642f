package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// Relays as they are (README.md, "Remote relays as they are"): each test
// runs a fresh sidecar against one misbehaving harness relay and checks
// that the own relay ends with every event the remote holds about the
// hosted repository, and that the relay is never reported synced while
// one is missing.

// wildRepo seeds a repository with n issues (and a comment on every
// fourth) on remote, the announcement hosted by own.
func wildRepo(t *testing.T, own, remote *harness.Relay, d string, n int) []*nostr.Event {
	t.Helper()
	repo, evs := universeRepo(t, own, remote, d, n)
	return append([]*nostr.Event{repo}, evs...)
}

// waitSyncedComplete waits until the sidecar reports remote "connected"
// with nothing pending, and requires that by then the sidecar has received
// from the remote at least as many events as the remote holds for the
// repository directly (its issues): a relay
// reported synced after a silently truncated sync fails here. Then every
// event must reach the own relay (the ingest pipeline is asynchronous).
func waitSyncedComplete(t *testing.T, sc *runningSidecar, own, remote *harness.Relay, evs []*nostr.Event, ownHad ...*nostr.Event) {
	t.Helper()
	var r status.Relay
	testkit.WaitFor(t, syncTimeout, "relay synced", func() bool {
		var ok bool
		r, ok = relayStatus(sc, remote.URL())
		return ok && r.State == "connected" && r.PendingBatches == 0
	})
	// Replies to issues are asked for once the issues reached the own
	// relay and came back through the self-subscription, possibly after a
	// first "connected"; the issues themselves are asked for at once.
	issues := 0
	for _, ev := range evs {
		if ev.Kind == nip34.KindIssue {
			issues++
		}
	}
	issues -= len(ownHad)
	if int(r.EventsReceived) < issues {
		t.Fatalf("relay reported %q after receiving %d events; it holds %d issues the own relay lacked", r.State, r.EventsReceived, issues)
	}
	waitHas(t, own, evs...)
}

// waitRootsConfirmed waits until the sidecar has confirmed remote for
// every root event (issue, root patch, PR) of evs with no batch pending:
// "connected" can come first, before the roots have come back through the
// self-subscription, and their per-root batches (paging, finite) then
// still run.
func waitRootsConfirmed(t *testing.T, sc *runningSidecar, remote *harness.Relay, evs []*nostr.Event) {
	t.Helper()
	roots := 0
	for _, ev := range evs {
		if _, ok := nip34.RootRefs(ev); ok {
			roots++
		}
	}
	testkit.WaitFor(t, syncTimeout, fmt.Sprintf("all %d roots confirmed with nothing pending", roots), func() bool {
		r, ok := relayStatus(sc, remote.URL())
		return ok && r.State == "connected" && r.PendingBatches == 0 && r.RootsConfirmed >= roots
	})
}

// logReqs logs up to n of the REQs and CLOSEDs remote saw since at: what
// ran when nothing should have.
func logReqs(t *testing.T, remote *harness.Relay, at time.Time, n int) {
	t.Helper()
	var msgs []harness.Msg
	for _, m := range remote.Received(at) {
		if m.Type == "REQ" {
			msgs = append(msgs, m)
		}
	}
	for _, m := range remote.Sent(at) {
		if m.Type == "CLOSED" {
			msgs = append(msgs, m)
		}
	}
	slices.SortFunc(msgs, func(a, b harness.Msg) int { return a.Time.Compare(b.Time) })
	for _, m := range msgs[:min(n, len(msgs))] {
		t.Logf("%s conn %d: %.200s", m.Time.Format("15:04:05.000"), m.Conn, m.Raw)
	}
}

// TestWildNegentropyCapped: khatru on its slicestore advertises NIP-77 but
// answers every query, negentropy sessions included, with its 500 newest
// events. The truncation is detected and the rest is fetched anyway.
func TestWildNegentropyCapped(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "slicestore", Negentropy: true, NegCap: 500, SilentReqCap: 500})
	evs := wildRepo(t, own, remote, "capped", scaled(1300, 700))
	sc := startSidecar(t, fastConfig(own))
	waitSyncedComplete(t, sc, own, remote, evs)
	r, _ := relayStatus(sc, remote.URL())
	if r.Truncation == "" {
		t.Errorf("status shows no truncation for the capped relay: %+v", r)
	}
	if v := testkit.Metric(t, sc.Registry, "ngit_sync_truncation_detected_total", map[string]string{"relay": remote.URL(), "kind": "negentropy"}); v < 1 {
		t.Errorf("metric = %v, want >= 1", v)
	}
}

// TestWildLimitFallback: ngit-relay answers a REQ whose limit is above
// 1000 with 250 events, silently. A pager asking for 2000 per page still
// gets everything.
func TestWildLimitFallback(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "ngit-relay", DefaultLimit: 250, MaxHonouredLimit: 1000})
	evs := wildRepo(t, own, remote, "fallback", scaled(1300, 700))
	cfg := fastConfig(own)
	cfg.Sync.PageSize = 2000
	sc := startSidecar(t, cfg)
	waitSyncedComplete(t, sc, own, remote, evs)
	r, _ := relayStatus(sc, remote.URL())
	if r.Truncation == "" {
		t.Errorf("status shows no REQ cap for the relay: %+v", r)
	}
}

// TestWildIgnoresLimit: a relay that ignores limit (and returns up to its
// own silent cap of 300) is paged to the end.
func TestWildIgnoresLimit(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "ignorant", IgnoreLimit: true, SilentReqCap: 300})
	evs := wildRepo(t, own, remote, "ignored", scaled(900, 500))
	cfg := fastConfig(own)
	cfg.Sync.PageSize = 100
	sc := startSidecar(t, cfg)
	waitSyncedComplete(t, sc, own, remote, evs)
}

// TestWildReqBlocked: a relay answering every REQ with CLOSED "blocked:"
// is reported with historic sync failures, never as synced.
func TestWildReqBlocked(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "blocking"})
	wildRepo(t, own, remote, "blocked", 20)
	remote.SetFaults(harness.Faults{ReqClosed: "blocked: not on the allow list"})
	sc := startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "the blocking relay reported with failures", func() bool {
		r, ok := relayStatus(sc, remote.URL())
		if ok && r.State == "connected" {
			t.Fatalf("a relay refusing every REQ was reported synced: %+v", r)
		}
		return ok && r.State == "connected_historic_sync_failures"
	})
	if v := testkit.Metric(t, sc.Registry, "ngit_sync_historic_batches_total", map[string]string{"result": "failed"}); v < 1 {
		t.Errorf("metric = %v, want >= 1", v)
	}
}

// TestWildNegentropyNotice: strfry with negentropy switched off still
// advertises NIP-77 and answers NEG-OPEN with a NOTICE. The relay is
// remembered as unsupported and paged.
func TestWildNegentropyNotice(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "strfry-neg-off", NegNotice: "negentropy disabled", ReqCap: 500})
	evs := wildRepo(t, own, remote, "notice", scaled(700, 600))
	sc := startSidecar(t, fastConfig(own))
	waitSyncedComplete(t, sc, own, remote, evs)
	if r, _ := relayStatus(sc, remote.URL()); r.Negentropy != "unsupported" {
		t.Fatalf("negentropy support %q, want unsupported", r.Negentropy)
	}
	if st := remote.Stats(); st.NegOpens == 0 || st.NegOpens >= st.Reqs {
		t.Fatalf("%d NEG-OPENs for %d REQs: unsupported is not remembered", st.NegOpens, st.Reqs)
	}
}

// TestWildNegentropySilent: a relay advertising NIP-77 that never answers
// NEG-OPEN costs one initial timeout, not a hang.
func TestWildNegentropySilent(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "silent", Negentropy: true, ReqCap: 500, Faults: harness.Faults{IgnoreNegentropy: true}})
	evs := wildRepo(t, own, remote, "silent", 300)
	cfg := fastConfig(own)
	cfg.Negentropy.InitialTimeout = 500 * time.Millisecond
	sc := startSidecar(t, cfg)
	waitSyncedComplete(t, sc, own, remote, evs)
	if r, _ := relayStatus(sc, remote.URL()); r.Negentropy != "unsupported" {
		t.Fatalf("negentropy support %q, want unsupported", r.Negentropy)
	}
}

// TestWildNegentropySlowLater: a relay that answered NIP-77 and later
// leaves a NEG-OPEN unanswered past the initial timeout (strfry under
// load did, at a million events) is slow, not unable: the filter is
// paged, and the relay stays "supported" for the next ones.
func TestWildNegentropySlowLater(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "slow-later", Negentropy: true, ReqCap: 500})
	first := wildRepo(t, own, remote, "first", 300)
	cfg := fastConfig(own)
	cfg.Negentropy.InitialTimeout = 500 * time.Millisecond
	sc := startSidecar(t, cfg)
	waitSyncedComplete(t, sc, own, remote, first)
	if r, _ := relayStatus(sc, remote.URL()); r.Negentropy != "supported" {
		t.Fatalf("negentropy support %q, want supported", r.Negentropy)
	}
	remote.SetFaults(harness.Faults{IgnoreNegentropy: true})
	opens := remote.Stats().NegOpens
	second := wildRepo(t, own, remote, "second", 300)
	waitSyncedComplete(t, sc, own, remote, second)
	if remote.Stats().NegOpens == opens {
		t.Fatal("no NEG-OPEN after the relay fell silent: the test tested nothing")
	}
	if r, _ := relayStatus(sc, remote.URL()); r.Negentropy != "supported" {
		t.Fatalf("negentropy support %q after one slow NEG-OPEN, want supported", r.Negentropy)
	}
}

// TestWildAuthReads: a relay that answers REQ and NEG-OPEN with
// "auth-required:" until the connection authenticated gets NIP-42 AUTH
// with the configured key and the requests again.
func TestWildAuthReads(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "auth-reads", AuthReads: true, Negentropy: true, ReqCap: 500})
	evs := wildRepo(t, own, remote, "authed", 300)
	cfg := fastConfig(own)
	key, err := config.ParseSecretKey(signed.NewKey().Secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.Key = key
	sc := startSidecar(t, cfg)
	waitSyncedComplete(t, sc, own, remote, evs)
	if r, _ := relayStatus(sc, remote.URL()); r.ReadAuth != "authenticated" {
		t.Fatalf("read_auth %q, want authenticated", r.ReadAuth)
	}
	// live subscriptions were rebuilt after AUTH: a new issue arrives live
	alice := signed.NewKey()
	live := alice.Issue(signed.Address(evs[0]), "after auth")
	mustPublish(t, remote, live)
	waitHas(t, own, live)
}

// TestWildAuthReadsWithoutKey: without a key the relay is reported as
// needing one — never synced — and not asked again and again.
func TestWildAuthReadsWithoutKey(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "auth-reads", AuthReads: true, Negentropy: true})
	wildRepo(t, own, remote, "nokey", 20)
	sc := startSidecar(t, fastConfig(own))
	var r status.Relay
	testkit.WaitFor(t, syncTimeout, "the relay reported as needing a key", func() bool {
		var ok bool
		r, ok = relayStatus(sc, remote.URL())
		if ok && r.State == "connected" {
			t.Fatalf("a relay refusing every read was reported synced: %+v", r)
		}
		return ok && r.State == "connected_historic_sync_failures" && r.ReadAuth != ""
	})
	if r.ReadAuth != "needs a key: no secret key configured" {
		t.Fatalf("read_auth %q", r.ReadAuth)
	}
	if v := testkit.Metric(t, sc.Registry, "ngit_sync_read_auth_total", map[string]string{"relay": remote.URL(), "result": "no_key"}); v != 1 {
		t.Fatalf("no_key counted %v times, want once per connection", v)
	}
	before := remote.Stats()
	time.Sleep(2 * time.Second) // several ticks: nothing may be retried
	after := remote.Stats()
	if after.Reqs != before.Reqs || after.NegOpens != before.NegOpens {
		t.Fatalf("REQs %d→%d, NEG-OPENs %d→%d: the relay is asked again and again", before.Reqs, after.Reqs, before.NegOpens, after.NegOpens)
	}
}

// TestWildMessageLimits: strfry's limits (131,072-byte messages, 200
// filters per REQ) and a relay announcing 20,000-byte messages: every REQ,
// NEG-OPEN and NEG-MSG is built to fit, so no connection is dropped for a
// message too large and everything arrives.
func TestWildMessageLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  int64
	}{{"strfry", 131_072}, {"small", 20_000}} {
		t.Run(tc.name, func(t *testing.T) {
			own := ownRelay(t)
			remote := harness.Start(t, harness.RelayOptions{Name: tc.name, Negentropy: true, ReqCap: 500, MaxMessageSize: tc.max, MaxFilters: 200})
			evs := wildRepo(t, own, remote, "limits-"+tc.name, scaled(900, 600))
			sc := startSidecar(t, fastConfig(own))
			waitSyncedComplete(t, sc, own, remote, evs)
			if st := remote.Stats(); st.Connections != 1 {
				t.Fatalf("%d connections: a message over %d bytes dropped one", st.Connections, tc.max)
			}
		})
	}
}

// TestWildOwnRelayPurgatory: a GRASP own relay answers a PR with OK true
// "purgatory: …" and does not serve it. The sidecar does not count it
// present; when the relay discards it, it is published again; once the
// relay serves it (git data arrived), a publish answers duplicate and the
// sidecar counts it present.
func TestWildOwnRelayPurgatory(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own-grasp", Policy: harness.GraspPolicy(),
		HoldPurgatory: func(ev *nostr.Event) bool { return ev.Kind == nip34.KindPullRequest }})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	alice := signed.NewKey()
	repo := repoFor(alice, "held", own, remote)
	mustPublish(t, own, repo)
	pr := alice.PR(signed.Address(repo), strings.Repeat("ab", 20))
	issue := alice.Issue(signed.Address(repo), "served at once")
	remote.Inject(repo, pr, issue)

	cfg := fastConfig(own)
	cfg.Publisher.OwnPurgatoryRecheck = 300 * time.Millisecond
	sc := startSidecar(t, cfg)
	waitHas(t, own, issue)
	testkit.WaitFor(t, syncTimeout, "the PR in the own relay's purgatory", func() bool { return slices.Contains(own.Held(), pr.ID) })
	if own.Has(pr.ID) {
		t.Fatal("the own relay serves a held PR")
	}
	// The relay holds it before its OK reaches the sidecar.
	testkit.WaitFor(t, syncTimeout, "the PR counted held, not present", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_own_purgatory_events", nil) == 1
	})
	// The relay discards it (no git data within 30 minutes): it comes back.
	own.DiscardHeld()
	testkit.WaitFor(t, syncTimeout, "the PR published again", func() bool { return slices.Contains(own.Held(), pr.ID) })
	// Its git data arrives: the relay serves it (without telling live
	// subscribers); the next publish answers duplicate.
	own.ReleaseHeld()
	testkit.WaitFor(t, syncTimeout, "the PR counted present", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_own_purgatory_events", nil) == 0
	})
	if !own.Has(pr.ID) {
		t.Fatal("the PR is not on the own relay")
	}
	if v := testkit.Metric(t, sc.Registry, "ngit_sync_own_purgatory_republished_total", nil); v < 2 {
		t.Fatalf("republished %v times, want at least 2 (after the discard and after the release)", v)
	}
}

// TestWildCIEventsArriveThroughLayer2: CI events (NIP-C1) tag the
// repository and are real volume on relay.ngit.dev; they arrive like any
// other Layer 2 event, historic and live.
func TestWildCIEventsArriveThroughLayer2(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "ci", Negentropy: true})
	alice := signed.NewKey()
	repo := repoFor(alice, "ci", own, remote)
	mustPublish(t, own, repo)
	old := alice.CIRun(signed.Address(repo), strings.Repeat("cd", 20), "success")
	remote.Inject(repo, old)
	sc := startSidecar(t, fastConfig(own))
	waitHas(t, own, old)
	waitState(t, sc, remote.URL(), "connected")
	live := alice.CIRun(signed.Address(repo), strings.Repeat("ef", 20), "failure")
	mustPublish(t, remote, live)
	waitHas(t, own, live)
}

// TestWildAuthChallengeFirst: a relay that sends an AUTH challenge as soon
// as the connection opens gets AUTH with the configured key before any
// read is refused.
func TestWildAuthChallengeFirst(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "challenger", AuthChallengeOnConnect: true, Negentropy: true})
	evs := wildRepo(t, own, remote, "challenged", 30)
	cfg := fastConfig(own)
	key, err := config.ParseSecretKey(signed.NewKey().Secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.Key = key
	sc := startSidecar(t, cfg)
	waitSyncedComplete(t, sc, own, remote, evs)
	testkit.WaitFor(t, syncTimeout, "AUTH answered", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.ReadAuth == "authenticated" && remote.Stats().Received["AUTH"] >= 1
	})
}

// TestWildNegentropyCappedOwnHoldsOlder: a NIP-77 set capped at 400 (not a
// common cap) is caught because it ends above older events the own relay
// holds and the relay claims to lack; the events between are fetched.
func TestWildNegentropyCappedOwnHoldsOlder(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "capped-400", Negentropy: true, NegCap: 400, SilentReqCap: 400})
	evs := wildRepo(t, own, remote, "older", scaled(1000, 600))
	var issues []*nostr.Event
	for _, ev := range evs {
		if ev.Kind == nip34.KindIssue {
			issues = append(issues, ev)
		}
	}
	// The own relay already holds the 100 oldest issues.
	own.Inject(issues[:100]...)
	sc := startSidecar(t, fastConfig(own))
	waitSyncedComplete(t, sc, own, remote, evs, issues[:100]...)
	if r, _ := relayStatus(sc, remote.URL()); r.Truncation == "" {
		t.Errorf("status shows no truncation: %+v", r)
	}
}

// TestWildIgnoresUntil: a relay that ignores until keeps answering with its
// newest page; the pager cannot get past it and reports the batch failed,
// never the relay synced.
func TestWildIgnoresUntil(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "no-until", IgnoreUntil: true, SilentReqCap: 100})
	wildRepo(t, own, remote, "until", 300)
	sc := startSidecar(t, fastConfig(own))
	testkit.WaitFor(t, syncTimeout, "the relay reported with failures", func() bool {
		r, ok := relayStatus(sc, remote.URL())
		if ok && r.State == "connected" {
			t.Fatalf("a relay ignoring until was reported synced: %+v", r)
		}
		return ok && r.State == "connected_historic_sync_failures" && strings.Contains(r.LastError, "outside the filter")
	})
}

// TestWildLearnedLimits: relays that enforce a limit they do not announce
// (or announce a bigger one): 20,000-byte messages with no
// max_message_length or with strfry's 131,072 announced, 3 filters per
// REQ and 4 tag values per filter (never in NIP-11). The sidecar learns
// each bound from the refusal (a connection closed with 1009, a REQ CLOSED
// for its filter count or its tag values),
// builds its requests within it, ends with every event, keeps a working
// live subscription and does not reconnect or re-subscribe in a loop.
func TestWildLearnedLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts harness.RelayOptions
	}{
		{"message-unannounced", harness.RelayOptions{Negentropy: true, ReqCap: 500, MaxMessageSize: 20_000, AnnounceMaxMessage: -1}},
		{"message-announced-bigger", harness.RelayOptions{Negentropy: true, ReqCap: 500, MaxMessageSize: 20_000, AnnounceMaxMessage: 131_072}},
		{"filters-unannounced", harness.RelayOptions{Negentropy: true, ReqCap: 500, MaxFilters: 3}},
		{"tag-values-unannounced", harness.RelayOptions{ReqCap: 500, MaxTagValues: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			own := ownRelay(t)
			tc.opts.Name = tc.name
			remote := harness.Start(t, tc.opts)
			evs := wildRepo(t, own, remote, "learned-"+tc.name, scaled(900, 600))
			cfg := fastConfig(own)
			cfg.Sync.ValuesPerFilter = 20 // ~40 live filters for the issues
			sc := startSidecar(t, cfg)
			waitSyncedComplete(t, sc, own, remote, evs)
			waitRootsConfirmed(t, sc, remote, evs)
			// Live subscriptions are in place within the learned bounds:
			// a new reply to the newest issue arrives.
			var last *nostr.Event
			for _, ev := range evs {
				if ev.Kind == nip34.KindIssue {
					last = ev
				}
			}
			alice := signed.NewKey()
			live := alice.Comment(last, nil)
			testkit.WaitFor(t, syncTimeout, "a live reply", func() bool {
				mustPublish(t, remote, live)
				return own.Has(live.ID)
			})
			// Nothing runs in a loop once learned: finite work still
			// finishing (a consolidation after a limit learned late) ends,
			// and a 2 s window follows with no reconnect and at most 5
			// REQs; a loop never gives one.
			var after harness.Stats
			windows := 0
			testkit.WaitFor(t, syncTimeout, "2 s without a reconnect and with at most 5 REQs", func() bool {
				before, at := remote.Stats(), time.Now()
				time.Sleep(2 * time.Second)
				after = remote.Stats()
				windows++
				if after.Connections == before.Connections && after.Reqs-before.Reqs <= 5 {
					return true
				}
				t.Logf("window %d: connections %d→%d, REQs %d→%d", windows, before.Connections, after.Connections, before.Reqs, after.Reqs)
				logReqs(t, remote, at, 5)
				return false
			})
			t.Logf("%d connections, %d REQs", after.Connections, after.Reqs)
		})
	}
}
