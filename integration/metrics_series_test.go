package integration

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/netpolicy"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/version"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// seriesRef is one selector of a dashboard or rule expression: a metric
// name and the label values its equality matchers ask for.
type seriesRef struct {
	Name   string
	Equals map[string]string
}

func (s seriesRef) String() string {
	var ls []string
	for k, v := range s.Equals {
		ls = append(ls, k+"="+`"`+v+`"`)
	}
	sort.Strings(ls)
	return s.Name + "{" + strings.Join(ls, ",") + "}"
}

var equalMatcherRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// exprSeries lists the selectors of expr: every metric it names (as
// checkExpr finds them) with the literal equality matchers of its
// selector, scrape labels left out.
func exprSeries(expr string) []seriesRef {
	bare := variableRE.ReplaceAllString(expr, "x")
	var out []seriesRef
	seen := map[string]bool{}
	add := func(r seriesRef) {
		if !seen[r.String()] {
			seen[r.String()] = true
			out = append(out, r)
		}
	}
	named := map[string]bool{}
	for _, m := range selectorRE.FindAllStringSubmatch(bare, -1) {
		r := seriesRef{Name: m[1], Equals: map[string]string{}}
		// Only "=": "=~", "!=" and "!~" match sets the selector does not name.
		inner := regexp.MustCompile(`(=~|!=|!~)\s*"(?:[^"\\]|\\.)*"`).ReplaceAllString(m[2], "")
		for _, lm := range equalMatcherRE.FindAllStringSubmatch(inner, -1) {
			if !slices.Contains(scrapeLabels, lm[1]) {
				r.Equals[lm[1]] = lm[2]
			}
		}
		named[m[1]] = true
		add(r)
	}
	stripped := stringLitRE.ReplaceAllString(bare, `""`)
	stripped = rangeRE.ReplaceAllString(stripped, "")
	noSelectors := regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(stripped, " ")
	for _, id := range identRE.FindAllString(noSelectors, -1) {
		if !strings.Contains(id, "_") || promQLFunctions[id] || groupingLabel(noSelectors, id) || named[id] {
			continue
		}
		add(seriesRef{Name: id, Equals: map[string]string{}})
	}
	return out
}

// appearOnlyOnce are the metrics of the dashboard and rules whose series
// rightly appear only when something happened, with why.
var appearOnlyOnce = map[string]string{
	// A timestamp: 0 would read as a reconciliation in 1970.
	"ngit_sync_negentropy_last_sync_timestamp_seconds": "set by the relay's first successful reconciliation",
	// Per clone URL domain, known when a hosted announcement names it
	// (TestPurgatoryWaitingIsNotFailing checks it is there once ready);
	// this world's only clone URL is on the own domain.
	"ngit_sync_purgatory_domain_requests_total": "per domain, created when a hosted announcement names it",
	"ngit_sync_purgatory_domain_in_flight":      "per domain, created when a hosted announcement names it",
	"ngit_sync_purgatory_domain_waiting":        "per domain, created when a hosted announcement names it",
}

