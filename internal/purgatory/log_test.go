package purgatory

import (
	"context"
	"os/exec"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// observe makes env's purgatory log to an observer at DEBUG.
func observe(env *testEnv) *observer.ObservedLogs {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	env.p.log, env.p.sync.log = log, log
	return logs
}

// levels returns the levels message was logged at, in order.
func levels(logs *observer.ObservedLogs, message string) []zapcore.Level {
	var out []zapcore.Level
	for _, e := range logs.FilterMessage(message).All() {
		out = append(out, e.Level)
	}
	return out
}

// Each released event and created repository is a DEBUG line; the counts
// come once per SummaryInterval in one INFO line.
func TestReleasePerEventAtDebugSummaryAtInfo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	env := newTestEnv(t, func(c *Config) {
		c.GitDir = t.TempDir()
		c.CreateMissingRepos = true
	})
	logs := observe(env)
	k := newKey(t)
	if err := env.add(t, stateEv(t, k, "repo", 1000, oid(1)), true); err != nil {
		t.Fatal(err)
	}
	g := &gitContext{p: env.p}
	if _, err := g.localRepos(context.Background(), "repo", map[string]*announcement{k.pk: {hosted: true, pubkey: k.pk}}); err != nil {
		t.Fatal(err)
	}
	env.p.mu.Lock()
	held := env.p.states["repo"][k.pk]
	env.p.mu.Unlock()
	if err := g.publishAndRemove(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	if got := levels(logs, "created repository"); len(got) != 1 || got[0] != zapcore.DebugLevel {
		t.Fatalf("created repository logged at %v, want once at DEBUG", got)
	}
	if got := levels(logs, "released"); len(got) != 1 || got[0] != zapcore.DebugLevel {
		t.Fatalf("released logged at %v, want once at DEBUG", got)
	}
	if n := logs.FilterLevelExact(zapcore.InfoLevel).Len(); n != 0 {
		t.Fatalf("%d INFO lines before the summary is due: %v", n, logs.All())
	}

	env.clk.Advance(SummaryInterval)
	env.pass()
	sum := logs.FilterMessage("purgatory summary").All()
	if len(sum) != 1 || sum[0].Level != zapcore.InfoLevel {
		t.Fatalf("summary lines %v, want one at INFO", sum)
	}
	m := sum[0].ContextMap()
	if m["released"] != int64(1) || m["published"] != int64(0) || m["repos_created"] != int64(1) {
		t.Fatalf("summary fields %v: want released 1 (already on the own relay, not published), repos_created 1", m)
	}
	// Nothing new: no summary.
	env.clk.Advance(SummaryInterval)
	env.pass()
	if n := logs.FilterMessage("purgatory summary").Len(); n != 1 {
		t.Fatalf("%d summaries, want none for a quiet interval", n)
	}
}

// Expired events are counted in one WARN line; each is a DEBUG line.
func TestExpiryWarnsWithCount(t *testing.T) {
	env := newTestEnv(t, nil)
	logs := observe(env)
	env.sc.sources = []Source{{"http://dead/r.git", "dead"}}
	env.sc.fail["http://dead/r.git"] = true
	for i := range 3 {
		if err := env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(i+1)), false); err != nil {
			t.Fatal(err)
		}
	}
	env.clk.Advance(env.p.cfg.Expiry)
	env.pass()
	if env.p.Len() != 0 {
		t.Fatalf("%d held after the expiry", env.p.Len())
	}
	if got := levels(logs, "expired without git data"); len(got) != 3 || got[0] != zapcore.DebugLevel {
		t.Fatalf("per-event expiry logged at %v, want 3 at DEBUG", got)
	}
	w := logs.FilterMessage("purgatory dropped events expired without git data").All()
	if len(w) != 1 || w[0].Level != zapcore.WarnLevel || w[0].ContextMap()["count"] != int64(3) {
		t.Fatalf("expiry summary %v, want one WARN with count 3", w)
	}
	if n := logs.FilterLevelExact(zapcore.InfoLevel).FilterMessage("expired without git data").Len(); n != 0 {
		t.Fatal("an expiry at INFO")
	}
}

// Events refused by a full purgatory are counted in one WARN line.
func TestRefusedWhenFullWarnsWithCount(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.MaxEntries = 1 })
	logs := observe(env)
	for i := range 3 {
		_ = env.add(t, stateEv(t, newKey(t), "repo", 1000, oid(i+1)), false)
	}
	env.clk.Advance(SummaryInterval)
	env.pass()
	w := logs.FilterMessage("purgatory refused events: full").All()
	if len(w) != 1 || w[0].Level != zapcore.WarnLevel || w[0].ContextMap()["count"] != int64(2) {
		t.Fatalf("refusal summary %v, want one WARN with count 2", w)
	}
}

// New uses the logger as given: the caller names it, once.
func TestLoggerNotRenamed(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	p, err := New(DefaultConfig(), Options{SyncContext: newFakeSC(), Logger: zap.New(core).Named("purgatory")})
	if err != nil {
		t.Fatal(err)
	}
	p.log.Info("x")
	p.sync.log.Info("y")
	for _, e := range logs.All() {
		if e.LoggerName != "purgatory" {
			t.Fatalf("logger name %q, want purgatory", e.LoggerName)
		}
	}
	if logs.Len() != 2 {
		t.Fatalf("%d lines", logs.Len())
	}
}
