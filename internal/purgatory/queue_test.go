package purgatory

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	zero := DefaultConfig()
	zero.SyncedDelay, zero.OwnRelayDelay = 0, 0
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero delays (sync at once) refused: %v", err)
	}
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.Loop = 0 }, `loop: must be > 0, got "0s"`},
		{func(c *Config) { c.SyncedDelay = -time.Millisecond }, `synced_delay: must be >= 0, got "-1ms"`},
		{func(c *Config) { c.Backoff = nil }, `backoff: must not be empty, got ""`},
		{func(c *Config) { c.Backoff[2] = -time.Second }, `backoff[2]: must be > 0, got "-1s"`},
		{func(c *Config) { c.DomainConcurrency = 0 }, `domain_concurrency: must be > 0, got "0"`},
		{func(c *Config) { c.DomainWindow = 0 }, `domain_window: must be > 0, got "0s"`},
		{func(c *Config) { c.MaxEntries = -1 }, `max_entries: must be > 0, got "-1"`},
		{func(c *Config) { c.MaxDomainLabels = 0 }, `max_domain_labels: must be > 0, got "0"`},
	} {
		c := DefaultConfig()
		tc.mut(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want suffix %q", err, tc.want)
		}
	}
}

func TestBackoffSchedule(t *testing.T) {
	c := DefaultConfig()
	want := []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 120 * time.Second, 120 * time.Second, 120 * time.Second}
	for i, w := range want {
		if got := c.backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

func TestSyncQueue(t *testing.T) {
	c := DefaultConfig()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := newSyncQueue(c.backoff)

	q.add("r", c.SyncedDelay, t0)
	if got := q.ready(t0.Add(499 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("ready before delay: %v", got)
	}
	// A burst: later events cannot push the attempt back.
	for i := 1; i <= 9; i++ {
		q.add("r", c.SyncedDelay, t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	now := t0.Add(500 * time.Millisecond)
	if got := q.ready(now); len(got) != 1 || got[0] != "r" {
		t.Fatalf("ready = %v, want [r]", got)
	}
	if got := q.ready(now); len(got) != 0 {
		t.Fatalf("in-progress identifier offered twice: %v", got)
	}
	// Failures back off 20s, 40s, 80s, 120s, 120s.
	for i, w := range []time.Duration{20, 40, 80, 120, 120} {
		q.done("r", false, now)
		if got := q.ready(now.Add(w*time.Second - time.Millisecond)); len(got) != 0 {
			t.Fatalf("attempt %d: ready before backoff %ds", i+1, w)
		}
		now = now.Add(w * time.Second)
		if got := q.ready(now); len(got) != 1 {
			t.Fatalf("attempt %d: not ready after %ds", i+1, w)
		}
	}
	// A new event during a sync resets the count and schedules after its delay.
	q.add("r", c.SyncedDelay, now)
	q.done("r", false, now)
	if got := q.ready(now.Add(500 * time.Millisecond)); len(got) != 1 {
		t.Fatalf("event during sync: not rescheduled after its delay")
	}
	q.done("r", false, now.Add(500*time.Millisecond))
	if e := q.entries["r"]; e.attempts != 1 || !e.next.Equal(now.Add(500*time.Millisecond+20*time.Second)) {
		t.Fatalf("after reset: attempts=%d next=%v", e.attempts, e.next)
	}
	// A new event brings a backed-off attempt earlier, never later.
	q.add("r", c.SyncedDelay, now.Add(time.Second))
	if e := q.entries["r"]; !e.next.Equal(now.Add(1500 * time.Millisecond)) {
		t.Fatalf("new event did not bring attempt earlier: %v", e.next)
	}
	q.add("r", c.OwnRelayDelay, now.Add(time.Second))
	if e := q.entries["r"]; !e.next.Equal(now.Add(1500 * time.Millisecond)) {
		t.Fatalf("own-relay event pushed attempt later: %v", e.next)
	}
	// Completion removes.
	q.ready(now.Add(2 * time.Second))
	q.done("r", true, now.Add(2*time.Second))
	if q.len() != 0 {
		t.Fatalf("complete identifier still queued")
	}
}

// An attempt that waits for throttled domains does not end at done: it
// has no next attempt planned, stays queued when its events go, and ends
// (failed: the backoff) when the last domain lets it go; a new event
// meanwhile plans a main-loop attempt and the wait then ends nothing.
func TestSyncQueueWaitingForDomains(t *testing.T) {
	c := DefaultConfig()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := newSyncQueue(c.backoff)
	q.add("r", 0, now)
	q.ready(now)
	if !q.wait("r", "a") || !q.wait("r", "b") || q.wait("unknown", "a") {
		t.Fatal("wait: want true for a queued identifier only")
	}
	if q.done("r", false, now) {
		t.Fatal("done ended an attempt that waits for domains")
	}
	if e := q.entries["r"]; e.attempts != 0 || !e.next.IsZero() {
		t.Fatalf("waiting: attempts %d next %v, want 0 and none", e.attempts, e.next)
	}
	if _, ok := q.earliest(); ok || len(q.ready(now.Add(time.Hour))) != 0 {
		t.Fatal("a waiting identifier is due in the main loop")
	}
	q.remove("r")
	if q.len() != 1 {
		t.Fatal("removed while waiting: its attempt would never be counted")
	}
	if q.leave("r", "a", false, now) {
		t.Fatal("ended while still waiting for b")
	}
	if !q.leave("r", "b", false, now) {
		t.Fatal("not ended when the last domain let it go")
	}
	if e := q.entries["r"]; e.attempts != 1 || !e.next.Equal(now.Add(20*time.Second)) {
		t.Fatalf("after a failed wait: attempts %d next %v, want 1 and the backoff", e.attempts, e.next)
	}
	// A new event while waiting plans a main-loop attempt.
	now = now.Add(20 * time.Second)
	q.ready(now)
	q.wait("r", "a")
	q.done("r", false, now)
	q.add("r", c.SyncedDelay, now)
	if e := q.entries["r"]; e.attempts != 0 || !e.next.Equal(now.Add(c.SyncedDelay)) {
		t.Fatalf("event while waiting: attempts %d next %v", e.attempts, e.next)
	}
	if q.leave("r", "a", false, now) {
		t.Fatal("a wait ended the attempt although a main-loop attempt is planned")
	}
	// Complete at the end of a wait: gone.
	q.ready(now.Add(c.SyncedDelay))
	q.wait("r", "a")
	q.done("r", false, now)
	if !q.leave("r", "a", true, now) || q.len() != 0 {
		t.Fatal("complete after a wait: not removed")
	}
}
