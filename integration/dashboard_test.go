package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const (
	dashboardFile = "../deploy/grafana/grasp-sync.json"
	alertsFile    = "../deploy/prometheus/alerts.yml"
)

// promQLFunctions are the PromQL functions and aggregations the dashboard
// and rules may use whose names contain an underscore (every other such
// identifier in an expression must be a metric).
var promQLFunctions = map[string]bool{
	"histogram_quantile": true, "label_replace": true, "label_join": true, "count_values": true,
	"avg_over_time": true, "min_over_time": true, "max_over_time": true, "sum_over_time": true,
	"count_over_time": true, "last_over_time": true, "quantile_over_time": true, "present_over_time": true,
	"absent_over_time": true, "label_values": true, "group_left": true, "group_right": true,
}

// scrapeLabels are added by Prometheus to every series.
var scrapeLabels = []string{"instance", "job"}

var (
	stringLitRE  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	rangeRE      = regexp.MustCompile(`\[[^\]]*\]`)
	variableRE   = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	identRE      = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	selectorRE   = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRE    = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)`)
	groupingRE   = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	histSuffixRE = regexp.MustCompile(`^(.*)_(bucket|sum|count)$`)
)

// checkExpr checks one PromQL expression against the exported metrics:
// every metric it names exists (histogram and summary series by their
// _bucket, _sum and _count names), label matchers use the metric's labels,
// and grouping labels exist on some metric of the expression. It returns
// the metrics used.
func checkExpr(errorf func(format string, args ...any), where, expr string, exported map[string]metricInfo) []string {
	labelsOf := func(name string) ([]string, bool) {
		if info, ok := exported[name]; ok {
			return info.Labels, true
		}
		if m := histSuffixRE.FindStringSubmatch(name); m != nil {
			if info, ok := exported[m[1]]; ok && (info.Type == "histogram" || info.Type == "summary") {
				if m[2] == "bucket" {
					return append(slices.Clone(info.Labels), "le"), true
				}
				return info.Labels, true
			}
		}
		return nil, false
	}
	// Label matchers are checked on the expression with its strings intact
	// but variables replaced.
	bare := variableRE.ReplaceAllString(expr, "x")
	for _, m := range selectorRE.FindAllStringSubmatch(bare, -1) {
		labels, ok := labelsOf(m[1])
		if !ok {
			continue // reported below
		}
		inner := stringLitRE.ReplaceAllString(m[2], `""`)
		for _, lm := range matcherRE.FindAllStringSubmatch(inner, -1) {
			if !slices.Contains(labels, lm[1]) && !slices.Contains(scrapeLabels, lm[1]) {
				errorf("%s: %s has no label %q (has %v): %s", where, m[1], lm[1], labels, expr)
			}
		}
	}
	stripped := stringLitRE.ReplaceAllString(bare, `""`)
	stripped = rangeRE.ReplaceAllString(stripped, "")
	var used []string
	allLabels := slices.Clone(scrapeLabels)
	noSelectors := regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(stripped, " ")
	for _, id := range identRE.FindAllString(noSelectors, -1) {
		if !strings.Contains(id, "_") || promQLFunctions[id] {
			continue
		}
		labels, ok := labelsOf(id)
		if !ok {
			// A grouping label such as result or relay is not a metric.
			if groupingLabel(noSelectors, id) {
				continue
			}
			errorf("%s: %s is not exported by a running sidecar: %s", where, id, expr)
			continue
		}
		used = append(used, id)
		allLabels = append(allLabels, labels...)
	}
	for _, g := range groupingRE.FindAllStringSubmatch(noSelectors, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(allLabels, l) {
				errorf("%s: grouping label %q is on none of the metrics %v: %s", where, l, used, expr)
			}
		}
	}
	return used
}

// groupingLabel reports whether id appears inside a by/without/on/ignoring
// clause of expr.
func groupingLabel(expr, id string) bool {
	for _, g := range groupingRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if strings.TrimSpace(l) == id {
				return true
			}
		}
	}
	return false
}

// dashboardExprs returns every PromQL expression of the dashboard: panel
// targets' expr and template variable queries, with where each is.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string           `json:"uid"`
		Title      string           `json:"title"`
		Panels     []map[string]any `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.UID == "" || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("%s: uid %q, title %q, %d panels", dashboardFile, dash.UID, dash.Title, len(dash.Panels))
	}
	exprs := map[string]string{}
	ids := map[float64]bool{}
	var walk func(panels []map[string]any)
	walk = func(panels []map[string]any) {
		for _, p := range panels {
			title, _ := p["title"].(string)
			id, _ := p["id"].(float64)
			if ids[id] {
				t.Errorf("panel %q: id %v used twice", title, id)
			}
			ids[id] = true
			if _, ok := p["gridPos"].(map[string]any); !ok {
				t.Errorf("panel %q has no gridPos", title)
			}
			if p["type"] == "row" {
				if sub, ok := p["panels"].([]any); ok {
					var ps []map[string]any
					for _, s := range sub {
						if m, ok := s.(map[string]any); ok {
							ps = append(ps, m)
						}
					}
					walk(ps)
				}
				continue
			}
			targets, _ := p["targets"].([]any)
			if len(targets) == 0 {
				t.Errorf("panel %q has no query", title)
			}
			for i, tg := range targets {
				m, _ := tg.(map[string]any)
				expr, _ := m["expr"].(string)
				if expr == "" {
					t.Errorf("panel %q target %d has no expr", title, i)
					continue
				}
				exprs["panel "+title+" #"+string(rune('A'+i))] = expr
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		if q == "" {
			t.Errorf("template variable %s has no query", v.Name)
			continue
		}
		if inner, ok := strings.CutPrefix(q, "label_values("); ok {
			// label_values(selector, label): the selector is PromQL.
			if i := strings.LastIndex(inner, ","); i > 0 {
				q = inner[:i]
			}
		}
		exprs["variable "+v.Name] = q
	}
	return exprs
}

// alertRule is one rule of a Prometheus rule file.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var rules []alertRule
	for _, g := range file.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: group %q is unnamed or empty", alertsFile, g.Name)
		}
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return rules
}

