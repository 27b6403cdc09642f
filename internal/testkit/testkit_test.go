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
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"kind", "reason"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"})
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
		{"c_total", nil, 10, true},
		{"c_total", map[string]string{"kind": "relay"}, 5, true},
		{"c_total", map[string]string{"kind": "relay", "reason": "a"}, 2, true},
		{"c_total", map[string]string{"kind": "other"}, 0, false},
		{"g", nil, 7, true},
		{"g", map[string]string{"relay": ""}, 7, true},
		{"missing", nil, 0, false},
	} {
		if got, found := Series(t, reg, tc.name, tc.labels); got != tc.want || found != tc.found {
			t.Errorf("Series(%s, %v) = %v, %v; want %v, %v", tc.name, tc.labels, got, found, tc.want, tc.found)
		}
		if got := Metric(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("Metric(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if got := Value(t, vec.WithLabelValues("clone", "a")); got != 5 {
		t.Errorf("Value(counter) = %v, want 5", got)
	}
	if got := Value(t, g); got != 7 {
		t.Errorf("Value(gauge) = %v, want 7", got)
	}
}
