package health

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

// newTestPacer returns a Pacer on a manual clock without jitter: burst 3,
// 2 a second, refusal backoff 1s doubling up to 8s.
func newTestPacer(t *testing.T) (*Pacer, *clock.Manual, *observer.ObservedLogs) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Jitter = 0
	cfg.RequestBurst, cfg.RequestRate = 3, 2
	cfg.RefusalBackoffBase, cfg.RefusalBackoffMax = time.Second, 8*time.Second
	clk := clock.NewManual(epoch)
	core, logs := observer.New(zap.InfoLevel)
	p, err := NewPacer(cfg, clk, prometheus.NewRegistry(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	return p, clk, logs
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// waitAsync runs p.Wait in a goroutine; the channel receives its result.
func waitAsync(ctx context.Context, p *Pacer, url string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.Wait(ctx, url) }()
	return ch
}

// blocked asserts that no result arrives while the waiter is parked on the
// clock (it waits for the clock to hold a timer first).
func blocked(t *testing.T, clk *clock.Manual, timers int, ch <-chan error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Waiters() < timers {
		if time.Now().After(deadline) {
			select {
			case err := <-ch:
				t.Fatalf("the request did not wait: %v", err)
			default:
			}
			t.Fatalf("the request never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-ch:
		t.Fatalf("Wait returned %v, want it blocked", err)
	default:
	}
}

func done(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("Wait still blocked")
	}
}

func TestPacerBurstThenRate(t *testing.T) {
	p, clk, _ := newTestPacer(t)
	ctx := context.Background()
	for i := range 3 {
		if err := p.Wait(ctx, relayA); err != nil {
			t.Fatalf("request %d of the burst: %v", i, err)
		}
	}
	ch := waitAsync(ctx, p, relayA)
	blocked(t, clk, 1, ch)
	if got := gaugeValue(t, p.waiting.WithLabelValues(relayA)); got != 1 {
		t.Errorf("requests waiting %v, want 1", got)
	}
	clk.Advance(400 * time.Millisecond) // 0.8 token
	blocked(t, clk, 1, ch)
	clk.Advance(100 * time.Millisecond)
	done(t, ch)
	if got := gaugeValue(t, p.waiting.WithLabelValues(relayA)); got != 0 {
		t.Errorf("requests waiting %v after the wait, want 0", got)
	}
	// Another relay has its own bucket; a dial takes a token too.
	if !p.Allow(relayB) || !p.Allow(relayB) || !p.Allow(relayB) || p.Allow(relayB) {
		t.Errorf("Allow: want the burst of 3 and then none")
	}
	clk.Advance(time.Second) // 2 tokens back, never more than the burst
	clk.Advance(time.Hour)
	n := 0
	for p.Allow(relayB) {
		n++
	}
	if n != 3 {
		t.Errorf("%d tokens after an hour idle, want the burst (3)", n)
	}
}

func TestPacerWaitEndsWithItsContext(t *testing.T) {
	p, clk, _ := newTestPacer(t)
	for range 3 {
		p.Allow(relayA)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := waitAsync(ctx, p, relayA)
	blocked(t, clk, 1, ch)
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if got := gaugeValue(t, p.waiting.WithLabelValues(relayA)); got != 0 {
		t.Errorf("requests waiting %v, want 0", got)
	}
	clk.Advance(500 * time.Millisecond) // the token the cancelled request did not spend
	if !p.Allow(relayA) {
		t.Errorf("no token half a second later: the cancelled request spent one")
	}
}

// After a refusal one request per backoff goes out, the backoff doubling
// per refusal in a row; refusals of requests sent before the backoff
// began count once; an answer ends it and wakes the waiters. The log says
// so twice.
func TestPacerRefusalBackoff(t *testing.T) {
	p, clk, logs := newTestPacer(t)
	p.cfg.RequestBurst = 100
	ctx := context.Background()
	for range 3 {
		if err := p.Wait(ctx, relayA); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // the three are refused: one strike
		p.Refused(relayA, SourceClosed, "error: not now")
	}
	ch := waitAsync(ctx, p, relayA)
	blocked(t, clk, 1, ch)
	clk.Advance(999 * time.Millisecond)
	blocked(t, clk, 1, ch)
	clk.Advance(time.Millisecond)
	done(t, ch) // the probe, 1s after the refusal
	// The next request waits as long again, whether or not the probe is
	// refused; the probe's refusal doubles it.
	p.Refused(relayA, SourceNegErr, "error: still not")
	ch = waitAsync(ctx, p, relayA)
	blocked(t, clk, 1, ch)
	clk.Advance(1999 * time.Millisecond)
	blocked(t, clk, 1, ch)
	clk.Advance(time.Millisecond)
	done(t, ch)
	p.Refused(relayA, SourceNotice, "ERROR: bad req: whatever")
	if got := p.Backoff(relayA); got == "" {
		t.Errorf("Backoff empty during a refusal backoff")
	}
	ch = waitAsync(ctx, p, relayA)
	blocked(t, clk, 1, ch)
	p.Refused(relayA, SourceNotice, "welcome to the relay") // not a refusal
	p.Refused(relayA, SourceNegErr, "blocked: too many query results")
	p.Refused(relayA, SourceClosed, "error: too many filters")
	p.Refused(relayA, SourceOK, "blocked: not an answer to a request")
	p.Answered(relayA)
	done(t, ch)
	if got := p.Backoff(relayA); got != "" {
		t.Errorf("Backoff %q after an answer", got)
	}
	if err := p.Wait(ctx, relayA); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Message)
	}
	if len(msgs) != 2 {
		t.Errorf("log %q, want two lines: the refusals began, they ended", msgs)
	}
	// A relay refusing one request among answered ones: a streak soon
	// after the last is not logged again.
	p.Refused(relayA, SourceClosed, "invalid: that filter")
	p.Answered(relayA)
	if n := logs.Len(); n != 2 {
		t.Errorf("%d log lines after a second streak soon after the first, want still 2", n)
	}
}

func TestPacerBackoffCapped(t *testing.T) {
	p, clk, _ := newTestPacer(t)
	p.cfg.RequestBurst = 100
	ctx := context.Background()
	var waits []time.Duration
	for range 6 {
		if err := p.Wait(ctx, relayA); err != nil {
			t.Fatal(err)
		}
		p.Refused(relayA, SourceClosed, "invalid: no")
		start := clk.Now()
		ch := waitAsync(ctx, p, relayA)
		blocked(t, clk, 1, ch)
		at := clk.Deadlines()[0]
		clk.Advance(at.Sub(start))
		done(t, ch)
		waits = append(waits, at.Sub(start))
		p.Refused(relayA, SourceClosed, "invalid: no")
		// Now the backoff restarts from this refusal: the request above
		// was refused.
		clk.Advance(p.cfg.RefusalBackoffMax)
	}
	t.Logf("waits %v", waits)
	if waits[0] != time.Second || waits[1] < 2*time.Second {
		t.Errorf("waits %v: want 1s, then growing", waits)
	}
	if last := waits[len(waits)-1]; last != p.cfg.RefusalBackoffMax {
		t.Errorf("waits %v: want them to reach refusal_backoff_max", waits)
	}
	for _, w := range waits {
		if w > p.cfg.RefusalBackoffMax {
			t.Errorf("wait %v over refusal_backoff_max", w)
		}
	}
}

func TestRefusalNotice(t *testing.T) {
	for text, want := range map[string]bool{
		"ERROR: bad req: arr too big":   true,
		"invalid: filter too broad":     true,
		"rate-limited: slow down":       true,
		"you are sending too many REQs": true,
		"welcome to nostr":              false,
		"":                              false,
	} {
		if got := RefusalNotice(text); got != want {
			t.Errorf("RefusalNotice(%q) = %v, want %v", text, got, want)
		}
	}
}

// The refusals answered with a smaller request start no backoff.
func TestPacerAsksSmallerIsNoStrike(t *testing.T) {
	p, _, _ := newTestPacer(t)
	for _, reason := range []string{"blocked: too many query results", "error: too many filters", "ERROR: bad req: arr too big", "too many tag values"} {
		p.Refused(relayA, SourceNegErr, reason)
		if got := p.Backoff(relayA); got != "" {
			t.Errorf("after %q: backoff %q", reason, got)
		}
	}
	p.Refused(relayA, SourceNegErr, "blocked: go away")
	if p.Backoff(relayA) == "" {
		t.Errorf("no backoff after a NEG-ERR that teaches nothing")
	}
}

func TestPacerConfigValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RequestRate = 0
	if _, err := NewPacer(cfg, nil, nil, nil); err == nil {
		t.Errorf("request_rate 0 accepted")
	}
	cfg = DefaultConfig()
	cfg.RefusalBackoffMax = cfg.RefusalBackoffBase / 2
	if _, err := NewPacer(cfg, nil, nil, nil); err == nil {
		t.Errorf("refusal_backoff_max below refusal_backoff_base accepted")
	}
	var nilPacer *Pacer
	if err := nilPacer.Wait(context.Background(), relayA); err != nil || !nilPacer.Allow(relayA) {
		t.Errorf("a nil Pacer must let everything through")
	}
}

