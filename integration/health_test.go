package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// Relay health end to end (issue 4): backoff against a relay that is down,
// the handshake status deciding the retry (429, 503, 404), Degraded →
// Healthy after the stability period, silence during a rate-limit cooldown
// (NOTICE and CLOSED), max_subscriptions respected, and dead relays not
// slowing the others down. Timers are shrunk through config; jitter is off
// where a schedule is asserted.

// acceptCounter is a TCP listener that records when each connection was
// accepted and closes it at once: every websocket dial to it fails before
// the handshake, like a relay that is down behind an open port.
type acceptCounter struct {
	ln    net.Listener
	mu    sync.Mutex
	times []time.Time
	done  chan struct{}
}

func newAcceptCounter(t *testing.T) *acceptCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptCounter{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			now := time.Now()
			c.Close()
			a.mu.Lock()
			a.times = append(a.times, now)
			a.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-a.done
	})
	return a
}

func (a *acceptCounter) URL() string { return "ws://" + a.ln.Addr().String() }

// Accepts returns the accept times so far, oldest first.
func (a *acceptCounter) Accepts() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.times...)
}

// announceURLs builds an announcement for d on own listing the given relay
// URLs besides own.
func announceURLs(k *signed.Key, d string, own *harness.Relay, urls ...string) *nostr.Event {
	clones := []string{"http://" + own.Addr() + "/" + k.Npub() + "/" + d + ".git"}
	return k.Announcement(d, signed.WithRelays(append([]string{own.URL()}, urls...)...), signed.WithClone(clones...))
}

// TestClosedPortBackoff: a relay that is down is retried on the backoff
// schedule base·2^(n−1) (jitter off): attempts at ~0, B, 3B, 7B, 15B … after
// the first, so a window of 11B holds at most 4 attempts, and consecutive
// attempts are never closer than the schedule allows.
func TestClosedPortBackoff(t *testing.T) {
	own := ownRelay(t)
	down := newAcceptCounter(t)
	refusing := harness.ClosedPort(t) // attempts cannot be counted here, failures can
	alice := signed.NewKey()
	mustPublish(t, own, announceURLs(alice, "down", own, down.URL()), announceURLs(alice, "refusing", own, refusing))

	cfg := fastConfig(own)
	const base = 200 * time.Millisecond
	cfg.Health.BackoffBase = base
	cfg.Health.BackoffMax = time.Minute
	cfg.Health.Jitter = 0
	cfg.Health.Tick = 20 * time.Millisecond
	sc := startSidecar(t, cfg)

	testkit.WaitFor(t, syncTimeout, "the down relay was never dialled", func() bool { return len(down.Accepts()) > 0 })
	first := down.Accepts()[0]
	const window = 11 * base // nominal attempts at 0, B, 3B, 7B; the next at 15B
	wait := time.NewTimer(time.Until(first.Add(window)))
	<-wait.C

	// The closed port was announced in the same batch, so it has had the
	// same window: its consecutive failures (the tracker's gauge, updated
	// every tick) follow the same schedule.
	closedFailures, _ := testkit.Series(t, sc.Registry, health.MetricRelayFailures, map[string]string{"relay": refusing})
	accepts := down.Accepts()
	n := 0
	for _, at := range accepts {
		if !at.After(first.Add(window)) {
			n++
		}
	}
	t.Logf("%d attempts in %s after the first: %v", n, window, offsets(accepts, first))
	const maxN = 4
	if n > maxN {
		t.Errorf("%d connection attempts in %s, the schedule allows %d", n, window, maxN)
	}
	// A loaded machine only delays attempts: that the relay keeps being
	// retried is asked without a deadline of the schedule's.
	testkit.WaitFor(t, syncTimeout, fmt.Sprintf("the down relay was not retried %d times", maxN), func() bool { return len(down.Accepts()) >= maxN })
	accepts = down.Accepts()
	// The wait before attempt i+1 is the backoff after i failures. The
	// listener's clock reads an accept a little after it happened, so allow
	// a quarter of the base for scheduling noise.
	tolerance := base / 4
	for i := 1; i < len(accepts); i++ {
		gap := accepts[i].Sub(accepts[i-1])
		want := backoff.Policy{Base: base, Max: cfg.Health.BackoffMax}.Nominal(i)
		if gap < want-tolerance {
			t.Errorf("attempt %d came %s after attempt %d; backoff after %d failures is %s", i+1, gap, i, i, want)
		}
	}

	t.Logf("closed port: %v consecutive failures in the window", closedFailures)
	if closedFailures > maxN {
		t.Errorf("closed port: %v failures in %s, the schedule allows %d", closedFailures, window, maxN)
	}
	testkit.WaitFor(t, syncTimeout, fmt.Sprintf("the closed port did not fail %d times", maxN), func() bool {
		v, _ := testkit.Series(t, sc.Registry, health.MetricRelayFailures, map[string]string{"relay": refusing})
		return v >= maxN
	})

	r, ok := relayStatus(sc, down.URL())
	if !ok {
		t.Fatal("the down relay is not in /status")
	}
	if r.Health != health.Degraded.String() || r.State != "disconnected" || r.Failures < maxN-1 {
		t.Errorf("status of the down relay: %+v, want health degraded, disconnected, ≥%d failures", r, maxN-1)
	}
	testkit.WaitFor(t, syncTimeout, fmt.Sprintf("%s{relay=%q} never counted the failures", health.MetricRelayFailures, down.URL()), func() bool {
		v, ok := testkit.Series(t, sc.Registry, health.MetricRelayFailures, map[string]string{"relay": down.URL()})
		return ok && v >= maxN-1
	})
}

