package publish

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/nbd-wtf/go-nostr"
)

func TestOKAnswersMapToOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		ok     bool
		reason string
		want   Outcome
	}{
		{"ok", true, "", Accepted},
		{"ok with message", true, "stored", Accepted},
		{"ok duplicate", true, "duplicate: already have this event", Duplicate},
		{"false duplicate", false, "duplicate: already have this event", Duplicate},
		{"blocked", false, "blocked: not a repository we host", Rejected},
		{"invalid", false, "invalid: bad signature", Rejected},
		{"error", false, "error: could not save", Rejected},
		{"no prefix", false, "nope", Rejected},
	}
	f := newFakeRelay(t)
	answers := make(map[string]reply)
	f.setDecide(func(_ *fakeConn, ev *nostr.Event) reply { return answers[ev.ID] })
	h := startPublisher(t, testConfig(), f.dialer(), nil)
	evs := makeEvents(t, len(tests))
	f.mu.Lock()
	for i, tt := range tests {
		answers[evs[i].ID] = reply{ok: tt.ok, reason: tt.reason}
	}
	f.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.p.Publish(ctx, evs[i])
			if err != nil {
				t.Fatal(err)
			}
			if got.Outcome != tt.want || got.Reason != tt.reason || got.ID != evs[i].ID || got.Attempts != 1 {
				t.Fatalf("got %+v, want outcome %s reason %q after 1 attempt", got, tt.want, tt.reason)
			}
		})
	}
	st := h.p.Stats()
	if st.Accepted != 2 || st.Duplicates != 2 || st.Rejected != 4 || st.Retries != 0 {
		t.Fatalf("stats %+v", st)
	}
	for result, want := range map[string]float64{"accepted": 2, "duplicate": 2, "rejected": 4} {
		if got := testkit.Metric(t, h.reg, MetricResults, map[string]string{"result": result}); got != want {
			t.Errorf("%s{result=%q} = %v, want %v", MetricResults, result, got, want)
		}
	}
	if got := testkit.Metric(t, h.reg, MetricConnected, nil); got != 1 {
		t.Errorf("%s = %v, want 1", MetricConnected, got)
	}
}

// The relay answers only once it holds a full window of unanswered EVENTs:
// a publisher that waited for each OK before sending the next would stall.
func TestPipelinesUpToWindow(t *testing.T) {
	const window, total = 8, 60
	f := newFakeRelay(t)
	var pending []string
	var outstanding, maxOutstanding, received int
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		received++
		pending = append(pending, ev.ID)
		outstanding++
		maxOutstanding = max(maxOutstanding, outstanding)
		if len(pending) == window || received == total {
			for _, id := range pending {
				c.answer(id, true, "")
			}
			outstanding -= len(pending)
			pending = pending[:0]
		}
		return reply{silent: true}
	})
	cfg := testConfig()
	cfg.Window = window
	h := startPublisher(t, cfg, f.dialer(), nil)
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == total })
	for _, ev := range evs {
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if maxOutstanding != window {
		t.Fatalf("at most %d EVENTs were awaiting OK, want exactly the window %d", maxOutstanding, window)
	}
	if f.frames != total {
		t.Fatalf("relay received %d EVENT frames, want %d", f.frames, total)
	}
	if got := testkit.Metric(t, h.reg, MetricWindow, nil); got != window {
		t.Errorf("%s = %v, want the configured window %d", MetricWindow, got, window)
	}
	// First sends follow submission order.
	want := make([]string, total)
	for i, ev := range evs {
		want[i] = ev.ID
	}
	if !slices.Equal(f.order, want) {
		t.Fatal("EVENTs did not arrive in submission order")
	}
}

