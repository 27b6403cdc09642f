package purgatory

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// TestMetricsExistFromStart: every kind of the held, released, expired and
// refused counts and every attempt result exists at 0 once registered, so
// increase() over them (deploy/prometheus/alerts.yml) sees the first one.
func TestMetricsExistFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, 4); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ngit_sync_purgatory_events", "ngit_sync_purgatory_events_released_total",
		"ngit_sync_purgatory_events_expired_total", "ngit_sync_purgatory_events_refused_total"} {
		for _, k := range []int{30618, 1618, 1619} {
			l := map[string]string{"kind": kindLabel(k)}
			if v, ok := testkit.Series(t, reg, name, l); !ok || v != 0 {
				t.Errorf("%s%v = %v (exists: %v), want 0", name, l, v, ok)
			}
		}
	}
	for _, r := range []string{resultComplete, resultRetry} {
		l := map[string]string{"result": r}
		if v, ok := testkit.Series(t, reg, "ngit_sync_purgatory_sync_attempts_total", l); !ok || v != 0 {
			t.Errorf("attempts%v = %v (exists: %v), want 0", l, v, ok)
		}
	}
}