// statusServer answers every HTTP request (websocket handshakes included)
// with one status code and records when each request came.
type statusServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	times []time.Time
}

func newStatusServer(t *testing.T, code int) *statusServer {
	t.Helper()
	s := &statusServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.times = append(s.times, time.Now())
		s.mu.Unlock()
		http.Error(w, http.StatusText(code), code)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *statusServer) URL() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") }

func (s *statusServer) Requests() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

// TestHandshakeStatusDecidesRetry: the HTTP status of a refused websocket
// handshake decides what happens next. 429 is a rate limit: a cooldown, no
// failure counted. 503 is transient: exponential backoff. 404 is not a
// relay: one attempt, then the naughty period.
func TestHandshakeStatusDecidesRetry(t *testing.T) {
	own := ownRelay(t)
	limited := newStatusServer(t, http.StatusTooManyRequests)
	restarting := newStatusServer(t, http.StatusServiceUnavailable)
	notRelay := newStatusServer(t, http.StatusNotFound)
	alice := signed.NewKey()
	mustPublish(t, own,
		announceURLs(alice, "limited", own, limited.URL()),
		announceURLs(alice, "restarting", own, restarting.URL()),
		announceURLs(alice, "not-a-relay", own, notRelay.URL()))

	cfg := fastConfig(own)
	const base, cooldown = 100 * time.Millisecond, 500 * time.Millisecond
	cfg.Health.BackoffBase = base
	cfg.Health.BackoffMax = time.Minute
	cfg.Health.Jitter = 0
	cfg.Health.RateLimitCooldown = cooldown
	cfg.Health.NaughtyPeriod = time.Hour
	cfg.Health.Tick = 20 * time.Millisecond
	sc := startSidecar(t, cfg)

	servers := []*statusServer{limited, restarting, notRelay}
	testkit.WaitFor(t, syncTimeout, "not every relay was dialled", func() bool {
		for _, s := range servers {
			if len(s.Requests()) == 0 {
				return false
			}
		}
		return true
	})
	testkit.WaitFor(t, syncTimeout, "the 429 relay was never reported rate_limited", func() bool {
		r, _ := relayStatus(sc, limited.URL())
		return r.Health == health.RateLimited.String()
	})
	// The gauges follow on the tracker's tick; a 429 counts no failure.
	testkit.WaitFor(t, syncTimeout, "gauges of the 429 relay never showed rate_limited without failures", func() bool {
		s, _ := testkit.Series(t, sc.Registry, health.MetricRelayStatus, map[string]string{"relay": limited.URL()})
		f, ok := testkit.Series(t, sc.Registry, health.MetricRelayFailures, map[string]string{"relay": limited.URL()})
		return s == float64(health.RateLimited) && ok && f == 0
	})

	// A window after each relay's first attempt: 429 every cooldown (at
	// most 3 attempts at 0, C, 2C), 503 at 0, B, 3B, 7B (at most 4 before
	// 15B), 404 once.
	const window = 11 * base
	wait := time.NewTimer(time.Until(latestFirst(servers).Add(window)))
	<-wait.C
	tolerance := base / 4
	check := func(name string, s *statusServer, maxN int, gapAfter func(i int) time.Duration) {
		reqs := s.Requests()
		n := 0
		for _, at := range reqs {
			if !at.After(reqs[0].Add(window)) {
				n++
			}
		}
		t.Logf("%s: %d attempts in %s: %v", name, n, window, offsets(reqs, reqs[0]))
		if n > maxN {
			t.Errorf("%s: %d attempts in %s, the schedule allows %d", name, n, window, maxN)
		}
		// A loaded machine only delays attempts: that the relay keeps
		// being asked is checked without the schedule's deadline.
		testkit.WaitFor(t, syncTimeout, fmt.Sprintf("%s: not retried %d times", name, maxN), func() bool { return len(s.Requests()) >= maxN })
		reqs = s.Requests()
		for i := 1; i < len(reqs); i++ {
			if gap, want := reqs[i].Sub(reqs[i-1]), gapAfter(i); gap < want-tolerance {
				t.Errorf("%s: attempt %d came %s after the previous one, want ≥ %s", name, i+1, gap, want)
			}
		}
	}
	nominal := backoff.Policy{Base: base, Max: cfg.Health.BackoffMax}.Nominal
	check("429", limited, 3, func(int) time.Duration { return cooldown })
	check("503", restarting, 4, nominal)
	if n := len(notRelay.Requests()); n != 1 {
		t.Errorf("404: %d attempts, want 1 (naughty period %s)", n, cfg.Health.NaughtyPeriod)
	}
	for _, c := range []struct {
		s      *statusServer
		health string
	}{{restarting, health.Degraded.String()}, {notRelay, health.Degraded.String()}} {
		if r, _ := relayStatus(sc, c.s.URL()); r.Health != c.health || r.Failures == 0 {
			t.Errorf("%s: %+v, want %s with failures", c.s.URL(), r, c.health)
		}
	}
}