func TestSameEventSubmittedTwiceIsSentOnce(t *testing.T) {
	f := newFakeRelay(t)
	var held *fakeConn
	var heldID string
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		held, heldID = c, ev.ID
		f.stored[ev.ID] = true
		return reply{silent: true}
	})
	h := startPublisher(t, testConfig(), f.dialer(), nil)
	ev := makeEvents(t, 1)[0]
	res := newResults()
	submitAll(t, h.p, []*nostr.Event{ev}, res)
	testkit.WaitFor(t, 10*time.Second, "the EVENT to arrive", func() bool { n, _, _ := f.snapshot(); return n == 1 })
	submitAll(t, h.p, []*nostr.Event{ev}, res)
	testkit.WaitFor(t, 10*time.Second, "both submissions counted", func() bool { return h.p.Stats().InFlight == 1 })
	f.mu.Lock()
	held.answer(heldID, true, "")
	f.mu.Unlock()
	testkit.WaitFor(t, 10*time.Second, "two outcomes", func() bool { return res.count() == 2 })
	for _, r := range res.get(ev.ID) {
		if r.Outcome != Accepted || r.Attempts != 1 {
			t.Fatalf("result %+v", r)
		}
	}
	if n, _, _ := f.snapshot(); n != 1 {
		t.Fatalf("relay received %d EVENT frames, want 1", n)
	}
	if st := h.p.Stats(); st.Accepted != 1 {
		t.Fatalf("stats %+v: the event counts once", st)
	}
}

// A relay that rate-limits for a while gets every event, with a bounded
// number of EVENT frames: the publisher shrinks its window and waits with
// growing delays instead of resending in a loop.
func TestRateLimitedSlowsDownAndRetries(t *testing.T) {
	const total = 100
	f := newFakeRelay(t)
	var limitUntil time.Time
	var limited, maxAfterLimit, outstanding int
	var pending []string
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if limitUntil.IsZero() && f.frames > 20 {
			// from the 21st EVENT on, refuse everything for 300ms
			limitUntil = time.Now().Add(300 * time.Millisecond)
		}
		if time.Now().Before(limitUntil) {
			limited++
			return reply{ok: false, reason: "rate-limited: slow down"}
		}
		if limited == 0 {
			return f.accept(ev)
		}
		// After the limit, hold OKs briefly to see how many EVENTs the
		// publisher has outstanding: its window restarts at 1.
		f.accept(ev)
		pending = append(pending, ev.ID)
		outstanding++
		maxAfterLimit = max(maxAfterLimit, outstanding)
		for _, id := range pending {
			c.answer(id, true, "")
		}
		outstanding -= len(pending)
		pending = pending[:0]
		return reply{silent: true}
	})
	cfg := testConfig()
	cfg.Window = 16
	cfg.RetryBase = 10 * time.Millisecond
	cfg.RetryMax = 200 * time.Millisecond
	h := startPublisher(t, cfg, f.dialer(), nil)
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 20*time.Second, "all outcomes", func() bool { return res.count() == total })
	for _, ev := range evs {
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	frames, _, _ := f.snapshot()
	f.mu.Lock()
	lim := limited
	f.mu.Unlock()
	if lim == 0 {
		t.Fatal("the relay never rate-limited: the test proves nothing")
	}
	// Within 300ms, holds of ~10, 20, 40, 80, 160ms allow about six probes
	// after the first burst (at most one window). A busy loop would send
	// thousands.
	if max := total + cfg.Window + 12; frames > max {
		t.Fatalf("relay received %d EVENT frames (%d rate-limited) for %d events, want <= %d", frames, lim, total, max)
	}
	retries := testkit.Metric(t, h.reg, MetricRetries, map[string]string{"reason": reasonRateLimited})
	if int(retries) != lim {
		t.Fatalf("%s{reason=rate_limited} = %v, want %d", MetricRetries, retries, lim)
	}
	t.Logf("%d events, %d EVENT frames, %d rate-limited", total, frames, lim)
}

