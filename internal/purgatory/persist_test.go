package purgatory

import (
	"context"
	"testing"
	"time"
)

// A held event exported and restored into a new purgatory keeps its intake
// time, attempts and next attempt; the expiry counts from the original
// intake, so time spent down counts.
func TestExportRestoreKeepsDeadlines(t *testing.T) {
	env := newTestEnv(t, nil)
	env.sc.sources = []Source{{"http://dead/r.git", "dead"}}
	env.sc.fail["http://dead/r.git"] = true
	ev := stateEv(t, newKey(t), "repo", 1000, oid(1))
	added := env.clk.Now()
	if err := env.add(t, ev, false); err != nil {
		t.Fatal(err)
	}
	gen := env.p.Generation()
	env.clk.Advance(env.p.cfg.SyncedDelay)
	env.pass() // one failed attempt
	out := env.p.Export()
	if len(out) != 1 || out[0].Event.ID != ev.ID || !out[0].Added.Equal(added) || out[0].Attempts != 1 {
		t.Fatalf("export = %+v, want the event added at %v with 1 attempt", out, added)
	}
	next := out[0].Next

	env2 := newTestEnv(t, nil)
	env2.clk.Advance(env.clk.Now().Add(10 * time.Minute).Sub(env2.clk.Now())) // down for ten minutes
	if n, skipped := env2.p.Restore(out); n != 1 || skipped != 0 {
		t.Fatalf("restored %d, skipped %d", n, skipped)
	}
	if env2.p.Generation() == 0 || gen == 0 {
		t.Fatal("generation did not move on intake")
	}
	got := env2.p.Export()
	if len(got) != 1 || !got[0].Added.Equal(added) || got[0].Attempts != 1 || !got[0].Next.Equal(next) {
		t.Fatalf("after restore = %+v", got)
	}
	// Expiry counts from the original intake.
	env2.clk.Advance(added.Add(env2.p.cfg.Expiry).Sub(env2.clk.Now()))
	env2.p.pass(context.Background())
	env2.p.wg.Wait()
	if env2.p.Has(ev.ID) {
		t.Fatal("restored event outlived its original expiry deadline")
	}
}
