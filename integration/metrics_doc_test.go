package integration

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// readmeMetrics parses the table of README.md's "## Metrics" section:
// metric name → type and labels.
func readmeMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Metrics\n")
	if !ok {
		t.Fatal(`README.md has no "## Metrics" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	out := map[string]metricInfo{}
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("README metrics row %q: want 4 cells (metric, type, labels, meaning)", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		info := metricInfo{Type: strings.TrimSpace(cells[1])}
		for _, l := range strings.Split(cells[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				info.Labels = append(info.Labels, l)
			}
		}
		sort.Strings(info.Labels)
		if _, dup := out[name]; dup {
			t.Errorf("README lists %s twice", name)
		}
		out[name] = info
	}
	if len(out) == 0 {
		t.Fatal("README's Metrics section has no table rows")
	}
	return out
}

// standardMetric tells the client library's Go and process collectors
// (not documented one by one) from the sidecar's own metrics.
func standardMetric(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}

// TestREADMEMetricsTableMatchesExported: README's metric table lists
// exactly the metrics a running sidecar exports, with their types and
// labels, so the documentation cannot drift from the code.
func TestREADMEMetricsTableMatchesExported(t *testing.T) {
	w := startObservedWorld(t)
	exported := w.Reg.exported(t)
	documented := readmeMetrics(t)
	for name, info := range exported {
		if standardMetric(name) {
			continue
		}
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("exported %s %v is not in README's metrics table", name, info)
		case doc.Type != info.Type || !slices.Equal(doc.Labels, info.Labels):
			t.Errorf("README documents %s as %v, exported as %v", name, doc, info)
		}
	}
	for name := range documented {
		if _, ok := exported[name]; !ok {
			t.Errorf("README documents %s, which a running sidecar does not export", name)
		}
	}
}

// TestMetricNamesFollowTheScheme: the naming scheme README states, on
// what a running sidecar exports: ngit_sync_*, counters and only counters
// end in _total, histograms end in a unit.
func TestMetricNamesFollowTheScheme(t *testing.T) {
	w := startObservedWorld(t)
	for name, info := range w.Reg.exported(t) {
		if standardMetric(name) {
			continue
		}
		if !strings.HasPrefix(name, "ngit_sync_") {
			t.Errorf("%s: not under the ngit_sync_ prefix", name)
		}
		total := strings.HasSuffix(name, "_total")
		switch info.Type {
		case "counter":
			if !total {
				t.Errorf("counter %s does not end in _total", name)
			}
		case "histogram", "summary":
			if !strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_bytes") {
				t.Errorf("%s %s does not end in its unit (_seconds, _bytes)", info.Type, name)
			}
		default:
			if total {
				t.Errorf("%s %s ends in _total, which only counters do", info.Type, name)
			}
		}
	}
}

// TestReadyAndOwnRelayGauges: ngit_sync_ready and
// ngit_sync_own_relay_connected are 1 on a synced sidecar and drop to 0
// when the own relay goes away.
func TestReadyAndOwnRelayGauges(t *testing.T) {
	w := startObservedWorld(t)
	for _, name := range []string{"ngit_sync_ready", "ngit_sync_own_relay_connected"} {
		if got := testkit.Metric(t, w.Reg, name, nil); got != 1 {
			t.Errorf("%s = %v on a synced sidecar, want 1", name, got)
		}
	}
	if err := w.Own.Stop(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, syncTimeout, "readiness and own-relay gauges at 0", func() bool {
		return testkit.Metric(t, w.Reg, "ngit_sync_ready", nil) == 0 &&
			testkit.Metric(t, w.Reg, "ngit_sync_own_relay_connected", nil) == 0
	})
}