// After a rate-limited answer the publisher has one EVENT outstanding, and
// the window grows back as answers come: doubling per round trip up to half
// the window that was limited, then by one per round trip. The relay answers whatever is pending once it holds every
// EVENT the publisher has in flight, so each batch it answers is the
// publisher's whole window.
func TestRateLimitedShrinksWindowAndGrowsBack(t *testing.T) {
	const total, window = 100, 16
	f := newFakeRelay(t)
	var (
		conn    *fakeConn
		pending []string
		batches []int
		limited bool
	)
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		conn = c
		if !limited {
			limited = true
			return reply{ok: false, reason: "rate-limited: slow down"}
		}
		f.accept(ev)
		pending = append(pending, ev.ID)
		return reply{silent: true}
	})
	cfg := testConfig()
	cfg.Window = window
	// connect only once everything is queued, so the first window is full
	gate := make(chan struct{})
	dial := func(ctx context.Context) (*relay.Conn, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// No read pause: the poller below takes "every event in flight has
		// arrived" for the end of a window. A pause between two parts of a
		// batch's OKs leaves, for its length, part of the next window in
		// flight alone, which the poller would answer as a batch.
		opts := coalescing()
		opts.ReadPause = 0
		return relay.Dial(ctx, f.url, opts)
	}
	h := startPublisher(t, cfg, dial, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			f.mu.Lock()
			if len(pending) > 0 && len(pending) == h.p.Stats().InFlight {
				batches = append(batches, len(pending))
				for _, id := range pending {
					conn.answer(id, true, "")
				}
				pending = pending[:0]
			}
			f.mu.Unlock()
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	close(gate)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == total })
	for _, ev := range evs {
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// 15: the rest of the first window; 1: the rate-limited event alone;
	// then doubling up to half the window that was limited (8), then one
	// more per round trip.
	want := []int{window - 1, 1, 2, 4, 8, 9, 10, 11}
	if len(batches) < len(want) || !slices.Equal(batches[:len(want)], want) {
		t.Fatalf("answered batches %v, want them to start with %v", batches, want)
	}
	if f.perID[evs[0].ID] != 2 {
		t.Fatalf("rate-limited event sent %d times, want 2", f.perID[evs[0].ID])
	}
	// 100 events do not grow the window back to 16 after the limit.
	if got := testkit.Metric(t, h.reg, MetricWindow, nil); got < 9 || got >= window {
		t.Errorf("%s = %v after the rate limit, want the regrown window below %d", MetricWindow, got, window)
	}
}

// A relay that takes a fixed number of events per period (as a per-minute
// limit does) refuses a window's worth once; then the publisher paces itself
// at the rate it measured, so later periods cost only a few refused probes.
// Without pacing every period would refuse most of a window again.
func TestRateLimitedPacesToRelayRate(t *testing.T) {
	const total, window, perPeriod = 300, 50, 30
	const period = 100 * time.Millisecond
	f := newFakeRelay(t)
	var start time.Time
	var n, limited int
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if now := time.Now(); now.Sub(start) >= period {
			start, n = now, 0
		}
		if n >= perPeriod {
			limited++
			return reply{ok: false, reason: "rate-limited: slow down"}
		}
		n++
		return f.accept(ev)
	})
	cfg := testConfig()
	cfg.Window = window
	cfg.RetryBase = 10 * time.Millisecond
	cfg.RetryMax = time.Second
	h := startPublisher(t, cfg, f.dialer(), nil)
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 20*time.Second, "all outcomes", func() bool { return res.count() == total })
	for _, ev := range evs {
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	frames, _, _ := f.snapshot()
	periods := total / perPeriod
	if max := total + window + 4*periods; frames > max {
		t.Fatalf("%d EVENT frames for %d events, want <= %d", frames, total, max)
	}
	t.Logf("%d events, %d EVENT frames, %d rate-limited", total, frames, frames-total)
}

func TestAuthRequiredAuthenticatesAndResends(t *testing.T) {
	const total = 30
	f := newFakeRelay(t)
	f.requireAuth = true
	h := startPublisher(t, testConfig(), f.dialer(), signer(t))
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == total })
	for _, ev := range evs {
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	frames, conns, authFrames := f.snapshot()
	if authFrames != 1 || conns != 1 {
		t.Fatalf("%d AUTH frames on %d connections, want 1 on 1", authFrames, conns)
	}
	if frames > 2*total {
		t.Fatalf("%d EVENT frames for %d events", frames, total)
	}
	if got := testkit.Metric(t, h.reg, MetricRetries, map[string]string{"reason": reasonAuth}); got == 0 || int(got) != frames-total {
		t.Fatalf("%s{reason=auth} = %v, want %d", MetricRetries, got, frames-total)
	}
}

