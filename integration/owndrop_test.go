package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
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
// reconnects (sync.root_wait), and nothing is read again in full: what the
// own relay sends the sidecar stays within a small multiple of what it
// holds, and each remote relay sends at most 1.2 times what it holds, or
// (the REQ-only relay, which sends an event matching two of its filters
// twice) 1.2 times what it sends the same sidecar when the own relay does
// not drop.

// ownDropIssues is how many issues each repository has (scaled down under
// the race detector).
func ownDropIssues() int {
	if raceEnabled {
		return 120
	}
	return 400
}

// ownDropRepo builds a repository listing own and remotes, and its events:
// n issues a minute apart, a comment on each, a status on every other, a
// kind 1 reply on every fourth, a patch and a PR with a comment each. It
// returns the announcement, the events and the roots among them.
func ownDropRepo(own *harness.Relay, d string, n int, remotes ...*harness.Relay) (ann *nostr.Event, evs []*nostr.Event, roots []string) {
	k := signed.NewKey()
	ann = repoFor(k, d, own, remotes...)
	addr := k.RepoAddress(d)
	base := time.Now().Add(-30 * 24 * time.Hour)
	at := func(i int, off time.Duration) signed.Option {
		return signed.At(base.Add(time.Duration(i)*time.Minute + off))
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
	pr := k.PR(addr, signed.FakeCommit(d), at(n+1, 0))
	evs = append(evs, issues...)
	evs = append(evs, patch, pr, k.Comment(patch, nil, at(n, time.Second)), k.Comment(pr, nil, at(n+1, time.Second)))
	for i, is := range issues {
		evs = append(evs, k.Comment(is, nil, at(i, time.Second)))
		if i%2 == 0 {
			evs = append(evs, k.Status(signed.KindStatusOpen, is, at(i, 2*time.Second)))
		}
		if i%4 == 0 {
			evs = append(evs, k.Reply(is, at(i, 3*time.Second)))
		}
		roots = append(roots, is.ID)
	}
	roots = append(roots, patch.ID, pr.ID)
	return ann, evs, roots
}

// ownDropResult is what one run of ownDropRun measured.
type ownDropResult struct {
	took time.Duration
	// conns are the connections the own relay accepted; cut are the
	// EVENTs it received on a connection that ended before it sent their
	// OK, resent those of them received again on a later connection.
	conns, cut, resent int
	// ownSent is how many EVENTs the own relay sent the sidecar, ownLen
	// how many it holds.
	ownSent, ownLen int
	// remoteSent and remoteLen are each remote relay's, by name.
	remoteSent, remoteLen map[string]int
	// ownByFilter are the EVENTs the own relay sent by what the REQ
	// answered asked (sentByFilter).
	ownByFilter map[string]int
	late        uint64
}

// ownDropRun syncs the three repositories from three remote relays into an
// own relay with faults (none, or cuts) and checks that every event is on
// the own relay and every root known to discovery; it returns what the
// relays sent.
func ownDropRun(t *testing.T, faults harness.Faults, tune func(*config.Config)) ownDropResult {
	t.Helper()
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(), Faults: faults})
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
	cfg.Sync.RootWait = time.Second
	if tune != nil {
		tune(cfg)
	}
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
				t.Logf("after %s: %d of %d events missing; %d of %d roots known", time.Since(start).Round(time.Second), m, len(want), sc.Status().RootEvents, len(roots))
			}
			return false
		}
		return true
	})
	testkit.WaitFor(t, syncTimeout, "discovery knows every root", func() bool {
		return sc.Status().RootEvents == len(roots)
	})
	res := ownDropResult{took: time.Since(start), ownLen: own.Len(), remoteSent: map[string]int{}, remoteLen: map[string]int{},
		late: sc.Status().OwnRelay.RootsAppliedLate}

	// EVENTs the own relay received on a connection that ended before it
	// answered them; each must come again on a later connection.
	type sent struct{ conn, id string }
	okd := map[sent]bool{}
	for _, m := range own.Sent(start) {
		if m.Type == "OK" {
			okd[sent{fmt.Sprint(m.Conn), m.EventID}] = true
		}
	}
	got := map[string][]int{} // event id → connections it came on
	for _, m := range own.Received(start) {
		switch m.Type {
		case harness.TypeConnect:
			res.conns++
		case "EVENT":
			got[m.EventID] = append(got[m.EventID], m.Conn)
		}
	}
	for id, conns := range got {
		for i, c := range conns {
			if okd[sent{fmt.Sprint(c), id}] {
				continue
			}
			res.cut++
			if slices.ContainsFunc(conns[i+1:], func(later int) bool { return later > c }) {
				res.resent++
			} else if !own.Has(id) {
				t.Errorf("event %s was cut before its OK on connection %d, never sent again and is not on the own relay", id, c)
			}
			break
		}
	}
	res.ownSent = eventsSent(own, start)
	res.ownByFilter = sentByFilter(own, start)
	for _, r := range remotes {
		res.remoteSent[r.Options().Name] = eventsSent(r, start)
		res.remoteLen[r.Options().Name] = r.Len()
	}
	t.Logf("converged in %s over %d own relay connections; %d EVENTs cut before their OK, %d of them sent again; %d roots applied late",
		res.took.Round(time.Millisecond), res.conns, res.cut, res.resent, res.late)
	t.Logf("the own relay holds %d events and sent the sidecar %d; the remotes sent %v for their %v", res.ownLen, res.ownSent, res.remoteSent, res.remoteLen)
	return res
}

