package publish

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"

	"github.com/grasp-sync/grasp-sync/internal/testkit"
	"github.com/nbd-wtf/go-nostr"
)

// TestLingerWaitsForAFullWindow: with a Linger far longer than the test,
// events that do not fill the window wait, and the submission that fills
// it sends them all at once, in one write the relay reads as a burst.
func TestLingerWaitsForAFullWindow(t *testing.T) {
	f := newFakeRelay(t)
	cfg := testConfig()
	cfg.Window = 4
	cfg.Linger = time.Hour
	h := startPublisher(t, cfg, f.dialer(), nil)
	testkit.WaitFor(t, 10*time.Second, "connected", h.p.Connected)
	evs := makeEvents(t, 4)
	res := newResults()
	submitAll(t, h.p, evs[:3], res)
	time.Sleep(100 * time.Millisecond)
	if n, _, _ := f.snapshot(); n != 0 {
		t.Fatalf("relay received %d EVENTs before the window was full, want 0", n)
	}
	if s := h.p.Stats(); s.Queued != 3 || s.InFlight != 0 {
		t.Fatalf("stats %+v, want 3 queued", s)
	}
	submitAll(t, h.p, evs[3:], res)
	testkit.WaitFor(t, 10*time.Second, "four outcomes", func() bool { return res.count() == 4 })
	for _, ev := range evs {
		if r := res.get(ev.ID); len(r) != 1 || r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
}

// TestLingerNeverDelaysResends: events that come back unanswered (the
// connection dropped) are sent again at once after reconnecting, though
// a new event that does not fill the window is queued behind them.
func TestLingerNeverDelaysResends(t *testing.T) {
	f := newFakeRelay(t)
	dropped := false
	f.setDecide(func(c *fakeConn, ev *nostr.Event) reply {
		if !dropped {
			dropped = true
			return reply{drop: true}
		}
		return f.accept(ev)
	})
	cfg := testConfig()
	cfg.Window = 2
	cfg.Linger = time.Hour
	// The second dial waits until the third event is queued.
	queued := make(chan struct{})
	var dials atomic.Int32
	dial := func(ctx context.Context) (*relay.Conn, error) {
		if dials.Add(1) > 1 {
			select {
			case <-queued:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return f.dialer()(ctx)
	}
	h := startPublisher(t, cfg, dial, nil)
	evs := makeEvents(t, 3)
	res := newResults()
	submitAll(t, h.p, evs[:2], res)
	testkit.WaitFor(t, 10*time.Second, "the connection to drop", func() bool { return dials.Load() > 1 })
	submitAll(t, h.p, evs[2:], res)
	testkit.WaitFor(t, 10*time.Second, "the third event queued", func() bool { return h.p.Stats().Queued == 3 })
	close(queued)
	testkit.WaitFor(t, 10*time.Second, "the two resent events answered", func() bool {
		return len(res.get(evs[0].ID)) == 1 && len(res.get(evs[1].ID)) == 1
	})
	for _, ev := range evs[:2] {
		if r := res.get(ev.ID); r[0].Outcome != Accepted {
			t.Fatalf("event %s: results %+v", ev.ID, r)
		}
	}
	// (The third goes once it fills what is left of the window.)
}
