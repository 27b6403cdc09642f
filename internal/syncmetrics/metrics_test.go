package syncmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// TestMetricsExistFromStart: the historic batch results exist at 0 once
// registered, a tracked relay's series exist at 0, and forgetting the
// relay deletes every one of them.
func TestMetricsExistFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"ok", "failed"} {
		if v, ok := testkit.Series(t, reg, "ngit_sync_historic_batches_total", map[string]string{"result": r}); !ok || v != 0 {
			t.Errorf("historic batches %s: %v (exists: %v), want 0", r, v, ok)
		}
	}
	const url = "wss://relay.example"
	perRelay := []struct {
		name   string
		labels map[string]string
	}{
		{"ngit_sync_connection_attempts_total", map[string]string{"relay": url, "result": "success"}},
		{"ngit_sync_connection_attempts_total", map[string]string{"relay": url, "result": "failure"}},
		{"ngit_sync_events_received_total", map[string]string{"relay": url}},
		{"ngit_sync_filters_open", map[string]string{"relay": url}},
		{"ngit_sync_pending_batches", map[string]string{"relay": url}},
	}
	m.TrackRelay(url)
	for _, s := range perRelay {
		if v, ok := testkit.Series(t, reg, s.name, s.labels); !ok || v != 0 {
			t.Errorf("tracked: %s%v = %v (exists: %v), want 0", s.name, s.labels, v, ok)
		}
	}
	m.ForgetRelay(url)
	for _, s := range perRelay {
		if _, ok := testkit.Series(t, reg, s.name, s.labels); ok {
			t.Errorf("forgotten: %s%v still exported", s.name, s.labels)
		}
	}
}
