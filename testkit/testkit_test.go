package testkit

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fatalRecorder records Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 10*time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
	rec := &fatalRecorder{TB: t}
	WaitFor(rec, 30*time.Millisecond, "nothing", func() bool { return false })
	if want := "timed out after 30ms waiting for nothing"; rec.msg != want {
		t.Fatalf("failure %q, want %q", rec.msg, want)
	}
}

func TestMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ngit_sync_c_total", Help: "h"}, []string{"kind", "reason"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "ngit_sync_g", Help: "h"})
	reg.MustRegister(vec, g)
	vec.WithLabelValues("relay", "a").Add(2)
	vec.WithLabelValues("relay", "b").Add(3)
	vec.WithLabelValues("clone", "a").Add(5)
	g.Set(7)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
		found  bool
	}{
		{"ngit_sync_c_total", nil, 10, true},
		{"ngit_sync_c_total", map[string]string{"kind": "relay"}, 5, true},
		{"ngit_sync_c_total", map[string]string{"kind": "relay", "reason": "a"}, 2, true},
		{"ngit_sync_c_total", map[string]string{"kind": "other"}, 0, false},
		{"ngit_sync_g", nil, 7, true},
		{"ngit_sync_g", map[string]string{"relay": ""}, 7, true},
		{"ngit_sync_missing", nil, 0, false},
	} {
		if got, found := Series(t, reg, tc.name, tc.labels); got != tc.want || found != tc.found {
			t.Errorf("Series(%s, %v) = %v, %v; want %v, %v", tc.name, tc.labels, got, found, tc.want, tc.found)
		}
		if got := Metric(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Metric(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	rec := &fatalRecorder{TB: t}
	Metric(rec, reg, "purgatory_events", nil)
	if want := `metric "purgatory_events" is not under the ngit_sync_ scheme`; rec.msg != want {
		t.Errorf("a name outside the scheme: failure %q, want %q", rec.msg, want)
	}
	if got := Value(t, vec.WithLabelValues("clone", "a")); got != 5 {
		t.Errorf("Value(counter) = %v, want 5", got)
	}
	if got := Value(t, g); got != 7 {
		t.Errorf("Value(gauge) = %v, want 7", got)
	}
}
