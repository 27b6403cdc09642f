package harness_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// Deliver stores an event and sends it to the live subscriptions it
// matches, once: a second Deliver of it is no news.
func TestDeliverReachesLiveSubscriptions(t *testing.T) {
	ctx := testCtx(t)
	r := harness.Start(t, harness.RelayOptions{})
	evs := corpus()[:2]
	c := dial(t, ctx, r.URL())
	if _, err := c.Req(ctx, "live", nostr.Filter{IDs: []string{evs[0].ID}}); err != nil {
		t.Fatal(err)
	}
	if n := r.Deliver(evs...); n != 2 {
		t.Fatalf("Deliver stored %d of 2", n)
	}
	if n := r.Deliver(evs[0]); n != 0 {
		t.Fatalf("Deliver of a stored event stored %d", n)
	}
	if !r.Has(evs[1].ID) {
		t.Fatal("the event no subscription matches was not stored")
	}
	m := nextWithin(c, 5*time.Second)
	if harness.Label(m) != "EVENT" || !strings.Contains(m, evs[0].ID) {
		t.Fatalf("the live subscription got %q, want the delivered event", m)
	}
	if m := nextWithin(c, quiet); m != "" {
		t.Fatalf("after the one matching event the subscription got %q", m)
	}
}

// CutEvery cuts every relay's connections at each period, all at once,
// and the relays take new connections right away.
func TestCutEveryCutsAllAtOnce(t *testing.T) {
	ctx := testCtx(t)
	a := harness.Start(t, harness.RelayOptions{})
	b := harness.Start(t, harness.RelayOptions{})
	ca, cb := dial(t, ctx, a.URL()), dial(t, ctx, b.URL())
	var mu sync.Mutex
	var cuts []time.Time
	stop := harness.CutEvery(200*time.Millisecond, func(at time.Time) {
		mu.Lock()
		cuts = append(cuts, at)
		mu.Unlock()
	}, a, b)
	defer stop()
	testkit.WaitFor(t, 10*time.Second, "both connections cut", func() bool { return ca.Closed() && cb.Closed() })
	stop()
	mu.Lock()
	n := len(cuts)
	mu.Unlock()
	if n == 0 {
		t.Fatal("connections closed but no cut was reported")
	}
	c := dial(t, ctx, a.URL())
	if _, err := c.Req(ctx, "after", nostr.Filter{Limit: 1}); err != nil {
		t.Fatalf("a new connection after the cuts: %v", err)
	}
	time.Sleep(400 * time.Millisecond) // two periods: stopped, nothing cuts it
	if c.Closed() {
		t.Fatal("a connection was cut after stop")
	}
}
