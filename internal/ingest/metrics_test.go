package ingest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// TestReasonsExistFromStart: every rejection reason, invalid reason and
// limit exists at 0 once registered, and reasonLabel gives only listed
// rejection reasons for what the own relay refuses.
func TestReasonsExistFromStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string][]string{
		"ngit_sync_events_rejected_total": rejectedReasons,
		"ngit_sync_events_invalid_total":  invalidReasons,
		"ngit_sync_limit_hits_total":      limitNames,
	} {
		label := "reason"
		if name == "ngit_sync_limit_hits_total" {
			label = "limit"
		}
		for _, v := range values {
			if got, ok := testkit.Series(t, reg, name, map[string]string{label: v}); !ok || got != 0 {
				t.Errorf("%s{%s=%q} = %v (exists: %v), want 0", name, label, v, got, ok)
			}
		}
	}
	for _, reason := range []string{"pow: 20", "blocked: no", "rate-limited: slow", "invalid: x", "restricted: y",
		"mute: z", "error: disk", "auth-required: who", "something else"} {
		if l := reasonLabel(reason); !slices.Contains(rejectedReasons, l) {
			t.Errorf("reasonLabel(%q) = %q, not in rejectedReasons", reason, l)
		}
	}
}