// latestFirst returns the latest first-request time over servers.
func latestFirst(servers []*statusServer) time.Time {
	var latest time.Time
	for _, s := range servers {
		if reqs := s.Requests(); len(reqs) > 0 && reqs[0].After(latest) {
			latest = reqs[0]
		}
	}
	return latest
}

// offsets renders times relative to t0, for logs.
func offsets(ts []time.Time, t0 time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, at := range ts {
		out[i] = at.Sub(t0).Round(time.Millisecond)
	}
	return out
}

// TestDroppingRelayDegradedThenHealthy: a relay that accepts and then drops
// every connection before answering anything is Degraded; once it keeps a
// connection that answers nothing, that connection is Degraded for the
// stability period and then Healthy, with the status gauge following (3,
// then 1) and its failures cleared. (A connection that answers clears the
// failures at once: TestDroppingRelaysConverge.)
func TestDroppingRelayDegradedThenHealthy(t *testing.T) {
	own := ownRelay(t)
	flaky := harness.Start(t, harness.RelayOptions{Name: "flaky", Faults: harness.Faults{DropOnReceive: 1}})
	alice := signed.NewKey()
	repo := repoFor(alice, "flaky", own, flaky)
	mustPublish(t, own, repo)
	issue := alice.Issue(alice.RepoAddress("flaky"), "arrives once the relay holds")
	flaky.Inject(repo, issue)

	cfg := fastConfig(own)
	cfg.Health.Jitter = 0
	cfg.Health.BackoffBase = 100 * time.Millisecond
	cfg.Health.BackoffMax = 400 * time.Millisecond
	cfg.Health.StabilityPeriod = 1500 * time.Millisecond
	cfg.Health.Tick = 50 * time.Millisecond
	sc := startSidecar(t, cfg)
	url := flaky.URL()

	testkit.WaitFor(t, syncTimeout, "the dropping relay was never reported degraded (status and gauge)", func() bool {
		r, _ := relayStatus(sc, url)
		v, _ := testkit.Series(t, sc.Registry, health.MetricRelayStatus, map[string]string{"relay": url})
		return flaky.Stats().Connections >= 3 && r.Health == health.Degraded.String() && v == float64(health.Degraded)
	})

	flaky.SetFaults(harness.Faults{Mute: true})
	var connectedDegraded bool
	var healthy status.Relay
	testkit.WaitFor(t, syncTimeout, "the relay never became healthy again", func() bool {
		r, _ := relayStatus(sc, url)
		if r.Health == health.Degraded.String() && r.State != "disconnected" && r.State != "connecting" {
			connectedDegraded = true
		}
		healthy = r
		return r.Health == health.Healthy.String()
	})
	healthyAt := time.Now()
	if !connectedDegraded {
		t.Error("never saw the relay connected but still degraded (stability period)")
	}
	// The connection that made it healthy must have lasted the stability
	// period. LastConnected is stamped just after the tracker heard of the
	// connection; allow for that.
	if healthy.LastConnected == nil {
		t.Fatalf("healthy relay without last_connected: %+v", healthy)
	}
	if held := healthyAt.Sub(*healthy.LastConnected); held < cfg.Health.StabilityPeriod-50*time.Millisecond {
		t.Errorf("healthy %s after the connection was made, before the stability period %s", held, cfg.Health.StabilityPeriod)
	}
	flaky.SetFaults(harness.Faults{})
	flaky.DropConnections() // what the muted connection asked is asked again
	testkit.WaitFor(t, syncTimeout, "gauges never showed the relay healthy with no failures", func() bool {
		s, _ := testkit.Series(t, sc.Registry, health.MetricRelayStatus, map[string]string{"relay": url})
		f, _ := testkit.Series(t, sc.Registry, health.MetricRelayFailures, map[string]string{"relay": url})
		return s == float64(health.Healthy) && f == 0
	})
	waitHas(t, own, issue)
}