func TestAuthRequiredWithoutSignerIsRejected(t *testing.T) {
	f := newFakeRelay(t)
	f.requireAuth = true
	h := startPublisher(t, testConfig(), f.dialer(), nil)
	ev := makeEvents(t, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := h.p.Publish(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != Rejected || got.Reason != "auth-required: authenticate first" {
		t.Fatalf("got %+v", got)
	}
	if _, _, auths := f.snapshot(); auths != 0 {
		t.Fatalf("%d AUTH frames without a signer", auths)
	}
}

func TestAuthRefusedIsRejected(t *testing.T) {
	f := newFakeRelay(t)
	f.requireAuth = true
	f.refuseAuth = true
	h := startPublisher(t, testConfig(), f.dialer(), signer(t))
	evs := makeEvents(t, 5)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == len(evs) })
	// The first event is sent again after the AUTH attempt; events sent
	// after the failed attempt are rejected at once.
	for i, ev := range evs {
		r := res.get(ev.ID)
		if len(r) != 1 || r[0].Outcome != Rejected || r[0].Attempts > 2 || i == 0 && r[0].Attempts != 2 {
			t.Fatalf("event %d: results %+v, want rejected after at most 2 attempts", i, r)
		}
	}
	if _, _, auths := f.snapshot(); auths != 1 {
		t.Fatalf("%d AUTH frames, want 1", auths)
	}
}

// An EVENT whose OK never comes is sent again after OKTimeout.
func TestMissingOKIsResent(t *testing.T) {
	const total = 10
	f := newFakeRelay(t)
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if f.perID[ev.ID] == 1 && len(f.order)%2 == 1 {
			return reply{silent: true} // every other event loses its first OK
		}
		return f.accept(ev)
	})
	cfg := testConfig()
	// Far above an answered OK's round trip on a loaded machine: an
	// answer later than this would count as a second attempt.
	cfg.OKTimeout = 3 * time.Second
	cfg.MaxTimeouts = 100
	h := startPublisher(t, cfg, f.dialer(), nil)
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == total })
	for i, ev := range evs {
		want := 1 + (i+1)%2
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted || r[0].Attempts != want {
			t.Fatalf("event %d: results %+v, want accepted after %d attempts", i, r, want)
		}
	}
	if got := testkit.Metric(t, h.reg, MetricRetries, map[string]string{"reason": reasonTimeout}); got != total/2 {
		t.Fatalf("%s{reason=timeout} = %v, want %d", MetricRetries, got, total/2)
	}
	if _, conns, _ := f.snapshot(); conns != 1 {
		t.Fatalf("%d connections, want 1", conns)
	}
}

// The OK timeout runs on the publisher's clock: a day-long timeout passes
// when the clock is moved a day, and not before.
func TestOKTimeoutOnTheClock(t *testing.T) {
	f := newFakeRelay(t)
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if f.perID[ev.ID] == 1 {
			return reply{silent: true} // the first OK never comes
		}
		return f.accept(ev)
	})
	cfg := testConfig()
	cfg.OKTimeout = 24 * time.Hour
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	h := startPublisher(t, cfg, f.dialer(), nil, WithClock(clk))
	ev := makeEvents(t, 1)[0]
	res := newResults()
	submitAll(t, h.p, []*nostr.Event{ev}, res)
	testkit.WaitFor(t, 10*time.Second, "the EVENT sent", func() bool { return f.sent(ev.ID) == 1 })
	// The OK timer is the clock's only deadline.
	testkit.WaitFor(t, 10*time.Second, "the OK timer armed", func() bool {
		d := clk.Deadlines()
		return len(d) == 1 && d[0].Equal(clk.Now().Add(cfg.OKTimeout))
	})
	clk.Advance(cfg.OKTimeout - time.Second)
	time.Sleep(50 * time.Millisecond)
	if n := f.sent(ev.ID); n != 1 || res.count() != 0 {
		t.Fatalf("before the timeout: sent %d times, %d outcomes", n, res.count())
	}
	clk.Advance(time.Second)
	testkit.WaitFor(t, 10*time.Second, "the outcome", func() bool { return res.count() == 1 })
	if r := res.get(ev.ID); r[0].Outcome != Accepted || r[0].Attempts != 2 {
		t.Fatalf("result %+v, want accepted after 2 attempts", r[0])
	}
}

