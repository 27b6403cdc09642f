package purgatory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Identifiers reports per identifier what is held, since when, the failed
// attempts in a row, the next attempt and the whole last error; a released
// identifier leaves the list.
func TestIdentifiersReportHeldAttemptsAndLastError(t *testing.T) {
	env := newTestEnv(t, nil)
	sc := env.sc
	sc.sources = []Source{{"http://dead/r.git", "dead"}}
	sc.fail["http://dead/r.git"] = true
	start := env.clk.Now()
	for i, k := range []keypair{newKey(t), newKey(t)} {
		if err := env.add(t, stateEv(t, k, "repo", 1000, oid(1+i)), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := env.p.Identifiers(); len(got) != 1 || got[0].Identifier != "repo" || got[0].States != 2 ||
		got[0].Attempts != 0 || got[0].LastError != "" || !got[0].HeldSince.Equal(start) ||
		!got[0].ExpiresAt.Equal(start.Add(env.p.cfg.Expiry)) || !got[0].NextAttempt.Equal(start.Add(env.p.cfg.SyncedDelay)) {
		t.Fatalf("before any attempt: %+v", got)
	}
	env.clk.Advance(env.p.cfg.SyncedDelay)
	env.pass()
	env.clk.Advance(20 * time.Second)
	env.pass()
	got := env.p.Identifiers()
	if len(got) != 1 {
		t.Fatalf("identifiers %+v", got)
	}
	s := got[0]
	now := env.clk.Now()
	if s.Attempts != 2 || s.Syncing || !s.NextAttempt.Equal(now.Add(40*time.Second)) {
		t.Errorf("after two failures: attempts %d, syncing %v, next %v (now %v), want 2, false, now+40s", s.Attempts, s.Syncing, s.NextAttempt, now)
	}
	if want := "fetch http://dead/r.git: "; !strings.HasPrefix(s.LastError, want) || !strings.HasSuffix(s.LastError, "connection refused") || !s.LastErrorAt.Equal(now) {
		t.Errorf("last error %q at %v, want %q… ending in the cause, at %v", s.LastError, s.LastErrorAt, want, now)
	}

	// The data appears: released, gone from the list.
	sc.mu.Lock()
	sc.fail["http://dead/r.git"] = false
	sc.serve["http://dead/r.git"] = []string{oid(1), oid(2)}
	sc.mu.Unlock()
	env.clk.Advance(40 * time.Second)
	env.pass()
	if got := env.p.Identifiers(); len(got) != 0 {
		t.Fatalf("after the release: %+v", got)
	}
}

// An identifier without any clone URL to fetch from says so.
func TestIdentifiersNoSource(t *testing.T) {
	env := newTestEnv(t, nil)
	if err := env.add(t, stateEv(t, newKey(t), "lonely", 1000, oid(1)), false); err != nil {
		t.Fatal(err)
	}
	env.clk.Advance(env.p.cfg.SyncedDelay)
	env.pass()
	got := env.p.Identifiers()
	if len(got) != 1 || got[0].LastError != ErrNoSource.Error() || got[0].Attempts != 1 {
		t.Fatalf("identifiers %+v, want one with attempts 1 and %q", got, ErrNoSource)
	}
}

// BenchmarkIdentifiers is the status view of a full purgatory (10,000 held
// state events, purgatory.max_entries, one per identifier); it runs under
// the purgatory's lock.
func BenchmarkIdentifiers(b *testing.B) {
	sc := newFakeSC()
	p, err := New(DefaultConfig(), Options{Clock: newManualClock(), SyncContext: sc})
	if err != nil {
		b.Fatal(err)
	}
	sc.p = p
	k := newKey(b)
	for i := range 10_000 {
		d := fmt.Sprintf("repo-%d", i)
		ann := &nostr.Event{Kind: KindAnnouncement, PubKey: k.pk, CreatedAt: 1, Tags: nostr.Tags{{"d", d}}}
		ann.ID = ann.GetID()
		p.AddAnnouncement(ann)
		tags := nostr.Tags{{"d", d}, {"refs/heads/main", oid(i)}, {"HEAD", "ref: refs/heads/main"}}
		if err := p.Add(signed(b, k, KindState, 1000, tags), false); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if n := len(p.Identifiers()); n != 10_000 {
			b.Fatalf("%d identifiers", n)
		}
	}
}
