package reposync

import (
	"errors"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/health"
)

// consolidations counts the "consolidating subscriptions" log entries.
func (h *historicEnv) consolidations() int {
	return h.logs.FilterMessage("consolidating subscriptions").Len()
}

// TestRefusedLiveRebuildBacksOff: a live subscription the relay closed
// with a plain refusal is rebuilt after the historic retry backoff (here
// 1 min), not at the next tick, the refusals of one rebuild counting once;
// when the rebuild's catch-up is refused too the next waits 2 min, and a
// catch-up that succeeds ends the streak.
func TestRefusedLiveRebuildBacksOff(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)
	h.e.onTick()
	before := h.consolidations()
	rebuiltAfter := func(wait time.Duration) {
		t.Helper()
		h.clk.Advance(wait - time.Second)
		h.e.onTick()
		h.drain(t) // a failed catch-up's retry
		if n := h.consolidations(); n != before {
			t.Fatalf("rebuilt %d times before the %s backoff ended", n-before, wait)
		}
		h.clk.Advance(time.Second)
		h.e.onTick()
		if n := h.consolidations(); n != before+1 {
			t.Fatalf("rebuilt %d times once the %s backoff ended, want once", n-before, wait)
		}
		before++
	}
	h.r.live["l2"], h.r.live["l3"] = 1, 1
	h.e.subs.onLiveClosed(testRelay, h.r.gen, "l2", "error: overloaded")
	h.e.subs.onLiveClosed(testRelay, h.r.gen, "l3", "error: overloaded")
	rebuiltAfter(time.Minute)
	if len(h.r.since) == 0 {
		t.Fatal("the rebuild opened no catch-up")
	}
	for id, cu := range h.r.since { // the relay refuses the catch-up too (as readLive reports a CLOSED)
		h.e.subs.onSinceFailed(testRelay, h.r.gen, id, cu, errors.New("CLOSED: error: overloaded"))
		h.e.subs.onLiveClosed(testRelay, h.r.gen, id, "error: overloaded")
	}
	h.drain(t)
	rebuiltAfter(2 * time.Minute)
	h.eose(t) // answered: the streak ends
	h.r.live["l2"] = 1
	h.e.subs.onLiveClosed(testRelay, h.r.gen, "l2", "error: overloaded")
	rebuiltAfter(time.Minute)
}

// TestPermanentRefusalParksRelay: after a permanent refusal the relay is
// not asked (allowed, BeforeRequest) and its live subscriptions are not
// rebuilt until health.refusal_wait is over.
func TestPermanentRefusalParksRelay(t *testing.T) {
	h := newHistoricEnv(t)
	h.batch(t)
	h.e.d.Health.Track(testRelay)
	h.r.live["l2"] = 1
	h.e.subs.onReason(testRelay, health.SourceClosed, "restricted: members only")
	h.e.subs.onLiveClosed(testRelay, h.r.gen, "l2", "restricted: members only")
	if h.e.subs.allowed(h.r) {
		t.Fatal("a relay that refused for good is allowed new REQs")
	}
	if err := h.e.subs.waitCooldown(t.Context(), testRelay); err == nil {
		t.Fatal("a request to a relay that refused for good is sent")
	}
	before := h.consolidations()
	wait := h.e.d.Health.Config().RefusalWait
	h.clk.Advance(wait - time.Second)
	h.e.onTick()
	if n := h.consolidations(); n != before {
		t.Fatalf("rebuilt %d times during the refusal wait", n-before)
	}
	if n := h.logs.FilterMessage("relay closed a live subscription").Len(); n != 0 {
		t.Fatalf("the refused subscription logged %d times; the health tracker logs it once", n)
	}
	h.clk.Advance(time.Second)
	h.e.onTick()
	if n := h.consolidations(); n != before+1 {
		t.Fatalf("rebuilt %d times after the refusal wait, want once", n-before)
	}
	if err := h.e.subs.waitCooldown(t.Context(), testRelay); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
}