// A relay that stops answering on one connection makes the publisher
// reconnect after MaxTimeouts timeouts.
func TestRepeatedTimeoutsReconnect(t *testing.T) {
	const total = 20
	f := newFakeRelay(t)
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if c.n == 1 {
			return reply{silent: true}
		}
		return f.accept(ev)
	})
	cfg := testConfig()
	cfg.OKTimeout = 200 * time.Millisecond
	cfg.MaxTimeouts = 3
	h := startPublisher(t, cfg, f.dialer(), nil)
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == total })
	for i, ev := range evs {
		// The first window went to the silent connection. (An event may
		// be a duplicate if an OK on the second connection was slower than
		// OKTimeout on a loaded machine.)
		r := res.get(ev.ID)
		if len(r) != 1 || !r[0].Present() || i < cfg.Window && r[0].Attempts < 2 {
			t.Fatalf("event %d: results %+v, want present (after a resend if in the first window)", i, r)
		}
	}
	if _, conns, _ := f.snapshot(); conns < 2 {
		t.Fatalf("%d connections, want a reconnect", conns)
	}
	if got := testkit.Metric(t, h.reg, MetricRetries, map[string]string{"reason": reasonTimeout}); got < 3 {
		t.Fatalf("%s{reason=timeout} = %v, want >= 3", MetricRetries, got)
	}
}

// The relay drops the connection mid-stream, having stored some events
// without answering: everything unacknowledged is sent again after the
// reconnect, resends of stored events come back as duplicates.
func TestDisconnectResendsUnacknowledged(t *testing.T) {
	const total = 200
	f := newFakeRelay(t)
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if c.n == 1 && c.events >= 50 {
			f.stored[ev.ID] = true // stored, OK lost
			if c.events == 60 {
				return reply{drop: true}
			}
			return reply{silent: true}
		}
		return f.accept(ev)
	})
	cfg := testConfig()
	cfg.Window = 32
	h := startPublisher(t, cfg, f.dialer(), nil)
	evs := makeEvents(t, total)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == total })
	dups := 0
	for _, ev := range evs {
		r := res.get(ev.ID)
		if len(r) != 1 || !r[0].Present() {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
		if r[0].Outcome == Duplicate {
			dups++
		}
	}
	f.mu.Lock()
	stored, conns := len(f.stored), f.conns
	f.mu.Unlock()
	if stored != total || conns != 2 {
		t.Fatalf("relay stored %d on %d connections, want %d on 2", stored, conns, total)
	}
	// The 11 events stored without OK come back as duplicates (more if the
	// abrupt close also lost OKs the relay had written).
	if dups < 11 {
		t.Fatalf("%d duplicates, want at least the 11 events stored without OK", dups)
	}
	if got := testkit.Metric(t, h.reg, MetricRetries, map[string]string{"reason": reasonDisconnect}); got < 11 {
		t.Fatalf("%s{reason=disconnect} = %v, want >= 11", MetricRetries, got)
	}
}