// TestRateLimitNoticeCooldown: a relay starts answering REQs with a
// rate-limit NOTICE just as a new repository is found on it. For the whole
// cooldown it receives no REQ, NEG-OPEN or new connection; afterwards the
// refused REQs are sent again, so the repository's old history arrives too
// (no since-based catch-up reaches it).
func TestRateLimitNoticeCooldown(t *testing.T) {
	testRateLimitCooldown(t, harness.Faults{ReqNotice: "rate-limited: slow down"})
}

// TestRateLimitClosedCooldown: the same with every REQ answered by a
// CLOSED "rate-limited:" instead of a NOTICE.
func TestRateLimitClosedCooldown(t *testing.T) {
	testRateLimitCooldown(t, harness.Faults{ReqClosed: "rate-limited: too many requests"})
}

func testRateLimitCooldown(t *testing.T, fault harness.Faults) {
	own := ownRelay(t)
	limited := harness.Start(t, harness.RelayOptions{Name: "limited"})
	alice := signed.NewKey()
	first := repoFor(alice, "first", own, limited)
	mustPublish(t, own, first)
	limited.Inject(first)

	cfg := fastConfig(own)
	const cooldown = 3 * time.Second
	cfg.Health.RateLimitCooldown = cooldown
	cfg.Health.Tick = 50 * time.Millisecond
	cfg.Sync.EOSETimeout = time.Second
	log, logs := observedLogger(t)
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: log})
	url := limited.URL()
	waitState(t, sc, url, "connected")

	second := repoFor(alice, "second", own, limited)
	old := alice.Issue(alice.RepoAddress("second"), "old", signed.At(time.Now().Add(-72*time.Hour)))
	recent := alice.Issue(alice.RepoAddress("second"), "recent")
	limited.Inject(second, old, recent)
	limited.SetFaults(fault)
	t0 := time.Now()
	mustPublish(t, own, second)

	var notice time.Time
	testkit.WaitFor(t, syncTimeout, "the relay never refused a REQ as rate limited", func() bool {
		for _, m := range limited.Sent(t0) {
			if (m.Type == "NOTICE" || m.Type == "CLOSED") && strings.Contains(m.Raw, "rate-limited") {
				notice = m.Time
				return true
			}
		}
		return false
	})
	testkit.WaitFor(t, syncTimeout, "the relay was never reported rate limited", func() bool {
		r, _ := relayStatus(sc, url)
		return r.Health == health.RateLimited.String()
	})
	// The sidecar can hold back only once it has read the refusal: the
	// cooldown starts when the health tracker logs it, which on a loaded
	// machine can be well after the relay sent it.
	cooling := logs.FilterMessage("relay is rate limiting us, cooling down").All()
	if len(cooling) == 0 {
		t.Fatal("the cooldown was never logged")
	}
	learned := cooling[0].Time
	// Lift the fault half-way: whatever the engine sends from now on would
	// be served, so only the cooldown keeps it quiet.
	wait := time.NewTimer(time.Until(notice.Add(cooldown / 2)))
	<-wait.C
	limited.SetFaults(harness.Faults{})

	// Messages already on the wire when the sidecar read the refusal may
	// still land; anything later than this grace inside the cooldown is a
	// violation.
	const grace = 100 * time.Millisecond
	quietFrom, quietTo := learned.Add(grace), notice.Add(cooldown)
	wait = time.NewTimer(time.Until(quietTo))
	<-wait.C
	refused := 0
	for _, m := range limited.Received(t0) {
		switch {
		case m.Type == "REQ" && m.Time.Before(quietFrom):
			refused++
		case m.Type == "REQ", m.Type == "NEG-OPEN", m.Type == harness.TypeConnect:
			if m.Time.Before(quietTo) {
				t.Errorf("%s at %s into a %s cooldown: %s", m.Type, m.Time.Sub(notice).Round(time.Millisecond), cooldown, m.Raw)
			}
		}
	}
	t.Logf("%d REQs refused before the cooldown started", refused)

	// Afterwards the refused REQs are sent again: the live subscriptions
	// are rebuilt and the historic batch retried.
	waitHas(t, own, recent, old)
	if len(reqsAfter(limited, quietTo)) == 0 {
		t.Error("no REQ after the cooldown")
	}
	if r, _ := relayStatus(sc, url); r.State == "connected_historic_sync_failures" {
		t.Errorf("historic sync given up after a rate limit: %+v", r)
	}
}

