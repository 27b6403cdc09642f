package integration

import (
	"strings"
	"testing"
)

// TestStatusListsPurgatoryIdentifiers: /status of a sidecar syncing a
// harness world lists the identifier whose git data never arrives, with
// its failed attempts and the whole git error.
func TestStatusListsPurgatoryIdentifiers(t *testing.T) {
	w := startObservedWorld(t)
	st := w.Sidecar.Status()
	if len(st.Purgatory.Identifiers) != 1 {
		t.Fatalf("purgatory identifiers %+v, want only %q", st.Purgatory.Identifiers, w.HeldIdentifier)
	}
	id := st.Purgatory.Identifiers[0]
	if id.Identifier != w.HeldIdentifier || id.States != 1 || id.Attempts < 1 || id.LastErrorAt == nil ||
		!strings.HasPrefix(id.LastError, "fetch http://") || !strings.Contains(id.LastError, w.HeldIdentifier+".git") {
		t.Fatalf("held identifier %+v, want %q with 1 state, a failed attempt and its fetch error", id, w.HeldIdentifier)
	}
	if id.NextAttempt == nil && !id.Syncing {
		t.Errorf("held identifier has neither a next attempt nor a running one: %+v", id)
	}
	t.Logf("last error: %s", id.LastError)
}
