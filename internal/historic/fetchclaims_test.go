package historic

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
)

func claimID(i int) string { return fmt.Sprintf("%064x", i+1) }

func claimKey(id string) event.ID {
	var k event.ID
	_, _ = hex.Decode(k[:], []byte(id))
	return k
}

// take plans a round and claims every REQ of it at once, as if each were
// sent at once.
func (t *fetchClaims) take(ids []string, per int, state func(event.ID) int, force bool) claimPlan {
	p := t.plan(ids, per, state, force)
	mine := p.mine
	p.mine = nil
	for _, b := range mine {
		if t.claim(b, state, force, &p) {
			p.mine = append(p.mine, b)
		}
	}
	return p
}

// batchIDs is the ids of a plan's REQs, in order.
func batchIDs(p claimPlan) [][]string {
	var out [][]string
	for _, b := range p.mine {
		out = append(out, b.ids)
	}
	return out
}

func TestFetchClaimsTake(t *testing.T) {
	ct := newFetchClaims()
	a, b, c, d, e := claimID(0), claimID(1), claimID(2), claimID(3), claimID(4)
	seen, flying := claimKey(e), claimKey(claimID(5))
	settled := func(k event.ID) int {
		switch k {
		case seen:
			return ingest.IDSettled
		case flying:
			return ingest.IDInFlight
		}
		return ingest.IDUnseen
	}

	// The first fetch claims every id it asks for, in REQs of two.
	p1 := ct.take([]string{a, b, c}, 2, settled, false)
	if got := batchIDs(p1); !slices.Equal(got[0], []string{a, b}) || !slices.Equal(got[1], []string{c}) || len(got) != 2 {
		t.Fatalf("first fetch's REQs %v", got)
	}
	if ct.len() != 3 || len(p1.deferred) != 0 || len(p1.settled) != 0 {
		t.Fatalf("claims %d, deferred %v, settled %v", ct.len(), p1.deferred, p1.settled)
	}
	// A second fetch asks only for what is neither claimed nor settled,
	// and defers the rest to the REQs that claimed it.
	p2 := ct.take([]string{b, c, d, e, claimID(5)}, 2, settled, false)
	if got := batchIDs(p2); len(got) != 1 || !slices.Equal(got[0], []string{d}) {
		t.Fatalf("second fetch's REQs %v, want [[d]]", got)
	}
	if !slices.Equal(p2.settled, []string{e}) || !slices.Equal(p2.inflight, []string{claimID(5)}) {
		t.Errorf("settled %v, in flight %v, want [e] and [f]", p2.settled, p2.inflight)
	}
	if !slices.Equal(p2.deferred[p1.mine[0]], []string{b}) || !slices.Equal(p2.deferred[p1.mine[1]], []string{c}) || len(p2.deferred) != 2 {
		t.Errorf("deferred %v, want b to the first REQ, c to the second", p2.deferred)
	}
	// Forced, a fetch asks for claimed ids too, without taking their
	// claim over.
	p3 := ct.take([]string{b, d}, 10, nil, true)
	if got := batchIDs(p3); len(got) != 1 || !slices.Equal(got[0], []string{b, d}) || len(p3.deferred) != 0 {
		t.Fatalf("forced fetch's REQs %v, deferred %v", got, p3.deferred)
	}
	if len(p3.mine[0].keys) != 0 {
		t.Errorf("a forced fetch claimed %d ids already claimed", len(p3.mine[0].keys))
	}
	// An id that does not decode is asked for, never claimed.
	p4 := ct.take([]string{"zz"}, 10, settled, false)
	if got := batchIDs(p4); len(got) != 1 || got[0][0] != "zz" || len(p4.mine[0].keys) != 0 {
		t.Errorf("bad id: REQs %v", got)
	}
}

func TestFetchClaimsResolve(t *testing.T) {
	ct := newFetchClaims()
	a, b, c := claimID(0), claimID(1), claimID(2)
	p1 := ct.take([]string{a, b, c}, 10, nil, false)
	p2 := ct.take([]string{a, b, c}, 10, nil, false)
	if len(p2.mine) != 0 || len(p2.deferred[p1.mine[0]]) != 3 {
		t.Fatalf("second fetch: REQs %v, deferred %v", batchIDs(p2), p2.deferred)
	}
	clk := clock.NewManual(time.Unix(1000, 0))
	woke := make(chan claimWait, 1)
	go func() { woke <- waitClaims(context.Background(), clk, time.Minute, p2.deferred) }()
	select {
	case w := <-woke:
		t.Fatalf("the waiter returned before the claim resolved: %+v", w)
	case <-time.After(20 * time.Millisecond):
	}
	// The claimant's REQ delivered a and c, not b (a relay that lacks
	// what it reconciled, or a connection that dropped).
	ct.resolve(p1.mine[0], func(id string) bool { return id != b }, nil)
	w := <-woke
	if !slices.Equal(w.delivered, []string{a, c}) || !slices.Equal(w.failed, []string{b}) || len(w.timedOut) != 0 {
		t.Errorf("waiter got %+v, want a and c delivered, b failed", w)
	}
	if n := ct.len(); n != 0 {
		t.Errorf("%d claims left after the REQ ended", n)
	}
	// Released, the ids can be claimed again.
	if p3 := ct.take([]string{b}, 10, nil, false); len(p3.mine) != 1 || len(p3.mine[0].keys) != 1 {
		t.Errorf("b not claimable after its claim failed: %+v", p3)
	}
}