// TestDashboardAndAlertsUseExportedMetrics: the Grafana dashboard and the
// Prometheus alert rules in deploy/ parse, and every metric (and label) a
// panel, variable or rule uses is exported by a running sidecar, so they
// cannot drift from the code.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	w := startObservedWorld(t)
	exported := w.Reg.exported(t)

	used := map[string]bool{}
	for where, expr := range dashboardExprs(t) {
		for _, m := range checkExpr(t.Errorf, dashboardFile+": "+where, expr, exported) {
			used[m] = true
		}
	}
	names := map[string]bool{}
	for _, r := range alertRules(t) {
		where := alertsFile + ": " + r.Alert
		if r.Alert == "" || r.Record != "" {
			t.Errorf("%s: want alerting rules only (alert %q, record %q)", alertsFile, r.Alert, r.Record)
		}
		if names[r.Alert] {
			t.Errorf("%s: alert %s defined twice", alertsFile, r.Alert)
		}
		names[r.Alert] = true
		if r.For != "" {
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", where, r.For, err)
			}
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", where, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs a summary and a description", where)
		}
		if len(checkExpr(t.Errorf, where, r.Expr, exported)) == 0 {
			t.Errorf("%s: expression uses no metric: %s", where, r.Expr)
		}
	}
	// What the issue asks the dashboard and the rules to cover.
	for _, m := range []string{
		"ngit_sync_ready", "ngit_sync_relay_connected", "ngit_sync_relay_status",
		"ngit_sync_events_synced_total", "ngit_sync_events_rejected_total",
		"ngit_sync_events_duplicate_total", "ngit_sync_events_invalid_total",
		"ngit_sync_historic_batches_total", "ngit_sync_negentropy_bytes_total",
		"ngit_sync_negentropy_sync_duration_seconds_bucket", "ngit_sync_publisher_queue_length",
		"ngit_sync_publisher_window", "ngit_sync_purgatory_events",
		"ngit_sync_purgatory_events_released_total", "ngit_sync_purgatory_events_expired_total",
		"ngit_sync_purgatory_domain_requests_total",
	} {
		if !used[m] {
			t.Errorf("the dashboard shows no %s", m)
		}
	}
	for _, a := range []string{
		"GraspSyncOwnRelayDisconnected", "GraspSyncNotReady", "GraspSyncRelaysDead",
		"GraspSyncRelayRateLimitedLong", "GraspSyncHistoricSyncFailing",
		"GraspSyncPurgatoryExpiries", "GraspSyncPublisherRejectionsRising",
	} {
		if !names[a] {
			t.Errorf("%s has no alert %s", alertsFile, a)
		}
	}
}

// TestCheckExprFindsDrift: the expression check used above reports a
// metric that is not exported, a label the metric lacks and a grouping
// label no metric has (so the dashboard test can fail).
func TestCheckExprFindsDrift(t *testing.T) {
	exported := map[string]metricInfo{
		"ngit_sync_a_total":         {Type: "counter", Labels: []string{"relay"}},
		"ngit_sync_d_seconds":       {Type: "histogram"},
		"ngit_sync_relays_tracked":  {Type: "gauge"},
		"ngit_sync_publisher_queue": {Type: "gauge"},
	}
	for _, tc := range []struct {
		expr string
		bad  bool
	}{
		{`sum by (relay) (rate(ngit_sync_a_total{job=~"$job", relay!=""}[$__rate_interval]))`, false},
		{`histogram_quantile(0.9, sum by (le) (rate(ngit_sync_d_seconds_bucket[5m])))`, false},
		{`ngit_sync_relays_tracked_total > 0`, true},
		{`rate(ngit_sync_a_total{result="x"}[5m])`, true},
		{`sum by (result) (rate(ngit_sync_a_total[5m]))`, true},
		{`ngit_sync_d_seconds_bucket{relay="x"}`, true},
	} {
		var reports []string
		checkExpr(func(format string, args ...any) { reports = append(reports, fmt.Sprintf(format, args...)) }, "case", tc.expr, exported)
		if (len(reports) > 0) != tc.bad {
			t.Errorf("%s: reported %q, want a report: %v", tc.expr, reports, tc.bad)
		}
	}
}
