package health

import (
	"errors"
	"testing"
	"time"
)

func TestConfigBackoffSequence(t *testing.T) {
	cfg := DefaultConfig()
	want := []time.Duration{0, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600}
	for n, w := range want {
		if got := cfg.Backoff(n); got != w*time.Second {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, w*time.Second)
		}
	}
	if got := cfg.Backoff(1 << 30); got != time.Hour {
		t.Errorf("Backoff(huge) = %s, want 1h", got)
	}
}

func TestTrackerBackoffSequence(t *testing.T) {
	tr, clock, _ := newTestTracker(t, nil)
	tr.Track(relayA)
	wantAttempt(t, tr, relayA, true, 0)
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600}
	for i, w := range want {
		w *= time.Second
		tr.AttemptStarted(relayA)
		tr.Failed(relayA, errors.New("connection refused"))
		wantAttempt(t, tr, relayA, false, w)
		if got := tr.Snapshot()[0].Failures; got != i+1 {
			t.Fatalf("failures = %d, want %d", got, i+1)
		}
		clock.Advance(w - time.Nanosecond)
		wantAttempt(t, tr, relayA, false, time.Nanosecond)
		clock.Advance(time.Nanosecond)
		wantAttempt(t, tr, relayA, true, 0)
	}
}