// sentByFilter counts the EVENTs relay r sent since start by the kind of
// filter of the REQ they answered: by ids, layer 3 (#e/#E), layer 2
// (#a/#A), by kinds only; +until and +since when it had them.
func sentByFilter(r *harness.Relay, start time.Time) map[string]int {
	cat := map[string]string{}
	for _, m := range r.Received(start) {
		if m.Type != "REQ" {
			continue
		}
		c := "other"
		switch {
		case strings.Contains(m.Raw, `"ids"`):
			c = "ids"
		case strings.Contains(m.Raw, `"#e"`) || strings.Contains(m.Raw, `"#E"`):
			c = "layer3"
		case strings.Contains(m.Raw, `"#a"`) || strings.Contains(m.Raw, `"#A"`):
			c = "layer2"
		case strings.Contains(m.Raw, `"kinds"`):
			c = "kinds"
		}
		if strings.Contains(m.Raw, `"until"`) {
			c += "+until"
		}
		if strings.Contains(m.Raw, `"since"`) {
			c += "+since"
		}
		cat[fmt.Sprint(m.Conn, m.SubID)] = c
	}
	by := map[string]int{}
	for _, m := range r.Sent(start) {
		if m.Type == "EVENT" {
			by[cat[fmt.Sprint(m.Conn, m.SubID)]]++
		}
	}
	return by
}

// eventsSent counts the EVENTs relay r sent since start.
func eventsSent(r *harness.Relay, start time.Time) int {
	n := 0
	for _, m := range r.Sent(start) {
		if m.Type == "EVENT" {
			n++
		}
	}
	return n
}

func TestOwnRelayDroppingConnections(t *testing.T) {
	// The own relay is a network hop away (10 ms each way) and the
	// publisher's window small, so that syncing takes several of its
	// connections' lifetimes.
	lat := 10 * time.Millisecond
	tune := func(cfg *config.Config) { cfg.Publisher.Window = 20 }
	var calm ownDropResult
	t.Run("calm", func(t *testing.T) { calm = ownDropRun(t, harness.Faults{Latency: lat}, tune) })
	var cut ownDropResult
	t.Run("dropping", func(t *testing.T) {
		cut = ownDropRun(t, harness.Faults{Latency: lat, CutAfter: time.Second, CutAfterMax: 3 * time.Second}, tune)
	})
	if t.Failed() {
		return
	}
	// More connections than the calm run's: the cuts came into play (a
	// sync done in a few cut lifetimes makes few: 5 against 3 in a fast
	// -race run).
	if cut.conns <= calm.conns {
		t.Errorf("only %d connections to the own relay (calm: %d): the cuts never came into play", cut.conns, calm.conns)
	}
	// What the own relay sends: its stored announcements and roots once
	// (the first connection's paging; here the announcements), each root
	// the sidecar publishes once more (the self-subscription's live
	// echo), per reconnect the announcements and roots created since the
	// last connection ended (less since_buffer: none here, the events
	// are a month old), and what the local set's fills read (the first
	// fill, of a relay holding only the announcements here; a root the
	// own relay stored new is known to have nothing under it). That is
	// about a third of what it holds, the calm run's figure. A reconnect
	// that read back the events of every hosted repository (the local
	// set's fill again: 1.5 times in all before it was skipped on quick
	// reconnects) or its announcements and roots from the start (3.6
	// times) sends more than it holds.
	if cut.ownSent > cut.ownLen {
		t.Errorf("the own relay sent the sidecar %d events for its %d (calm: %d; by filter %v): reconnects read it again",
			cut.ownSent, cut.ownLen, calm.ownSent, cut.ownByFilter)
	}
	for name, sent := range cut.remoteSent {
		held := cut.remoteLen[name]
		if name == "req" {
			// It sends an event matching two filters of one REQ (a
			// comment's E and e tags) or two REQs (a status's a and e)
			// for each: compared with the calm run's.
			if held = calm.remoteSent[name]; held == 0 {
				continue // the calm run was not run (-run …/dropping)
			}
		}
		if sent*10 > held*12 {
			t.Errorf("%s sent the sidecar %d events, more than 1.2 times %d (calm: %d)", name, sent, held, calm.remoteSent[name])
		}
	}
}

