package purgatory

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// Identifiers that find their domain's rate window full wait for its next
// slot: no failed attempt, no backoff, no attempt counted, shown as
// waiting on the domain (and on the gauge); the window's timer starts
// them when it frees, not a retry 20 s later.
func TestThrottledWaitIsNotAFailedAttempt(t *testing.T) {
	env := newTestEnv(t, func(c *Config) {
		c.DomainConcurrency, c.DomainRequestsPerWindow, c.DomainWindow = 2, 2, time.Minute
	})
	sc := env.sc
	sc.sources = []Source{{"http://one/r.git", "one"}}
	ids := []string{"r0", "r1", "r2", "r3"}
	for i, id := range ids {
		sc.serve["http://one/r.git"] = append(sc.serve["http://one/r.git"], oid(i+1))
		if err := env.add(t, stateEv(t, newKey(t), id, 1000, oid(i+1)), false); err != nil {
			t.Fatal(err)
		}
	}
	env.clk.Advance(500 * time.Millisecond)
	env.pass()
	if n := len(sc.fetchLog()); n != 2 {
		t.Fatalf("%d fetches, want 2 (the window's limit)", n)
	}
	gauge := func() float64 { return testkit.Value(t, env.p.m.domainWaiting.WithLabelValues("one")) }
	if g := gauge(); g != 2 {
		t.Fatalf("domain_waiting{one} = %v, want 2", g)
	}
	rows := env.p.Identifiers()
	if len(rows) != 2 {
		t.Fatalf("%d identifiers held, want 2", len(rows))
	}
	for _, r := range rows {
		if !slices.Equal(r.Waiting, []string{"one"}) || r.Attempts != 0 || !r.NextAttempt.IsZero() || r.Syncing || r.LastError != "" {
			t.Fatalf("%+v: want waiting on one, no failed attempt, none planned", r)
		}
	}
	doms := env.p.Domains()
	if len(doms) != 1 || doms[0].Domain != "one" || doms[0].Waiting != 2 || doms[0].InWindow != 2 ||
		!doms[0].NextSlot.Equal(env.clk.Now().Add(time.Minute)) {
		t.Fatalf("domains %+v: want one with 2 waiting, 2 in the window, next slot in a minute", doms)
	}
	if l := env.p.DomainLimit(); l.Concurrency != 2 || l.Requests != 2 || l.Window != time.Minute {
		t.Fatalf("limit %+v", l)
	}
	retry := func() float64 { return testkit.Value(t, env.p.m.attempts.WithLabelValues(resultRetry)) }
	complete := func() float64 { return testkit.Value(t, env.p.m.attempts.WithLabelValues(resultComplete)) }
	if retry() != 0 || complete() != 2 {
		t.Fatalf("attempts retry %v complete %v, want 0 and 2 (the waiting ones have not ended)", retry(), complete())
	}
	// The first backoff (20 s) brings no attempt: nothing is planned.
	env.clk.Advance(20 * time.Second)
	env.pass()
	if n := len(sc.fetchLog()); n != 2 {
		t.Fatalf("%d fetches after 20 s, want still 2", n)
	}
	// The window frees its slots: the domain's queue runs both.
	env.clk.Advance(40 * time.Second)
	testkit.WaitFor(t, 10*time.Second, "the waiting identifiers released", func() bool { return env.p.Len() == 0 })
	env.p.wg.Wait()
	if n := len(sc.fetchLog()); n != 4 {
		t.Fatalf("%d fetches, want 4", n)
	}
	if retry() != 0 || complete() != 4 || gauge() != 0 || env.p.queue.len() != 0 {
		t.Fatalf("attempts retry %v complete %v, waiting %v, queue %d: want 0, 4, 0, 0", retry(), complete(), gauge(), env.p.queue.len())
	}
}

// A fetch the domain's queue ran and that failed ends the attempt: one
// failed attempt, the backoff, a WARN for the failure, and "will retry"
// only at DEBUG.
func TestQueuedFetchFailureIsOneFailedAttempt(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.DomainConcurrency = 1 })
	logs := observe(env)
	env.p.sync.fails = newFailLog(env.p.log, env.clk, time.Minute)
	sc := env.sc
	sc.sources = []Source{{"http://one/r.git", "one"}}
	sc.fail["http://one/r.git"] = true
	if err := env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(1)), false); err != nil {
		t.Fatal(err)
	}
	hold := env.p.th.TryAcquire("one")
	env.clk.Advance(500 * time.Millisecond)
	env.pass()
	if r := env.p.Identifiers(); len(r) != 1 || r[0].Attempts != 0 || !slices.Equal(r[0].Waiting, []string{"one"}) {
		t.Fatalf("%+v: want waiting, no failed attempt", r)
	}
	hold.Release(true)
	testkit.WaitFor(t, 10*time.Second, "the queued fetch", func() bool { return len(sc.fetchLog()) == 1 })
	env.p.wg.Wait()
	r := env.p.Identifiers()
	if len(r) != 1 || r[0].Attempts != 1 || len(r[0].Waiting) != 0 || r[0].LastError == "" ||
		!r[0].NextAttempt.Equal(env.clk.Now().Add(20*time.Second)) {
		t.Fatalf("%+v: want one failed attempt, its error, the next in 20 s", r)
	}
	if got := testkit.Value(t, env.p.m.attempts.WithLabelValues(resultRetry)); got != 1 {
		t.Fatalf("attempts{retry} = %v, want 1", got)
	}
	if got := levels(logs, "git data still missing; will retry"); len(got) != 1 || got[0] != zapcore.DebugLevel {
		t.Fatalf("will retry logged at %v, want once at DEBUG", got)
	}
	if got := levels(logs, "git fetch failed"); len(got) != 1 || got[0] != zapcore.WarnLevel {
		t.Fatalf("git fetch failed logged at %v, want once at WARN", got)
	}
	if n := logs.FilterLevelExact(zapcore.InfoLevel).Len(); n != 0 {
		t.Fatalf("%d INFO lines before the summary", n)
	}
}
