package health

import (
	"errors"
	"testing"
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
