package health

import (
	"errors"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// A relay failing before a restart is restored with its failure clock:
// after DeadAfter of wall-clock time (downtime included) it is Dead in the
// new tracker, and it is not attempted before its next attempt.
func TestExportRestoreKeepsTheFailureClock(t *testing.T) {
	tr, clk, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Track(relayB)
	tr.AttemptStarted(relayA)
	tr.Failed(relayA, errors.New("connection refused"))
	out := tr.Export()
	if len(out) != 1 || out[0].URL != relayA || out[0].Failures != 1 || out[0].FailingSince.IsZero() {
		t.Fatalf("export = %+v, want only the failing relay", out)
	}

	tr2, clk2, _ := newTestTracker(t, nil)
	clk2.Advance(clk.Now().Sub(clk2.Now()) + tr2.cfg.DeadAfter) // down past DeadAfter
	tr2.Restore(out)
	tr2.Track(relayA)
	tr2.Track(relayB)
	if got := tr2.State(relayA); got != Dead {
		t.Fatalf("restored relay failing for DeadAfter is %s, want dead", got)
	}
	if got := tr2.State(relayB); got == Dead {
		t.Fatal("a relay without failures was restored dead")
	}
}

// Limits a relay taught by refusals survive a restart within LearnedTTL
// (counted from the last time one went down), and are forgotten after it.
func TestExportRestoreKeepsLearnedLimits(t *testing.T) {
	tr, clk, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	tr.Track(relayB)
	tr.SetLimits(relayA, relay.Limits{MaxFilters: 10, MaxMessageLength: 1 << 20})
	if !tr.Learn(relayA, relay.Limits{MaxFilters: 3, MaxTagValues: 100, MaxMessageLength: 65536}, "test") {
		t.Fatal("Learn lowered nothing")
	}
	tr.Observe(relayA, SourceNotice, "ERROR: too many concurrent REQs")
	want := tr.Limits(relayA)
	if want.MaxSubscriptions >= tr.cfg.DefaultSubscriptionBudget {
		t.Fatalf("budget %d not lowered by the notice", want.MaxSubscriptions)
	}
	out := tr.Export()
	if len(out) != 1 || out[0].URL != relayA || out[0].LearnedAt.IsZero() {
		t.Fatalf("export = %+v, want the relay that taught limits", out)
	}

	restart := func(after time.Duration) *Tracker {
		tr2, clk2, _ := newTestTracker(t, nil)
		clk2.Advance(clk.Now().Sub(clk2.Now()) + after)
		tr2.Restore(out)
		tr2.Track(relayA)
		tr2.Track(relayB)
		tr2.SetLimits(relayA, relay.Limits{MaxFilters: 10, MaxMessageLength: 1 << 20}) // NIP-11 fetched again
		return tr2
	}
	ttl := DefaultConfig().LearnedTTL
	// Restored, not tracked again yet: a flush keeps them.
	pending, clkP, _ := newTestTracker(t, nil)
	clkP.Advance(clk.Now().Sub(clkP.Now()) + time.Hour)
	pending.Restore(out)
	if got := pending.Export(); len(got) != 1 || got[0].Learned != out[0].Learned || !got[0].LearnedAt.Equal(out[0].LearnedAt) {
		t.Fatalf("export before the relay is tracked again = %+v, want its learned limits %+v", got, out[0])
	}
	clkP.Advance(ttl)
	if got := pending.Export(); len(got) != 0 {
		t.Fatalf("export after LearnedTTL = %+v, want nothing", got)
	}
	tr2 := restart(ttl - time.Minute)
	if got := tr2.Limits(relayA); got != want {
		t.Fatalf("limits within LearnedTTL after a restart = %+v, want %+v", got, want)
	}
	if got, def := tr2.Limits(relayB), tr2.Limits("wss://untracked.example"); got.MaxFilters != 0 || got.MaxSubscriptions != def.MaxSubscriptions {
		t.Fatalf("a relay that taught nothing restored with %+v", got)
	}
	// Exported again, the limits keep their first date: they do not live
	// on by being restored.
	if out2 := tr2.Export(); len(out2) != 1 || !out2[0].LearnedAt.Equal(out[0].LearnedAt) {
		t.Fatalf("export after restore = %+v, want the learned date kept", out2)
	}
	tr3 := restart(ttl)
	got := tr3.Limits(relayA)
	if got.MaxFilters != 10 || got.MaxTagValues != 0 || got.MaxMessageLength != 1<<20 || got.MaxSubscriptions != tr3.cfg.DefaultSubscriptionBudget {
		t.Fatalf("limits after LearnedTTL = %+v, want the announced ones only", got)
	}
}