// An own relay that stores the issues the sidecar publishes (OK true) but
// never serves them, neither to a REQ nor live (its read rules hide them):
// the self-subscription never delivers them. After sync.root_wait they are
// applied from the relay's OKs and the comments under them, which tag only
// their issue, are synced; /status and the metric count them, and one WARN
// line says so.
func TestOwnRelayHidingRoots(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(),
		Hide: func(ev *nostr.Event) bool { return ev.Kind == nip34.KindIssue }})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	k := signed.NewKey()
	ann := repoFor(k, "hidden", own, remote)
	own.Inject(ann)
	base := time.Now().Add(-time.Hour)
	var issues, comments []*nostr.Event
	for i := range 20 {
		is := k.Issue(k.RepoAddress("hidden"), fmt.Sprint("issue ", i), signed.At(base.Add(time.Duration(i)*time.Minute)))
		issues = append(issues, is)
		comments = append(comments, k.Comment(is, nil, signed.At(base.Add(time.Duration(i)*time.Minute+time.Second))))
	}
	remote.Inject(ann)
	remote.Inject(issues...)
	remote.Inject(comments...)

	cfg := fastConfig(own)
	cfg.Sync.RootWait = time.Second
	log, logs := observedLogger(t)
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	waitHas(t, own, issues...)
	waitHas(t, own, comments...)
	st := sc.Status()
	if st.OwnRelay.RootsAppliedLate != uint64(len(issues)) || st.OwnRelay.RootsUnapplied != 0 {
		t.Errorf("status: %d roots applied late and %d unapplied, want %d and 0", st.OwnRelay.RootsAppliedLate, st.OwnRelay.RootsUnapplied, len(issues))
	}
	if st.RootEvents != len(issues) {
		t.Errorf("discovery knows %d roots, want %d", st.RootEvents, len(issues))
	}
	if got := gatheredValue(t, sc.Registry, sidecar.MetricOwnRootsLate); got != float64(len(issues)) {
		t.Errorf("%s = %v, want %d", sidecar.MetricOwnRootsLate, got, len(issues))
	}
	if got := gatheredValue(t, sc.Registry, sidecar.MetricOwnRootsUnapplied); got != 0 {
		t.Errorf("%s = %v, want 0", sidecar.MetricOwnRootsUnapplied, got)
	}
	if warns := warningsMentioning(logs, "sync.root_wait"); len(warns) != 1 {
		t.Errorf("%d WARN lines about roots applied late, want one: %v", len(warns), warns)
	}
}

// gatheredValue is the value of the unlabelled counter or gauge name in
// reg (the test fails when it is not there).
func gatheredValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no series %s", name)
	return 0
}

// TestOwnRelayHidingAnnouncement: a newer announcement of a hosted
// repository, synced from a remote relay, that the own relay stores but
// never serves the self-subscription (as when it was stored while the
// self-subscription reconnected: a reconnect asks only for what was
// created since, and a synced announcement is older) is applied after
// sync.root_wait from the relay's acknowledgement, as roots are: the relay
// it adds is synced. Without that, the repository's new relay was learnt
// only at the next read of the own relay in full or a restart.
func TestOwnRelayHidingAnnouncement(t *testing.T) {
	var hidden atomic.Pointer[string]
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy(),
		Hide: func(ev *nostr.Event) bool { id := hidden.Load(); return id != nil && ev.ID == *id }})
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	second := harness.Start(t, harness.RelayOptions{Name: "second", Negentropy: true})
	k := signed.NewKey()
	clone := signed.WithClone("http://" + own.Addr() + "/" + k.Npub() + "/moved.git")
	older := k.Announcement("moved", signed.WithRelays(own.URL(), remote.URL()), clone, signed.At(time.Now().Add(-time.Hour)))
	newer := k.Announcement("moved", signed.WithRelays(own.URL(), remote.URL(), second.URL()), clone)
	hidden.Store(&newer.ID)
	issue := k.Issue(k.RepoAddress("moved"), "on the relay the newer announcement adds")
	own.Inject(older)
	remote.Inject(older, newer)
	second.Inject(newer, issue)

	cfg := fastConfig(own)
	cfg.Sync.RootWait = time.Second
	log, logs := observedLogger(t)
	startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	waitHas(t, own, newer, issue)
	if warns := warningsMentioning(logs, "announcements the own relay stored"); len(warns) != 1 {
		t.Errorf("%d WARN lines about announcements applied late, want one: %v", len(warns), warns)
	}
}
