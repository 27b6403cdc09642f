package integration

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
)

// pubRace reports a -race build, where signing and khatru's signature
// checks are some 20 times slower.
var pubRace = sync.OnceValue(func() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return true
			}
		}
	}
	return false
})

// pubEvents is how many events the publisher scenarios publish: 10,000,
// or 500 in a -race build, where 10,000 would take minutes.
func pubEvents() int {
	if pubRace() {
		return 500
	}
	return 10_000
}

// pubCorpus is the signed issues shared by the publisher scenarios.
var pubCorpus = sync.OnceValue(func() []*nostr.Event {
	evs := make([]*nostr.Event, pubEvents())
	base := nostr.Timestamp(1_700_000_000)
	for i := range evs {
		evs[i] = &nostr.Event{
			Kind:      signed.KindIssue,
			CreatedAt: base + nostr.Timestamp(i/10),
			Content:   fmt.Sprintf("issue %d", i),
			Tags:      nostr.Tags{{"subject", fmt.Sprintf("bug %d", i)}},
		}
	}
	signed.SignAll([]*signed.Key{signed.KeyFromSeed("publisher")}, evs)
	return evs
})

type pubRunning struct {
	p    *publish.Publisher
	stop func()
}

// startPub runs a publisher into the relay at url until the test ends.
func startPub(t *testing.T, url string, mut func(*publish.Config)) *pubRunning {
	t.Helper()
	cfg := publish.DefaultConfig()
	cfg.RetryBase = 20 * time.Millisecond
	cfg.RetryMax = 500 * time.Millisecond
	cfg.DialTimeout = 2 * time.Second
	cfg.QueueSize = 20_000
	cfg.QueueBytes = 0 // the tests queue a whole corpus while the relay is down
	if mut != nil {
		mut(&cfg)
	}
	dial := func(ctx context.Context) (*relay.Conn, error) {
		return relay.Dial(ctx, url, relay.DefaultOptions())
	}
	p, err := publish.New(cfg, dial, nil, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := p.Run(ctx); err != nil {
			t.Errorf("publisher Run: %v", err)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return &pubRunning{p: p, stop: stop}
}

// pubOutcomes collects the outcome of every submission.
type pubOutcomes struct {
	mu   sync.Mutex
	byID map[string][]publish.Result
	n    int
}

func newPubOutcomes() *pubOutcomes {
	return &pubOutcomes{byID: make(map[string][]publish.Result)}
}

func (o *pubOutcomes) done(r publish.Result) {
	o.mu.Lock()
	o.byID[r.ID] = append(o.byID[r.ID], r)
	o.n++
	o.mu.Unlock()
}

func (o *pubOutcomes) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// check asserts that every event got exactly one outcome and is present,
// and that the relay stores it.
func (o *pubOutcomes) check(t *testing.T, r *harness.Relay, evs []*nostr.Event) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n != len(evs) {
		t.Fatalf("%d outcomes for %d events", o.n, len(evs))
	}
	for i, ev := range evs {
		res := o.byID[ev.ID]
		if len(res) != 1 || !res[0].Present() {
			t.Fatalf("event %d: outcomes %+v", i, res)
		}
		if !r.Has(ev.ID) {
			t.Fatalf("event %d reported %s but the relay does not have it", i, res[0].Outcome)
		}
	}
}

func pubSubmit(t *testing.T, p *publish.Publisher, evs []*nostr.Event, o *pubOutcomes) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	for _, ev := range evs {
		if err := p.Submit(ctx, ev, o.done); err != nil {
			t.Fatalf("Submit: %v", err)
		}
	}
}

func pubFlush(t *testing.T, p *publish.Publisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v (stats %+v)", err, p.Stats())
	}
}

// 10,000 events (pubEvents) go through the window into khatru; every one
// gets its outcome and is stored, each sent exactly once.
func TestPublisherTenThousandEvents(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own"})
	evs := pubCorpus()
	pub := startPub(t, own.URL(), nil)
	o := newPubOutcomes()
	start := time.Now()
	pubSubmit(t, pub.p, evs, o)
	pubFlush(t, pub.p)
	elapsed := time.Since(start)
	o.check(t, own, evs)
	if n := own.Len(); n != len(evs) {
		t.Fatalf("relay holds %d events, want %d", n, len(evs))
	}
	st := pub.p.Stats()
	if st.Accepted != uint64(len(evs)) || st.Retries != 0 || st.Queued != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	if frames := own.Stats().Events; frames != len(evs) {
		t.Fatalf("relay received %d EVENT frames for %d events", frames, len(evs))
	}
	t.Logf("%d events in %s (%.0f events/s, not asserted)", len(evs), elapsed, float64(len(evs))/elapsed.Seconds())
}

