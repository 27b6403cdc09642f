package reposync

import (
	"errors"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/health"
)

// TestResumeWaitAfterDeliveringDrop: a connection that delivered events to
// the relay's historic sync, still in progress, and dropped is reconnected
// after health.resume_wait; a connection that delivered nothing, or one
// that dropped after the history was done, waits health.reconnect_wait as
// before. Either wait, shorter than the engine's tick, ends with a
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
	for _, tc := range []struct {
		name        string
		delivered   int
		historyDone bool
		want        time.Duration
	}{
		{"delivered during the history", 3, false, def.ResumeWait},
		{"delivered nothing", 0, false, def.ReconnectWait},
		{"delivered after the history", 3, true, def.ReconnectWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistoricEnv(t)
			h.r.HistoricDone = tc.historyDone
			h.e.d.Health.AttemptStarted(testRelay)
			h.e.d.Health.Connected(testRelay)
			h.e.d.Health.Achieved(testRelay) // the connection answered
			h.r.gotAtConnect = h.r.historicGot.Load()
			h.r.historicGot.Add(uint64(tc.delivered))
			h.e.onDisconnected(testRelay, h.r.gen, errors.New("read: EOF"))
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
