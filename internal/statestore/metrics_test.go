package statestore

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// TestFlushResultsExistFromStart: both flush results exist at 0 once
// registered, so the state-write alert (deploy/prometheus/alerts.yml) sees
// the first error.
func TestFlushResultsExistFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"ok", "error"} {
		if v, ok := testkit.Series(t, reg, "ngit_sync_state_flushes_total", map[string]string{"result": r}); !ok || v != 0 {
			t.Errorf("flushes %s = %v (exists: %v), want 0", r, v, ok)
		}
	}
}