// scrapeFamilies reads the sidecar's /metrics as Prometheus does.
func scrapeFamilies(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// hasSeries reports whether the scraped families hold a series for r
// (histograms by their _bucket, _sum and _count names).
func hasSeries(mfs map[string]*dto.MetricFamily, r seriesRef) bool {
	mf := mfs[r.Name]
	if mf == nil {
		if m := histSuffixRE.FindStringSubmatch(r.Name); m != nil {
			mf = mfs[m[1]]
			if mf != nil && mf.GetType() != dto.MetricType_HISTOGRAM && mf.GetType() != dto.MetricType_SUMMARY {
				mf = nil
			}
		}
	}
	if mf == nil {
		return false
	}
	for _, s := range mf.GetMetric() {
		ok := true
		for k, v := range r.Equals {
			found := false
			for _, lp := range s.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			return true
		}
	}
	return false
}

// startQuietSidecar starts a sidecar whose own relay announces one
// repository on an empty remote relay, and waits until it is ready and
// tracks that relay: nothing was synced, expired, refused or failed.
func startQuietSidecar(t *testing.T) (*recordingRegistry, *httpapi.Server) {
	t.Helper()
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	alice := signed.NewKey()
	mustPublish(t, own, alice.Announcement("quiet", signed.WithRelays(own.URL(), remote.URL()),
		signed.WithClone("http://"+own.Addr()+"/"+alice.Npub()+"/quiet.git")))

	cfg := fastConfig(own)
	cfg.GitDir = t.TempDir()
	cfg.State.Dir = t.TempDir()
	cfg.ServiceDomain = own.Addr()
	reg := newRecordingRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		httpapi.NewBuildInfoCollector(version.Get()),
	)
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registry: reg, Version: "test"})
	if err != nil {
		t.Fatalf("sidecar.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningSidecar{Sidecar: sc, Registry: reg.Registry, cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- sc.Run(ctx) }()
	t.Cleanup(func() { rs.Stop(t) })
	srv := serveHTTP(t, httpapi.Options{Provider: sc, Gatherer: reg})
	testkit.WaitFor(t, syncTimeout, "sidecar never became ready", sc.Ready)
	testkit.WaitFor(t, syncTimeout, "the remote relay tracked", func() bool {
		return testkit.Metric(t, reg.Registry, "ngit_sync_relays_tracked", nil) >= 1
	})
	return reg, srv
}

// TestAlertAndDashboardSeriesExistFromStart: a sidecar that has just
// started (nothing synced, expired, refused or failed) already exports
// every series deploy/prometheus/alerts.yml and deploy/grafana's dashboard
// select, with the label values their matchers ask for, so increase() and
// rate() over them see the first occurrence and the panels show 0, not
// "No data". The selectors are read from the files, so the test follows
// them. Every label vector with only closed-set labels has its series too.
func TestAlertAndDashboardSeriesExistFromStart(t *testing.T) {
	reg, srv := startQuietSidecar(t)
	mfs := scrapeFamilies(t, "http://"+srv.Addr())

	exprs := dashboardExprs(t)
	for _, r := range alertRules(t) {
		exprs[alertsFile+": "+r.Alert] = r.Expr
	}
	checked := 0
	for where, expr := range exprs {
		for _, ref := range exprSeries(expr) {
			if _, ok := appearOnlyOnce[ref.Name]; ok {
				continue
			}
			checked++
			if !hasSeries(mfs, ref) {
				t.Errorf("%s: no series %s at start: %s", where, ref, expr)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d selectors; the parsing of the files broke", checked)
	}

	// Every label value the sources count by name (a literal or a package
	// constant) has its series at start, selected by the files or not.
	uses := sourceLabelUses(t, "../internal")
	for _, u := range uses {
		if _, ok := appearOnlyOnce[u.Vec.Name]; ok {
			continue
		}
		ref := seriesRef{Name: u.Vec.Name, Equals: map[string]string{}}
		for i, l := range u.Vec.Labels {
			if u.Values[i] != "" {
				ref.Equals[l] = u.Values[i]
			}
		}
		if !hasSeries(mfs, ref) {
			t.Errorf("%s counts %s, which has no series at start", u.Where, ref)
		}
	}
	if len(uses) < 20 {
		t.Errorf("found only %d WithLabelValues calls naming a value in ../internal; the parsing broke", len(uses))
	}
	// The refusals are counted with the kind and reason passed down, not
	// named at the call: every pair of the package's values is there.
	for _, k := range netpolicy.Kinds() {
		for _, r := range netpolicy.Reasons() {
			ref := seriesRef{Name: "ngit_sync_dial_refused_total", Equals: map[string]string{"kind": string(k), "reason": r}}
			if !hasSeries(mfs, ref) {
				t.Errorf("no series %s at start", ref)
			}
		}
	}

	// Label vectors whose labels are closed sets (no relay, no domain)
	// have every value at 0 from registration.
	reg.mu.Lock()
	cs := slices.Clone(reg.collectors)
	reg.mu.Unlock()
	for _, c := range cs {
		switch c.(type) {
		case *prometheus.CounterVec, *prometheus.GaugeVec, *prometheus.HistogramVec, *prometheus.SummaryVec:
		default:
			continue
		}
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		m := descRE.FindStringSubmatch((<-ch).String())
		if m == nil {
			t.Fatalf("cannot parse descriptor of %T", c)
		}
		if _, ok := appearOnlyOnce[m[1]]; ok || strings.Contains(m[3], "relay") || strings.Contains(m[3], "domain") {
			continue
		}
		if mfs[m[1]] == nil || len(mfs[m[1]].GetMetric()) == 0 {
			t.Errorf("%s {%s}: no series at start", m[1], m[3])
		}
	}
}
