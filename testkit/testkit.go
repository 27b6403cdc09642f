// Package testkit holds the helpers every package's tests share: waiting for
// a condition, reading a metric and the heap in use. Test relays and signed events come from
// package harness.
package testkit

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// PollInterval is how often WaitFor checks its condition.
const PollInterval = 5 * time.Millisecond

// WaitFor checks cond at once and then every PollInterval until it holds,
// and fails the test ("timed out after <timeout> waiting for <what>") if it
// still does not after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
			return
		case <-tick.C:
			if cond() {
				return
			}
		}
	}
}

// MetricPrefix starts the name of every metric the sidecar exports.
const MetricPrefix = "ngit_sync_"

// Metric returns the sum of the samples of the counter or gauge name in g
// whose labels include labels (nil matches every series), 0 when none does.
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := Series(t, g, name, labels)
	return v
}

// Series is Metric that also reports whether any series matched. A label
// with value "" matches a series without that label. A vector without series
// is not gathered at all, so a name outside the sidecar's scheme (the
// ngit_sync_ prefix, README's metrics section) fails the test rather than
// reading as 0: a renamed metric cannot make a test pass vacuously.
func Series(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	if !strings.HasPrefix(name, MetricPrefix) {
		t.Fatalf("metric %q is not under the %s scheme", name, MetricPrefix)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			found = true
			sum += sample(m)
		}
	}
	return sum, found
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func sample(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// Value returns the value of one counter or gauge, such as a series of a
// vector (vec.WithLabelValues(...)).
func Value(t testing.TB, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatalf("write %s: %v", m.Desc(), err)
	}
	return sample(&out)
}

// HeapInUse is the Go heap in use after a full collection: the difference
// of two readings is what a structure built between them keeps alive.
func HeapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
