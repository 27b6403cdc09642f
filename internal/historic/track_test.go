package historic

import (
	"errors"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/truncation"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// TestTrackCreatesRelaySeries: Track creates a relay's negentropy,
// truncation and read-auth series at 0 (every result, direction, error
// kind and truncation kind) and Forget deletes them; the closed-set
// fetch counters exist from registration.
func TestTrackCreatesRelaySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newNegMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	trunc := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ngit_sync_truncation_detected_total", Help: "h"}, []string{"relay", "kind"})
	auth := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ngit_sync_read_auth_total", Help: "h"}, []string{"relay", "result"})
	reg.MustRegister(trunc, auth)
	for name, n := range map[string]int{
		"ngit_sync_negentropy_fetch_skipped_total":      2,
		"ngit_sync_negentropy_fetch_claim_failed_total": 3,
	} {
		if got := seriesCount(t, reg, name, nil); got != n {
			t.Errorf("%s: %d series at start, want %d", name, got, n)
		}
	}

	s := &NegSyncer{m: m}
	tr := NewTruncation(trunc, zap.NewNop())
	ra := NewReadAuth(nil, 0, auth, zap.NewNop())
	const url = "wss://relay.example"
	s.Track(url)
	tr.Track(url)
	ra.Track(url)
	want := map[string]int{
		"ngit_sync_negentropy_syncs_total":        3,
		"ngit_sync_negentropy_bytes_total":        2,
		"ngit_sync_negentropy_relay_errors_total": len(errorKinds),
		"ngit_sync_truncation_detected_total":     len(truncation.Kinds),
		"ngit_sync_read_auth_total":               3,
	}
	for name, n := range want {
		if got := seriesCount(t, reg, name, map[string]string{"relay": url}); got != n {
			t.Errorf("tracked: %s has %d series of the relay, want %d", name, got, n)
		}
		if v := testkit.Metric(t, reg, name, nil); v != 0 {
			t.Errorf("tracked: %s = %v, want 0", name, v)
		}
	}
	s.m.lastSync.WithLabelValues(url).Set(1)
	s.m.probes.WithLabelValues(url).Inc()
	s.Forget(url)
	tr.Forget(url)
	ra.Forget(url)
	want["ngit_sync_negentropy_last_sync_timestamp_seconds"] = 0
	want["ngit_sync_negentropy_truncation_probes_total"] = 0
	for name := range want {
		if got := seriesCount(t, reg, name, map[string]string{"relay": url}); got != 0 {
			t.Errorf("forgotten: %s has %d series of the relay", name, got)
		}
	}
	var nilSyncer *NegSyncer
	nilSyncer.Track(url) // the engine without negentropy
	nilSyncer.Forget(url)
}

// TestErrorKindsListsErrorKind: every label errorKind returns is one Track
// creates.
func TestErrorKindsListsErrorKind(t *testing.T) {
	for _, err := range []error{neg.ErrUnsupported, neg.ErrBlocked, neg.ErrTimeout, neg.ErrInvalidMessage,
		neg.ErrSessionClosed, neg.ErrLimit, neg.ErrRelay, errMissingIDs, errors.New("x")} {
		if k := errorKind(err); !slices.Contains(errorKinds, k) {
			t.Errorf("errorKind(%v) = %q, not in errorKinds %v", err, k, errorKinds)
		}
	}
}

func seriesCount(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == k && l.GetValue() == v)
				}
				if !found {
					continue series
				}
			}
			n++
		}
	}
	return n
}
