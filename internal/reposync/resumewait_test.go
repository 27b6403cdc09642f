package reposync

import (
	"errors"
	"fmt"
	"testing"
	"time"

	ws "github.com/coder/websocket"

	"github.com/grasp-sync/grasp-sync/internal/health"
)

// TestResumeWaitAfterDeliveringDrop: a connection that delivered events to
// the relay's historic sync, still in progress, and that the relay closed
// in order (a close frame: relay.ClosedInOrder) is reconnected after
// health.resume_wait; a connection that delivered nothing, one that
// dropped after the history was done, one cut without a close frame, one
// closed as going away and one that lived reconnect_wait or longer wait
// health.reconnect_wait as before. Either wait, shorter than the engine's tick, ends with a
// connectDue posted by a timer, not at the next tick.
func TestResumeWaitAfterDeliveringDrop(t *testing.T) {
	def := health.DefaultConfig()
	within := func(t *testing.T, got, nominal time.Duration) {
		t.Helper()
		lo, hi := time.Duration(float64(nominal)*(1-def.Jitter)), time.Duration(float64(nominal)*(1+def.Jitter))
		if got < lo || got > hi {
			t.Fatalf("reconnect in %s, want %s (within [%s, %s])", got, nominal, lo, hi)
		}
	}
	closed := func(code ws.StatusCode) error {
		return fmt.Errorf("read: failed to get reader: %w", ws.CloseError{Code: code, Reason: "closing after serving events"})
	}
	for _, tc := range []struct {
		name        string
		delivered   int
		historyDone bool
		err         error
		want        time.Duration
	}{
		{"delivered during the history", 3, false, closed(ws.StatusInternalError), def.ResumeWait},
		{"delivered nothing", 0, false, closed(ws.StatusInternalError), def.ReconnectWait},
		{"delivered after the history", 3, true, closed(ws.StatusInternalError), def.ReconnectWait},
		{"cut without a close frame", 3, false, errors.New("read: EOF"), def.ReconnectWait},
		{"closed as going away", 3, false, closed(ws.StatusGoingAway), def.ReconnectWait},
		{"lived longer than reconnect_wait", 3, false, closed(ws.StatusNormalClosure), def.ReconnectWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistoricEnv(t)
			h.r.HistoricDone = tc.historyDone
			h.e.d.Health.AttemptStarted(testRelay)
			h.e.d.Health.Connected(testRelay)
			h.e.d.Health.Achieved(testRelay) // the connection answered
			h.r.gotAtConnect = h.r.historicGot.Load()
			h.r.historicGot.Add(uint64(tc.delivered))
			if tc.name == "lived longer than reconnect_wait" {
				h.clk.Advance(def.ReconnectWait)
			}
			h.e.onDisconnected(testRelay, h.r.gen, tc.err)
			_, wait := h.e.d.Health.CanAttempt(testRelay)
			within(t, wait, tc.want)
			// Both waits are shorter than the engine's tick (2 s): a timer
			// posts connectDue when the wait ends, not before.
			h.clk.Advance(wait - time.Millisecond)
			select {
			case <-h.e.inbox:
				t.Fatal("connectDue posted before the wait ended")
			case <-time.After(50 * time.Millisecond):
			}
			h.clk.Advance(time.Millisecond)
			select {
			case fn := <-h.e.inbox:
				fn() // connectDue
			case <-time.After(5 * time.Second):
				t.Fatal("no connectDue posted when the wait ended")
			}
		})
	}
}