// Submissions made while the relay is unreachable wait and are published
// once it comes up.
func TestQueuesWhileDisconnected(t *testing.T) {
	f := newFakeRelay(t)
	var up atomic.Bool
	var dials atomic.Int32
	dial := func(ctx context.Context) (*relay.Conn, error) {
		dials.Add(1)
		if !up.Load() {
			return nil, errors.New("connection refused")
		}
		return relay.Dial(ctx, f.url, coalescing())
	}
	h := startPublisher(t, testConfig(), dial, nil)
	evs := makeEvents(t, 20)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "a few dial attempts", func() bool { return dials.Load() >= 3 })
	if h.p.Connected() || res.count() != 0 || h.p.Stats().Queued != len(evs) {
		t.Fatalf("connected %v, %d outcomes, stats %+v", h.p.Connected(), res.count(), h.p.Stats())
	}
	testkit.WaitFor(t, 10*time.Second, "the queue gauge", func() bool {
		return testkit.Metric(t, h.reg, MetricQueueLength, nil) == float64(len(evs))
	})
	up.Store(true)
	testkit.WaitFor(t, 10*time.Second, "all outcomes", func() bool { return res.count() == len(evs) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := h.p.Stats(); st.Accepted != uint64(len(evs)) || st.Queued != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSubmitBlocksWhenQueueIsFull(t *testing.T) {
	cfg := testConfig()
	cfg.Window = 2
	cfg.QueueSize = 3
	dial := func(ctx context.Context) (*relay.Conn, error) { return nil, errors.New("down") }
	h := startPublisher(t, cfg, dial, nil)
	evs := makeEvents(t, 4)
	res := newResults()
	submitAll(t, h.p, evs[:3], res)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.p.Submit(ctx, evs[3], res.done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit on a full queue: %v, want deadline exceeded", err)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer fcancel()
	if err := h.p.Flush(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with events queued: %v", err)
	}
	// A blocked Submit is released by the stop.
	errc := make(chan error, 1)
	go func() { errc <- h.p.Submit(context.Background(), evs[3], res.done) }()
	h.stop()
	if err := <-errc; !errors.Is(err, ErrStopped) {
		t.Fatalf("blocked Submit after stop: %v, want ErrStopped", err)
	}
	// The three accepted submissions were reported Dropped.
	if res.count() != 3 {
		t.Fatalf("%d outcomes, want 3", res.count())
	}
	for _, ev := range evs[:3] {
		r := res.get(ev.ID)
		if len(r) != 1 || r[0].Outcome != Dropped || !errors.Is(r[0].Err, ErrStopped) {
			t.Fatalf("results %+v", r)
		}
	}
	if err := h.p.Submit(context.Background(), evs[0], res.done); !errors.Is(err, ErrStopped) {
		t.Fatalf("Submit after stop: %v", err)
	}
	if _, err := h.p.Publish(context.Background(), evs[0]); !errors.Is(err, ErrStopped) {
		t.Fatalf("Publish after stop: %v", err)
	}
	if err := h.p.Flush(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Flush after a stop that dropped events: %v, want ErrStopped", err)
	}
	if err := h.p.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run: %v", err)
	}
}

func TestFlushWaitsForOutcomes(t *testing.T) {
	f := newFakeRelay(t)
	var held []string
	var conn *fakeConn
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		conn = c
		held = append(held, ev.ID)
		return reply{silent: true}
	})
	h := startPublisher(t, testConfig(), f.dialer(), nil)
	evs := makeEvents(t, 5)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "EVENTs to arrive", func() bool { n, _, _ := f.snapshot(); return n == len(evs) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := h.p.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with EVENTs in flight: %v", err)
	}
	if st := h.p.Stats(); st.InFlight != len(evs) {
		t.Fatalf("stats %+v", st)
	}
	flushed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		flushed <- h.p.Flush(ctx)
	}()
	f.mu.Lock()
	for _, id := range held {
		conn.answer(id, true, "")
	}
	f.mu.Unlock()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if res.count() != len(evs) {
		t.Fatalf("Flush returned with %d of %d outcomes", res.count(), len(evs))
	}
	h.stop() // a clean stop: nothing was left
	if err := h.p.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after a clean stop: %v", err)
	}
}

func TestSubmitRejectsEventWithoutID(t *testing.T) {
	p, err := New(testConfig(), newFakeRelay(t).dialer(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Submit(context.Background(), &nostr.Event{Kind: 1}, nil); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("got %v", err)
	}
	if err := p.Submit(context.Background(), nil, nil); !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("got %v", err)
	}
}