// TestMaxSubscriptionsRespected: a relay announcing max_subscriptions 5
// (and refusing a sixth REQ on a connection like strfry) never sees more
// than 5 open on one connection and never has to refuse one, while 50
// repositories, discovered a few at a time so that live subscriptions pile
// up, sync completely.
func TestMaxSubscriptionsRespected(t *testing.T) {
	own := ownRelay(t)
	const maxSubs = 5
	remote := harness.Start(t, harness.RelayOptions{Name: "five", MaxSubscriptions: maxSubs, EnforceMaxSubscriptions: true})
	alice, bob := signed.NewKey(), signed.NewKey()
	cfg := fastConfig(own)
	sc := startSidecar(t, cfg)

	var issues []*nostr.Event
	for i := 0; i < 50; i += 5 {
		var anns []*nostr.Event
		for j := i; j < i+5; j++ {
			d := fmt.Sprintf("five-%02d", j)
			ann := repoFor(alice, d, own, remote)
			issue := bob.Issue(alice.RepoAddress(d), "issue of "+d)
			comment := alice.Comment(issue, nil)
			remote.Inject(ann, issue, comment)
			anns = append(anns, ann)
			issues = append(issues, issue, comment)
		}
		mustPublish(t, own, anns...)
		time.Sleep(cfg.Sync.BatchWindow + 50*time.Millisecond) // a new discovery batch each round
	}
	waitHas(t, own, issues...)
	st := remote.Stats()
	refused := 0
	for _, m := range remote.Sent(time.Time{}) {
		if m.Type == "NOTICE" && strings.Contains(m.Raw, "too many concurrent REQs") {
			refused++
		}
	}
	t.Logf("relay saw %d REQs on %d connections, peak %d subscriptions per connection, %d refused",
		st.Reqs, st.Connections, st.PeakSubsPerConn, refused)
	if st.PeakSubsPerConn > maxSubs {
		t.Errorf("peak %d subscriptions on one connection, relay allows %d", st.PeakSubsPerConn, maxSubs)
	}
	if st.PeakSubsPerConn == 0 {
		t.Error("never observed an open subscription")
	}
	if refused > 0 {
		logRefusals(t, remote)
		t.Errorf("relay refused %d REQs for too many subscriptions", refused)
	}
	testkit.WaitFor(t, syncTimeout, "not all 50 repositories confirmed on the relay", func() bool {
		r, _ := relayStatus(sc, remote.URL())
		return r.ReposConfirmed == 50
	})
}

