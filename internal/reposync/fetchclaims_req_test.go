package reposync

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/harness"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// TestFetchClaimsHeldNotTimedOut: a claim whose REQ waits for the
// sidecar's own pipeline (the event budget, the handler's queue) is
// waited for however long that takes, since a fetch of the waiter's own
// would wait there too; once it is heard of again, claim_wait runs anew.
func TestFetchClaimsHeldNotTimedOut(t *testing.T) {
	ct := newFetchClaims()
	a := claimID(0)
	p1 := ct.take([]string{a}, 10, nil, false)
	p2 := ct.take([]string{a}, 10, nil, false)
	clk := clock.NewManual(time.Unix(1000, 0))
	claimant := p1.mine[0]
	claimant.note(clk.Now(), true)
	woke := make(chan claimWait, 1)
	go func() { woke <- waitClaims(context.Background(), clk, 5*time.Second, p2.deferred) }()
	step := func(d time.Duration) {
		t.Helper()
		for clk.Waiters() == 0 {
			select {
			case w := <-woke:
				t.Fatalf("the waiter returned at %s: %+v", clk.Now().Sub(time.Unix(1000, 0)), w)
			case <-time.After(time.Millisecond):
			}
		}
		clk.Advance(d)
	}
	for range 4 {
		step(5 * time.Second) // 20 s held: still waiting
	}
	claimant.note(clk.Now(), false) // handed its event on at 20 s
	step(4 * time.Second)
	step(time.Second) // 25 s: silent for 5 s
	w := <-woke
	if !slices.Equal(w.timedOut, []string{a}) {
		t.Fatalf("waiter got %+v, want a timed out", w)
	}
	ct.resolve(claimant, func(string) bool { return true }, nil)
}

// TestFetchClaimsPerSentREQ: against a real relay, a fetch whose REQs go
// out one at a time (one slot) holds the claims of the REQ that runs, not
// of the REQs still waiting: another relay's fetch would wait for those.
func TestFetchClaimsPerSentREQ(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "claims"})
	evs := harness.Corpus()[:6]
	r.Inject(evs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := relay.Dial(ctx, r.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg := NegConfig{Enabled: true, Options: neg.DefaultOptions(), FetchBatch: 2, SupportTTL: time.Hour, ClaimWait: time.Minute}
	s, err := NewNegSyncer(cfg, &Pager{PageSize: 100, EOSETimeout: 10 * time.Second}, nil, prometheus.NewRegistry(), zap.NewNop(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
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
		if n != cfg.FetchBatch {
			t.Fatalf("claims held as each event was handed on: %v; want %d (the running REQ's), not up to %d", held, cfg.FetchBatch, len(ids))
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
	r := harness.Start(t, harness.RelayOptions{Name: "progress"})
	evs := harness.Corpus()[:3]
	r.Inject(evs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := relay.Dial(ctx, r.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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

// TestFetchCountsSkipsWhenCut: ids a fetch round left out (settled, in
// flight, claimed by another REQ) are counted in fetch_skipped_total also
// when the round is cut short.
func TestFetchCountsSkipsWhenCut(t *testing.T) {
	r := harness.Start(t, harness.RelayOptions{Name: "cut"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := relay.Dial(ctx, r.URL(), relay.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cfg := NegConfig{Enabled: true, Options: neg.DefaultOptions(), FetchBatch: 2, SupportTTL: time.Hour, ClaimWait: time.Minute}
	s, err := NewNegSyncer(cfg, &Pager{PageSize: 100, EOSETimeout: 10 * time.Second}, nil, prometheus.NewRegistry(), zap.NewNop(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{claimID(0), claimID(1), claimID(2)}
	s.IDState = func(k [32]byte) int {
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