// Stopping with EVENTs awaiting their OK reports them Dropped; the relay
// never answering does not hold Run up.
func TestStopDropsInFlight(t *testing.T) {
	f := newFakeRelay(t)
	f.setDecide(func(*fakeConn, *nostr.Event) reply { return reply{silent: true} })
	h := startPublisher(t, testConfig(), f.dialer(), nil)
	evs := makeEvents(t, 5)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "EVENTs in flight", func() bool { return h.p.Stats().InFlight == len(evs) })
	if res.count() != 0 {
		t.Fatalf("%d outcomes before the stop", res.count())
	}
	h.stop()
	for _, ev := range evs {
		r := res.get(ev.ID)
		if len(r) != 1 || r[0].Outcome != Dropped || !errors.Is(r[0].AsError(), ErrStopped) || r[0].Attempts != 1 {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	if h.p.Connected() {
		t.Fatal("still connected after Run returned")
	}
}

// Run returns promptly when stopped while a dial hangs.
func TestStopDuringDial(t *testing.T) {
	dialing := make(chan struct{})
	var once sync.Once
	dial := func(ctx context.Context) (*relay.Conn, error) {
		once.Do(func() { close(dialing) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	h := startPublisher(t, testConfig(), dial, nil)
	select {
	case <-dialing:
	case <-time.After(10 * time.Second):
		t.Fatal("no dial")
	}
	h.stop() // fails the test if Run does not return
}

// TestRateLimitWordingWithoutPrefix: an OK false that says "too many …"
// without the "rate-limited:" prefix is a rate limit too (the health
// tracker's classifier, as for NOTICEs): the event is held and sent again,
// not rejected.
func TestRateLimitWordingWithoutPrefix(t *testing.T) {
	f := newFakeRelay(t)
	limited := false
	f.setDecide(func(_ *fakeConn, ev *nostr.Event) reply {
		if !limited {
			limited = true
			return reply{ok: false, reason: "error: too many events, slow down"}
		}
		f.accept(ev)
		return reply{ok: true}
	})
	h := startPublisher(t, testConfig(), f.dialer(), nil)
	evs := makeEvents(t, 1)
	res := newResults()
	submitAll(t, h.p, evs, res)
	testkit.WaitFor(t, 10*time.Second, "an outcome", func() bool { return res.count() == 1 })
	if r := res.get(evs[0].ID); r[0].Outcome != Accepted {
		t.Fatalf("outcome %+v, want accepted after the hold", r[0])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.perID[evs[0].ID] != 2 {
		t.Fatalf("event sent %d times, want 2", f.perID[evs[0].ID])
	}
}

// TestSubmitBlocksWhenQueueBytesAreFull: QueueBytes bounds the raw bytes of
// the unanswered submissions although QueueSize has room; an answer frees
// them and the waiting Submit goes on; an event bigger than the bound
// waits for the queue to be empty, then goes alone.
func TestSubmitBlocksWhenQueueBytesAreFull(t *testing.T) {
	f := newFakeRelay(t)
	var held []string
	var conn *fakeConn
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		conn = c
		held = append(held, ev.ID)
		return reply{silent: true}
	})
	evs := makeEvents(t, 4)
	raws := make([][]byte, len(evs))
	for i, ev := range evs {
		raws[i], _ = ev.MarshalJSON()
	}
	cfg := testConfig()
	cfg.QueueBytes = 2*len(raws[0]) + len(raws[0])/2
	h := startPublisher(t, cfg, f.dialer(), nil)
	res := newResults()
	ctx := context.Background()
	for i := range 2 {
		if err := h.p.SubmitRaw(ctx, evs[i], raws[i], res.done); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := h.p.SubmitRaw(short, evs[2], raws[2], res.done); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit over QueueBytes: %v, want deadline exceeded", err)
	}
	testkit.WaitFor(t, 10*time.Second, "EVENTs to arrive", func() bool { n, _, _ := f.snapshot(); return n == 2 })
	errc := make(chan error, 1)
	go func() { errc <- h.p.SubmitRaw(ctx, evs[2], raws[2], res.done) }()
	f.mu.Lock()
	conn.answer(held[0], true, "")
	f.mu.Unlock()
	if err := <-errc; err != nil {
		t.Fatalf("Submit after an answer freed the bytes: %v", err)
	}
	// bigger than the whole bound: waits until the other two are answered
	big := make(chan error, 1)
	go func() {
		big <- h.p.SubmitRaw(ctx, evs[3], slices.Concat(raws[3], bytes.Repeat([]byte(" "), cfg.QueueBytes)), res.done)
	}()
	select {
	case err := <-big:
		t.Fatalf("an event over the bound was queued beside others (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	testkit.WaitFor(t, 10*time.Second, "EVENTs to arrive", func() bool { n, _, _ := f.snapshot(); return n == 3 })
	f.mu.Lock()
	for _, id := range held[1:] {
		conn.answer(id, true, "")
	}
	f.mu.Unlock()
	if err := <-big; err != nil {
		t.Fatalf("Submit of an event over the bound into an empty queue: %v", err)
	}
	testkit.WaitFor(t, 10*time.Second, "three outcomes", func() bool { return res.count() == 3 })
}