// TestPacerRefuserPerMinute: with the defaults (jitter included), a relay
// that refuses every request with an ordinary reason, asked as often as
// the pacer lets a request through, gets at most 5 requests in the minute
// after its first refusal and at most 2 in any minute after that, for half
// an hour. (The requests already on their way when the first refusal
// comes are bounded by the engine's concurrency: TestRefusingRelaysAreNotHammered
// and TestRequestBudgetHoldsForMisbehavingRelays count them.)
func TestPacerRefuserPerMinute(t *testing.T) {
	for seed := range 20 {
		clk := clock.NewManual(epoch)
		p, err := NewPacer(DefaultConfig(), clk, prometheus.NewRegistry(), zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		p.rand = rng.Float64
		perMinute := map[int]int{}
		p.Refused(relayA, SourceClosed, "error: not today") // the first refusal, at epoch
		for clk.Now().Sub(epoch) < 30*time.Minute {
			p.mu.Lock()
			now := clk.Now()
			d := p.take(p.get(relayA, now), now)
			p.mu.Unlock()
			if d > 0 {
				clk.Advance(d)
				continue
			}
			perMinute[int(now.Sub(epoch)/time.Minute)]++
			p.Refused(relayA, SourceClosed, "error: not today")
		}
		for m, n := range perMinute {
			if limit := map[bool]int{true: 5, false: 2}[m == 0]; n > limit {
				t.Errorf("seed %d: %d requests in minute %d after the first refusal, want at most %d", seed, n, m, limit)
			}
		}
		if seed == 0 {
			t.Logf("requests per minute after the first refusal: %v", perMinute)
		}
	}
}
