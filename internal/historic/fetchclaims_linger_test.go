package historic

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
)

// stateMap is a settable IDState for tests.
type stateMap struct {
	mu sync.Mutex
	m  map[event.ID]int
}

func (s *stateMap) set(id string, st int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[event.ID]int{}
	}
	s.m[claimKey(id)] = st
}

func (s *stateMap) state(k event.ID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

// TestFetchClaimsDeliveredKeptUntilHandled: an id whose REQ delivered it
// while the handler has not taken it up yet (still queued: unseen) is not
// asked for again by another fetch: it waits for the handler. Once the
// handler had it in flight and then refused it (a forged copy), it is
// fetched again; an id the REQ did not deliver is fetched at once.
func TestFetchClaimsDeliveredKeptUntilHandled(t *testing.T) {
	ct := newFetchClaims()
	var st stateMap
	a, b := claimID(0), claimID(1)
	p1 := ct.take([]string{a, b}, 10, st.state, false)
	ct.resolve(p1.mine[0], func(id string) bool { return id == a }, st.state)
	if n := ct.len(); n != 0 {
		t.Fatalf("%d claims left after the REQ ended", n)
	}
	// a is queued in the handler: another relay's fetch waits for it.
	p2 := ct.take([]string{a, b}, 10, st.state, false)
	if len(p2.mine) != 1 || !slices.Equal(p2.mine[0].ids, []string{b}) {
		t.Fatalf("fetch asks for %+v, want only b (a was delivered and is queued)", p2.mine)
	}
	w := waitClaims(context.Background(), clock.NewManual(time.Unix(1000, 0)), time.Minute, p2.deferred)
	if !slices.Equal(w.delivered, []string{a}) || len(w.failed)+len(w.timedOut) != 0 {
		t.Fatalf("wait for a: %+v, want delivered", w)
	}
	ct.resolve(p2.mine[0], func(string) bool { return false }, st.state)
	// In flight, then refused as invalid: a is unseen again and fetched.
	st.set(a, ingest.IDInFlight)
	if p := ct.take([]string{a}, 10, st.state, false); !slices.Equal(p.inflight, []string{a}) {
		t.Fatalf("in flight: plan %+v", p)
	}
	st.set(a, ingest.IDUnseen)
	if p := ct.take([]string{a}, 10, st.state, false); len(p.mine) != 1 || len(p.deferred) != 0 {
		t.Fatalf("after a refused copy a must be fetched: plan %+v", p)
	}
}

// TestFetchClaimsInvalidNotKept: a delivered id the handler dropped as
// invalid is fetched by the next fetch, and a forced round never defers.
func TestFetchClaimsInvalidNotKept(t *testing.T) {
	ct := newFetchClaims()
	var st stateMap
	a := claimID(0)
	p1 := ct.take([]string{a}, 10, st.state, false)
	ct.resolve(p1.mine[0], func(string) bool { return true }, st.state)
	pf := ct.take([]string{a}, 10, st.state, true)
	if len(pf.mine) != 1 {
		t.Fatalf("forced round: plan %+v", pf)
	}
	ct.resolve(pf.mine[0], func(string) bool { return false }, st.state)
	st.set(a, ingest.IDInvalid)
	if p := ct.take([]string{a}, 10, st.state, false); len(p.mine) != 1 || len(p.deferred) != 0 {
		t.Fatalf("invalid: plan %+v, want a fetched", p)
	}
}

// TestWaitFlightsInvalidRefusedAtOnce: a delivered id whose copy the
// handler dropped as invalid is refused at once, without waiting for the
// deadline.
func TestWaitFlightsInvalidRefusedAtOnce(t *testing.T) {
	var st stateMap
	a, b := claimID(0), claimID(1)
	st.set(a, ingest.IDInvalid)
	st.set(b, ingest.IDSettled)
	clk := clock.NewManual(time.Unix(1000, 0)) // never advanced
	done := make(chan struct{})
	var settled, refused, late []string
	go func() {
		defer close(done)
		settled, refused, late = waitFlights(context.Background(), clk, time.Minute, st.state, nil, []string{a, b})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waitFlights waited for an id dropped as invalid")
	}
	if !slices.Equal(refused, []string{a}) || !slices.Equal(settled, []string{b}) || len(late) != 0 {
		t.Fatalf("settled %v refused %v late %v", settled, refused, late)
	}
}
