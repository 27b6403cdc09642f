package health

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/clock"
)

func TestPermanentRefusal(t *testing.T) {
	for _, tc := range []struct {
		reason  string
		haveKey bool
		want    bool
	}{
		{"restricted: members only", false, true},
		{"restricted: members only", true, true},
		{"blocked: you are banned", false, true},
		{"blocked: too many query results", false, false}, // strfry's negentropy bound
		{"auth-required: authenticate with NIP-42 first", false, true},
		{"auth-required: authenticate with NIP-42 first", true, false},
		{"rate-limited: slow down", false, false},
		{"error: internal error", false, false},
		{"invalid: too many filters", false, false},
		{"", false, false},
	} {
		if got := PermanentRefusal(tc.reason, tc.haveKey); got != tc.want {
			t.Errorf("PermanentRefusal(%q, key %v) = %v, want %v", tc.reason, tc.haveKey, got, tc.want)
		}
	}
}

// TestTrackerRefused: a permanent refusal holds the relay's requests for
// RefusalWait, is logged once however many requests were refused, shows in
// Snapshot and Refusal, and ends by itself.
func TestTrackerRefused(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	cfg := DefaultConfig()
	cfg.RefusalWait = 2 * time.Hour
	clk := clock.NewManual(epoch)
	tr, err := New(cfg, clk, nil, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Refused(relayA, SourceClosed, "restricted: no", false) {
		t.Fatal("an untracked relay was parked")
	}
	tr.Track(relayA)
	tr.Track(relayB)
	if tr.Refused(relayA, SourceClosed, "error: busy", false) || tr.Refused(relayA, SourceNotice, "restricted: no", false) ||
		tr.Refused(relayA, SourceClosed, "auth-required: who are you", true) || tr.Refused(relayA, SourceNegErr, "blocked: too many query results", false) {
		t.Fatal("a refusal that may change by itself parked the relay")
	}
	if d := tr.RefusalRemaining(relayA); d != 0 {
		t.Fatalf("RefusalRemaining before any refusal = %s", d)
	}
	if !tr.Refused(relayA, SourceClosed, "restricted: members only", false) {
		t.Fatal("the first refusal did not start the wait")
	}
	for range 5 {
		clk.Advance(time.Second)
		if tr.Refused(relayA, SourceNegErr, "restricted: members only", false) {
			t.Fatal("a refusal during the wait started it again")
		}
	}
	if d := tr.RefusalRemaining(relayA); d != 2*time.Hour-5*time.Second {
		t.Fatalf("RefusalRemaining = %s, want the wait from the first refusal", d)
	}
	if err := tr.RefusalErr(relayA); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "restricted: members only") {
		t.Fatalf("RefusalErr = %v", err)
	}
	if err := tr.RefusalErr(relayB); err != nil {
		t.Fatalf("RefusalErr of another relay = %v", err)
	}
	if d := tr.RefusalRemaining(relayB); d != 0 {
		t.Fatalf("another relay held: %s", d)
	}
	why := tr.Refusal(relayA)
	if why != "CLOSED: restricted: members only; asking again at 2026-01-01T02:00:00Z" {
		t.Fatalf("Refusal = %q", why)
	}
	var snap RelayHealth
	for _, h := range tr.Snapshot() {
		if h.URL == relayA {
			snap = h
		}
	}
	if snap.Refusal != "CLOSED: restricted: members only" || !snap.RefusedUntil.Equal(epoch.Add(2*time.Hour)) {
		t.Fatalf("Snapshot = %+v", snap)
	}
	if n := logs.FilterMessageSnippet("refuses our requests").Len(); n != 1 {
		t.Fatalf("the refusal logged %d times, want once", n)
	}
	clk.Advance(2 * time.Hour)
	if d := tr.RefusalRemaining(relayA); d != 0 {
		t.Fatalf("RefusalRemaining after the wait = %s", d)
	}
	if why := tr.Refusal(relayA); why != "" {
		t.Fatalf("Refusal after the wait = %q", why)
	}
	if !tr.Refused(relayA, SourceClosed, "restricted: members only", false) {
		t.Fatal("a refusal after the wait did not start a new one")
	}
	if n := logs.FilterMessageSnippet("refuses our requests").Len(); n != 2 {
		t.Fatalf("the refusal logged %d times, want once per wait", n)
	}
}
