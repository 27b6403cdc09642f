package historic

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestFetchClaimsHeldNotTimedOut: a claim whose REQ waits for the
// sidecar's own pipeline (the event budget, the handler's queue) is
// waited for however long that takes, since a fetch of the waiter's own
// would wait there too; once it is heard of again, claim_wait runs anew.
func TestFetchClaimsHeldNotTimedOut(t *testing.T) {
	w := newClaimWaiter(t, true)
	for range 4 {
		w.step(5 * time.Second) // 20 s held: still waiting
	}
	w.claimant.note(w.clk.Now(), false) // handed its event on at 20 s
	w.step(4 * time.Second)
	w.step(time.Second) // 25 s: silent for 5 s
	w.timedOut()
}

// TestFetchClaimsPerSentREQ: against a real relay, a fetch whose REQs go
// out one at a time (one slot) holds the claims of the REQ that runs, not
// of the REQs still waiting: another relay's fetch would wait for those.
func TestFetchClaimsPerSentREQ(t *testing.T) {
	evs := signed.Corpus()[:6]
	ctx, conn := dialRelay(t, "claims", evs)
	s := newTestNegSyncer(t)
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	slices.Sort(ids)
	var held []int
	emit := func(_ context.Context, in ingest.Incoming) error {
		held = append(held, s.claims.len())
		return nil
	}
	if err := s.fetch(ctx, conn, ids, 1, emit, nil); err != nil {
		t.Fatal(err)
	}
	if len(held) != len(ids) {
		t.Fatalf("%d events handed on, want %d", len(held), len(ids))
	}
	for _, n := range held {
		if n != s.cfg.FetchBatch {
			t.Fatalf("claims held as each event was handed on: %v; want %d (the running REQ's), not up to %d", held, s.cfg.FetchBatch, len(ids))
		}
	}
	if n := s.claims.len(); n != 0 {
		t.Fatalf("%d claims left after the fetch", n)
	}
}

// TestPagerTellsREQProgress: a REQ tells its progress function that it
// waits for the sidecar's own pipeline (held) before the event budget and
// while each event is handed on, and that it was heard of once sent, for
// each event received and after each event handed on.
func TestPagerTellsREQProgress(t *testing.T) {
	evs := signed.Corpus()[:3]
	ctx, conn := dialRelay(t, "progress", evs)
	var calls []bool
	ctx = withReqProgress(ctx, func(held bool) { calls = append(calls, held) })
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	emit := func(context.Context, ingest.Incoming) error {
		if len(calls) == 0 || !calls[len(calls)-1] {
			t.Errorf("an event handed on while the REQ is not marked held: %v", calls)
		}
		return nil
	}
	p := &Pager{PageSize: 100, EOSETimeout: 10 * time.Second}
	if _, err := p.fetch(ctx, conn, nostr.Filter{IDs: ids, Limit: len(ids)}, emit); err != nil {
		t.Fatal(err)
	}
	heard := 0
	for _, held := range calls {
		if !held {
			heard++
		}
	}
	// Sent, three received, three handed on.
	if len(calls) == 0 || !calls[0] || calls[len(calls)-1] || heard != 1+2*len(evs) {
		t.Fatalf("progress %v: want held first, then heard %d times, ending heard", calls, 1+2*len(evs))
	}
}