// deadRelaySync is one sync measurement: 2 healthy relays hold the
// repositories' issues; every announcement also lists dead relays: closed
// ports (refused at once) and silent ones (a TCP accept, then nothing until
// the connect timeout).
type deadRelaySync struct {
	repos  int
	dead   int
	silent int
}

// run syncs from scratch and returns how long until every issue was on the
// own relay.
func (s deadRelaySync) run(tb testing.TB) time.Duration {
	tb.Helper()
	own := harness.Start(tb, harness.RelayOptions{Name: "own", Policy: harness.GraspPolicy()})
	a := harness.Start(tb, harness.RelayOptions{Name: "a"})
	b := harness.Start(tb, harness.RelayOptions{Name: "b"})
	urls := []string{a.URL(), b.URL()}
	for i := 0; i < s.dead; i++ {
		urls = append(urls, harness.ClosedPort(tb))
	}
	for i := 0; i < s.silent; i++ {
		urls = append(urls, silentPort(tb))
	}
	alice, bob := signed.NewKey(), signed.NewKey()
	var anns, issues []*nostr.Event
	for i := 0; i < s.repos; i++ {
		d := fmt.Sprintf("r%03d", i)
		ann := announceURLs(alice, d, own, urls...)
		anns = append(anns, ann)
		// Half the issues on each healthy relay.
		issue := bob.Issue(alice.RepoAddress(d), "issue of "+d)
		comment := alice.Comment(issue, nil)
		issues = append(issues, issue, comment)
		if i%2 == 0 {
			a.Inject(ann, issue, comment)
		} else {
			b.Inject(ann, issue, comment)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if err := harness.Publish(ctx, own.URL(), anns...); err != nil {
		tb.Fatalf("publish announcements: %v", err)
	}

	cfg := fastConfig(own)
	cfg.Limits.MaxRelaysPerAnnouncement = s.dead + s.silent + 4
	start := time.Now()
	sc, stop := runSidecarTB(tb, cfg)
	defer stop()
	missing := func() int {
		n := 0
		for _, ev := range issues {
			if !own.Has(ev.ID) {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(tb, syncTimeout, fmt.Sprintf("all %d events with %d dead and %d silent relays", len(issues), s.dead, s.silent),
		func() bool { return missing() == 0 })
	took := time.Since(start)
	// The dead relays were really tried: each failed at least once.
	failed := func() int {
		n := 0
		for _, r := range sc.Status().Relays {
			if r.Failures > 0 {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(tb, syncTimeout, fmt.Sprintf("all %d dead relays to be tried", s.dead+s.silent),
		func() bool { return failed() >= s.dead+s.silent })
	return took
}

// TestDeadRelaysDoNotSlowSync: 20 dead relays listed in every announcement
// next to 2 healthy ones do not keep the healthy ones' events from
// syncing. Both durations are logged; tests do not assert speed (see
// BenchmarkSyncWithDeadRelays).
func TestDeadRelaysDoNotSlowSync(t *testing.T) {
	without := deadRelaySync{repos: 20}.run(t)
	closed := deadRelaySync{repos: 20, dead: 20}.run(t)
	silent := deadRelaySync{repos: 20, silent: 20}.run(t)
	t.Logf("sync from 2 healthy relays: %s without dead relays, %s with 20 closed ports, %s with 20 silent relays",
		without.Round(time.Millisecond), closed.Round(time.Millisecond), silent.Round(time.Millisecond))
}

// BenchmarkSyncWithDeadRelays reports ms per complete sync (sidecar start
// to every event on the own relay) from 2 healthy relays with no dead
// relays, 20 closed ports and 20 silent relays listed in every
// announcement.
func BenchmarkSyncWithDeadRelays(b *testing.B) {
	for _, c := range []struct {
		name string
		sync deadRelaySync
	}{
		{"dead=0", deadRelaySync{repos: 20}},
		{"dead=20", deadRelaySync{repos: 20, dead: 20}},
		{"silent=20", deadRelaySync{repos: 20, silent: 20}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += c.sync.run(b)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/sync")
		})
	}
}

// silentPort returns the URL of a listener that accepts connections and
// never answers: a dial to it ends only at the connect timeout.
func silentPort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "ws://" + ln.Addr().String()
}

// runSidecarTB runs a sidecar until the returned stop is called (or the
// test ends); it waits until the sidecar is ready.
func runSidecarTB(tb testing.TB, cfg *config.Config) (sc *sidecar.Sidecar, stop func()) {
	tb.Helper()
	log := zaptest.NewLogger(tb, zaptest.Level(zap.WarnLevel))
	if _, ok := tb.(*testing.B); ok {
		log = zap.NewNop()
		// GRASP_SYNC_BENCH_LOG=FILE: a benchmark's sidecar logs at debug
		// level to FILE, a trace of the run.
		if p := os.Getenv("GRASP_SYNC_BENCH_LOG"); p != "" {
			zc := zap.NewDevelopmentConfig()
			zc.OutputPaths = []string{p}
			zc.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
			log, _ = zc.Build()
		}
	}
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: log, Registry: prometheus.NewRegistry(), Version: "test"})
	if err != nil {
		tb.Fatalf("sidecar.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("sidecar Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				tb.Error("sidecar did not stop")
			}
		})
	}
	tb.Cleanup(stop)
	testkit.WaitFor(tb, syncTimeout, "sidecar never became ready", sc.Ready)
	return sc, stop
}

// logRefusals logs, for every "too many concurrent REQs" NOTICE the relay
// sent, the REQ/CLOSE traffic that led to it and what was open then.
func logRefusals(t *testing.T, r *harness.Relay) {
	t.Helper()
	var all []harness.Msg
	for _, m := range r.Received(time.Time{}) {
		if m.Type == "REQ" || m.Type == "CLOSE" {
			m.Raw = m.Type + " " + m.SubID
			all = append(all, m)
		}
	}
	for _, m := range r.Sent(time.Time{}) {
		if m.Type == "NOTICE" || m.Type == "EOSE" || m.Type == "CLOSED" {
			m.Raw = "  <- " + m.Raw
			all = append(all, m)
		}
	}
	if len(all) == 0 {
		return
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	open := map[int]map[string]bool{}
	for i, m := range all {
		if open[m.Conn] == nil {
			open[m.Conn] = map[string]bool{}
		}
		switch m.Type {
		case "REQ":
			open[m.Conn][m.SubID] = true
		case "CLOSE", "CLOSED":
			delete(open[m.Conn], m.SubID)
		}
		if m.Type == "NOTICE" && strings.Contains(m.Raw, "too many concurrent") {
			for _, p := range all[max(0, i-20) : i+1] {
				t.Logf("%s conn %d %s", p.Time.Sub(all[0].Time).Round(time.Microsecond), p.Conn, p.Raw)
			}
			t.Logf("open on conn %d: %v", m.Conn, open[m.Conn])
		}
	}
}