// The own relay stops in the middle of a 10,000-event run (pubEvents) and
// comes back on the same port with its store: events in flight at the stop
// are sent again, events submitted while it is down wait in the queue, and
// none is lost.
func TestPublisherOwnRelayRestart(t *testing.T) {
	own := harness.Start(t, harness.RelayOptions{Name: "own"})
	evs := pubCorpus()
	n := len(evs)
	first, second := evs[:n*6/10], evs[n*6/10:]
	pub := startPub(t, own.URL(), nil)
	o := newPubOutcomes()
	pubSubmit(t, pub.p, first, o)

	testkit.WaitFor(t, syncTimeout, "30% of the outcomes before the restart", func() bool { return o.count() >= n*3/10 })
	if err := own.Stop(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, syncTimeout, "the publisher to notice the stop", func() bool { return !pub.p.Connected() })
	outcomesAtStop := o.count()
	pubSubmit(t, pub.p, second, o) // queued while the relay is down
	if st := pub.p.Stats(); st.Queued < len(second) {
		t.Fatalf("stats while down %+v: the second batch should be queued", st)
	}
	if err := own.Restart(); err != nil {
		t.Fatal(err)
	}
	pubFlush(t, pub.p)
	o.check(t, own, evs)
	if n := own.Len(); n != len(evs) {
		t.Fatalf("relay holds %d events, want %d", n, len(evs))
	}
	st := pub.p.Stats()
	if st.Accepted+st.Duplicates != uint64(len(evs)) {
		t.Fatalf("stats %+v", st)
	}
	if c := own.Stats().Connections; c < 2 {
		t.Fatalf("%d connections: the publisher did not reconnect", c)
	}
	t.Logf("restart after %d outcomes; %d EVENTs sent again; %d EVENT frames in all",
		outcomesAtStop, st.Retries, own.Stats().Events)
}

// pubLimiter is a relay-side rate limit: at most perWindow new events per
// window, the rest answered "rate-limited:".
type pubLimiter struct {
	mu        sync.Mutex
	window    time.Duration
	perWindow int
	start     time.Time
	n         int
	limited   int
}

func (l *pubLimiter) policy(_ *harness.Relay, _ *nostr.Event) (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.start) >= l.window {
		l.start, l.n = now, 0
	}
	if l.n >= l.perWindow {
		l.limited++
		return false, "rate-limited: slow down"
	}
	l.n++
	return true, ""
}

// A rate-limiting own relay gets every event eventually, and the publisher
// does not hammer it: count the EVENT frames the relay received.
func TestPublisherRateLimitedRelay(t *testing.T) {
	// 100 events/s (10/s under -race): below what khatru manages here
	total, window := 400, 50
	lim := &pubLimiter{window: 250 * time.Millisecond, perWindow: 25}
	if pubRace() {
		total, lim.window, lim.perWindow = 60, 500*time.Millisecond, 5
	}
	own := harness.Start(t, harness.RelayOptions{Name: "own", Policy: lim.policy})
	evs := pubCorpus()[:total]
	pub := startPub(t, own.URL(), func(c *publish.Config) { c.Window = window })
	o := newPubOutcomes()
	start := time.Now()
	pubSubmit(t, pub.p, evs, o)
	pubFlush(t, pub.p)
	elapsed := time.Since(start)
	o.check(t, own, evs)

	frames := own.Stats().Events
	lim.mu.Lock()
	limited := lim.limited
	lim.mu.Unlock()
	st := pub.p.Stats()
	t.Logf("%d events in %s: %d EVENT frames, %d answered rate-limited, %d retries", total, elapsed, frames, limited, st.Retries)
	if limited == 0 {
		t.Fatal("the relay never rate-limited: the scenario proves nothing")
	}
	if frames != total+limited || st.Retries != uint64(limited) {
		t.Fatalf("frames %d, rate-limited %d, retries %d: every extra frame should be a rate-limited resend", frames, limited, st.Retries)
	}
	// The first window is in flight when the relay starts refusing, so up
	// to a window of EVENTs is refused once; after that the publisher paces
	// itself at the rate it measured, and only its probes during holds and
	// the odd overshoot are refused: a few per limit period. Resending at
	// once would mean thousands of refused frames.
	periods := total / lim.perWindow
	if max := total + window + 4*periods; frames > max {
		t.Fatalf("relay received %d EVENT frames for %d events, want <= %d: the publisher does not back off", frames, total, max)
	}
}