// TestPagerEOSETimeoutOnTheClock: a relay that never sends EOSE is given
// up on when the pager's clock passes EOSETimeout, and not before.
func TestPagerEOSETimeoutOnTheClock(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "silent", Faults: harness.Faults{NoEOSE: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := relay.Dial(ctx, r.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	clk := clock.NewManual(time.Unix(1000, 0))
	p := &Pager{PageSize: 100, EOSETimeout: 24 * time.Hour, Clock: clk}
	done := make(chan error, 1)
	go func() {
		_, err := p.fetch(ctx, conn, nostr.Filter{Kinds: []int{1}, Limit: 10}, func(context.Context, ingest.Incoming) error { return nil })
		done <- err
	}()
	testkit.WaitFor(t, 10*time.Second, "the EOSE timer", func() bool { return clk.Waiters() == 1 })
	clk.Advance(24*time.Hour - time.Second)
	select {
	case err := <-done:
		t.Fatalf("fetch ended before the timeout: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	clk.Advance(time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrEOSETimeout) {
			t.Fatalf("fetch = %v, want %v", err, ErrEOSETimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fetch did not time out when the clock passed EOSETimeout")
	}
}

// TestFetchCountsSkipsWhenCut: ids a fetch round left out (settled, in
// flight, claimed by another REQ) are counted in fetch_skipped_total also
// when the round is cut short.
func TestFetchCountsSkipsWhenCut(t *testing.T) {
	ctx, conn := dialRelay(t, "cut", nil)
	s := newTestNegSyncer(t)
	ids := []string{claimID(0), claimID(1), claimID(2)}
	s.IDState = func(k event.ID) int {
		if k == claimKey(ids[0]) {
			return ingest.IDSettled
		}
		return ingest.IDUnseen
	}
	other := s.claims.take(ids[1:2], 10, nil, false) // another relay's REQ holds ids[1]
	cut, stop := context.WithCancel(ctx)
	stop()
	if err := s.fetch(cut, conn, ids, 1, func(context.Context, ingest.Incoming) error { return nil }, nil); err == nil {
		t.Fatal("a cancelled fetch reported success")
	}
	if n := counterValue(t, s.m.skipped.WithLabelValues("seen")); n != 1 {
		t.Errorf("fetch_skipped_total{seen} = %v, want 1", n)
	}
	if n := counterValue(t, s.m.skipped.WithLabelValues("claimed")); n != 1 {
		t.Errorf("fetch_skipped_total{claimed} = %v, want 1", n)
	}
	s.claims.resolve(other.mine[0], func(string) bool { return false }, nil)
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// dialRelay starts a relay holding evs and returns a connection to it,
// closed with the test, and a context ending with it (or in 30 s).
func dialRelay(t *testing.T, name string, evs []*nostr.Event) (context.Context, *relay.Conn) {
	t.Helper()
	r := harness.Start(t, harness.RelayOptions{Name: name})
	r.Inject(evs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	conn, err := relay.Dial(ctx, r.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ctx, conn
}

// newTestNegSyncer returns a NegSyncer fetching 2 ids per REQ, with no
// local set.
func newTestNegSyncer(t *testing.T) *NegSyncer {
	t.Helper()
	cfg := DefaultNegConfig()
	cfg.FetchBatch, cfg.SupportCacheTTL, cfg.ClaimWait = 2, time.Hour, time.Minute
	s, err := NewNegSyncer(cfg, &Pager{PageSize: 100, EOSETimeout: 10 * time.Second}, nil, prometheus.NewRegistry(), zap.NewNop(), clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claimWaiter is a fetch waiting (claim_wait 5 s, on a manual clock
// started at 1000 s) for another fetch's REQ that claimed one id.
type claimWaiter struct {
	t        *testing.T
	ct       *fetchClaims
	id       string
	claimant *claimBatch
	clk      *clock.Manual
	woke     chan claimWait
}

// newClaimWaiter starts the wait; the claimant was heard of at its start,
// held by the sidecar's own pipeline or not.
func newClaimWaiter(t *testing.T, held bool) *claimWaiter {
	w := &claimWaiter{t: t, ct: newFetchClaims(), id: claimID(0), clk: clock.NewManual(time.Unix(1000, 0)), woke: make(chan claimWait, 1)}
	p1 := w.ct.take([]string{w.id}, 10, nil, false)
	p2 := w.ct.take([]string{w.id}, 10, nil, false)
	w.claimant = p1.mine[0]
	w.claimant.note(w.clk.Now(), held)
	go func() { w.woke <- waitClaims(context.Background(), w.clk, 5*time.Second, p2.deferred) }()
	return w
}

// step waits until the waiter sleeps on the clock (failing if it returned)
// and advances the clock by d.
func (w *claimWaiter) step(d time.Duration) {
	w.t.Helper()
	for w.clk.Waiters() == 0 {
		select {
		case got := <-w.woke:
			w.t.Fatalf("the waiter returned at %s: %+v", w.clk.Now().Sub(time.Unix(1000, 0)), got)
		case <-time.After(time.Millisecond):
		}
	}
	w.clk.Advance(d)
}

// timedOut fails unless the wait ended with the id timed out, then ends
// the claim.
func (w *claimWaiter) timedOut() {
	w.t.Helper()
	if got := <-w.woke; !slices.Equal(got.timedOut, []string{w.id}) {
		w.t.Fatalf("waiter got %+v, want %s timed out", got, w.id)
	}
	w.ct.resolve(w.claimant, func(string) bool { return true }, nil)
}