func TestFetchClaimsWaitTimesOut(t *testing.T) {
	ct := newFetchClaims()
	a, b := claimID(0), claimID(1)
	p1 := ct.take([]string{a}, 10, nil, false)
	p1b := ct.take([]string{b}, 10, nil, false)
	p2 := ct.take([]string{a, b}, 10, nil, false)
	ct.resolve(p1b.mine[0], func(string) bool { return true }, nil)
	clk := clock.NewManual(time.Unix(1000, 0))
	woke := make(chan claimWait, 1)
	go func() { woke <- waitClaims(context.Background(), clk, 5*time.Second, p2.deferred) }()
	for clk.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	clk.Advance(4 * time.Second)
	select {
	case w := <-woke:
		t.Fatalf("returned before the wait was over: %+v", w)
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Second)
	w := <-woke
	if !slices.Equal(w.timedOut, []string{a}) || !slices.Equal(w.delivered, []string{b}) || len(w.failed) != 0 {
		t.Errorf("waiter got %+v, want a timed out, b delivered", w)
	}
	// The claimant still resolves its claim later.
	ct.resolve(p1.mine[0], func(string) bool { return false }, nil)
	if n := ct.len(); n != 0 {
		t.Errorf("%d claims left", n)
	}
}

// TestWaitFlights: ids on their way to the own relay count once settled; a
// copy refused as invalid (unseen again after it was seen) is fetched; a
// delivered id not yet seen (queued in the handler) is waited for; what is
// not settled by the deadline is fetched.
func TestWaitFlights(t *testing.T) {
	a, b, c, d, e := claimID(0), claimID(1), claimID(2), claimID(3), claimID(4)
	var mu sync.Mutex
	states := map[event.ID]int{
		claimKey(a): ingest.IDInFlight, // will be accepted
		claimKey(b): ingest.IDInFlight, // will be refused as invalid
		claimKey(c): ingest.IDUnseen,   // delivered, queued; then accepted
		claimKey(d): ingest.IDUnseen,   // delivered, never settles
		claimKey(e): ingest.IDSettled,
	}
	state := func(k event.ID) int {
		mu.Lock()
		defer mu.Unlock()
		return states[k]
	}
	set := func(id string, st int) {
		mu.Lock()
		states[claimKey(id)] = st
		mu.Unlock()
	}
	clk := clock.NewManual(time.Unix(1000, 0))
	type result struct{ settled, refused, late []string }
	done := make(chan result, 1)
	go func() {
		s, r, l := waitFlights(context.Background(), clk, 3*time.Second, state, []string{a, b}, []string{c, d, e})
		done <- result{s, r, l}
	}()
	for clk.Waiters() < 2 {
		time.Sleep(time.Millisecond)
	}
	set(a, ingest.IDSettled)
	set(b, ingest.IDUnseen)
	set(c, ingest.IDInFlight)
	clk.Advance(50 * time.Millisecond)
	set(c, ingest.IDSettled)
	for i := 0; i < 100; i++ {
		clk.Advance(50 * time.Millisecond)
		select {
		case r := <-done:
			slices.Sort(r.settled)
			if !slices.Equal(r.settled, []string{a, c, e}) || !slices.Equal(r.refused, []string{b}) || !slices.Equal(r.late, []string{d}) {
				t.Fatalf("settled %v, refused %v, late %v; want [a c e], [b], [d]", r.settled, r.refused, r.late)
			}
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatal("waitFlights did not return after its deadline")
}

// TestFetchClaimsDroppedNotDelivered: an id the claiming fetch's REQ
// returned but its emit dropped before the handler (outside the job's
// filter, or the emit failed) resolves its claim as not delivered, so the
// fetch waiting for the claim fetches it at once instead of waiting for
// the handler to settle an event it never got.
func TestFetchClaimsDroppedNotDelivered(t *testing.T) {
	ct := newFetchClaims()
	a, b, c := claimID(0), claimID(1), claimID(2)
	p1 := ct.take([]string{a, b, c}, 10, nil, false)
	p2 := ct.take([]string{a, b, c}, 10, nil, false)
	tally := NewFetchTally()
	ctx := WithDropNote(context.Background(), tally.Drop)
	handled := 0
	emit := tally.Wrap(func(ctx context.Context, in ingest.Incoming) error {
		switch in.Event.ID {
		case b:
			NoteDropped(ctx, b) // as historic's emit does for no_match
			return nil
		case c:
			return context.Canceled // the handler's queue gave up
		}
		handled++
		return nil
	}, func() {})
	for _, id := range []string{a, b, c} {
		_ = emit(ctx, ingest.Incoming{Event: &nostr.Event{ID: id}})
	}
	ct.resolve(p1.mine[0], tally.Delivered, nil)
	w := waitClaims(context.Background(), clock.NewManual(time.Unix(1000, 0)), time.Minute, p2.deferred)
	if !slices.Equal(w.delivered, []string{a}) || !slices.Equal(w.failed, []string{b, c}) || handled != 1 {
		t.Errorf("waiter got %+v (handled %d), want a delivered, b and c failed", w, handled)
	}
	// Without a fetch in ctx, a drop notice is nobody's business.
	NoteDropped(context.Background(), a)
}

// TestFetchClaimsClaimWhenSent: a REQ claims its ids when it is sent, so
// a fetch waiting for a slot does not make another relay's fetch wait for
// ids it has not asked for yet; what the other claimed meanwhile is left
// to it when the waiting REQ is sent.
func TestFetchClaimsClaimWhenSent(t *testing.T) {
	ct := newFetchClaims()
	var ids []string
	for i := range 6 {
		ids = append(ids, claimID(i))
	}
	pA := ct.plan(ids, 2, nil, false)
	if len(pA.mine) != 3 || ct.len() != 0 {
		t.Fatalf("plan: %d REQs, %d claims; want 3 REQs, nothing claimed yet", len(pA.mine), ct.len())
	}
	if !ct.claim(pA.mine[0], nil, false, &pA) || ct.len() != 2 {
		t.Fatalf("A's first REQ sent: %d claims, want 2", ct.len())
	}
	// B asks for ids of A's first and last REQ: it defers to the first
	// (sent) and claims the last (still waiting for a slot) itself.
	pB := ct.take([]string{ids[0], ids[4], ids[5]}, 10, nil, false)
	if got := batchIDs(pB); len(got) != 1 || !slices.Equal(got[0], ids[4:6]) {
		t.Fatalf("B's REQs %v, want %v", got, ids[4:6])
	}
	if d := pB.deferred[pA.mine[0]]; !slices.Equal(d, ids[:1]) {
		t.Fatalf("B deferred %v to A's first REQ, want %v", d, ids[:1])
	}
	// A's second REQ goes out whole; its last is left to B's claim.
	if !ct.claim(pA.mine[1], nil, false, &pA) || !slices.Equal(pA.mine[1].ids, ids[2:4]) {
		t.Fatalf("A's second REQ %v, want %v", pA.mine[1].ids, ids[2:4])
	}
	last := pA.mine[2]
	if ct.claim(last, nil, false, &pA) || len(last.ids) != 0 || len(last.keys) != 0 {
		t.Fatalf("A's last REQ kept %v (claims %d), want it empty", last.ids, len(last.keys))
	}
	if d := pA.deferred[pB.mine[0]]; !slices.Equal(d, ids[4:6]) {
		t.Fatalf("A deferred %v to B's REQ, want %v", d, ids[4:6])
	}
	// A later round (force) asks for what is still missing whatever the
	// claims, and claims only what no one holds.
	pF := ct.plan(ids[4:], 10, nil, true)
	if !ct.claim(pF.mine[0], nil, true, &pF) || !slices.Equal(pF.mine[0].ids, ids[4:6]) || len(pF.mine[0].keys) != 0 {
		t.Fatalf("forced REQ %v with %d claims, want %v and none", pF.mine[0].ids, len(pF.mine[0].keys), ids[4:6])
	}
	// Settled meanwhile: left out when sent.
	settled := func(k event.ID) int {
		if k == claimKey(ids[3]) {
			return ingest.IDSettled
		}
		return ingest.IDUnseen
	}
	pS := ct.plan(ids[3:4], 10, nil, true)
	if ct.claim(pS.mine[0], settled, true, &pS) || !slices.Equal(pS.settled, ids[3:4]) {
		t.Fatalf("settled id: REQ %v, settled %v", pS.mine[0].ids, pS.settled)
	}
}

// TestFetchClaimsWaitWhileHeardOf: a claim whose REQ keeps delivering is
// waited for claim_wait after it was last heard of, not after the wait
// began (a REQ slowed by backpressure); a silent one times out.
func TestFetchClaimsWaitWhileHeardOf(t *testing.T) {
	w := newClaimWaiter(t, false)
	w.step(4 * time.Second)
	w.claimant.note(w.clk.Now(), false) // an event delivered at 4 s
	w.step(time.Second)
	w.step(3 * time.Second) // 8 s: heard of 4 s ago
	select {
	case got := <-w.woke:
		t.Fatalf("gave up on a claim heard of 4 s ago (claim_wait 5 s): %+v", got)
	case <-time.After(20 * time.Millisecond):
	}
	w.step(time.Second) // 9 s: silent for 5 s
	w.timedOut()
}
