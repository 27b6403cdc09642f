package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit"
)

// requirePrometheusEnv makes TestDashboardAndAlertsOnPrometheus fail
// instead of skip when no prometheus binary is installed (.ci/run sets it
// after installing Debian's prometheus package).
const requirePrometheusEnv = "GRASP_SYNC_REQUIRE_PROMETHEUS"

// promAPI queries a Prometheus HTTP API endpoint and decodes its data.
func promAPI(t *testing.T, base, path string, params url.Values, data any) error {
	t.Helper()
	resp, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s %v: %s", path, params, env.Error)
	}
	return json.Unmarshal(env.Data, data)
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// promQuery evaluates an instant vector query.
func promQuery(t *testing.T, base, query string) ([]promSample, error) {
	t.Helper()
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := promAPI(t, base, "/api/v1/query", url.Values{"query": {query}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %s, want vector", query, data.ResultType)
	}
	return data.Result, nil
}

// TestDashboardAndAlertsOnPrometheus runs a real Prometheus that scrapes a
// sidecar syncing a harness world and loads deploy/prometheus/alerts.yml:
// every rule loads and evaluates without error, every dashboard query
// (variables filled in) is valid PromQL that evaluates, the readiness panel
// shows the sidecar ready, and stopping the own relay makes the
// own-relay and readiness alerts pending.
func TestDashboardAndAlertsOnPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv(requirePrometheusEnv) == "" {
			t.Skipf("no prometheus in PATH (Debian: apt-get install prometheus); set %s=1 to make this a failure", requirePrometheusEnv)
		}
		t.Fatalf("%s is set but no prometheus is in PATH", requirePrometheusEnv)
	}
	w := startObservedWorld(t)

	dir := t.TempDir()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: grasp-sync
    static_configs: [{targets: [%q]}]
`, rules, w.HTTP.Addr())
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", tail(logs.String(), 4000))
		}
	})
	base := "http://" + addr

	// Three scrapes of the sidecar, so rates have two points.
	testkit.WaitFor(t, 60*time.Second, "three scrapes of the sidecar", func() bool {
		res, err := promQuery(t, base, `count_over_time(up{job="grasp-sync"}[1m]) >= 3 and on() up{job="grasp-sync"} == 1`)
		return err == nil && len(res) == 1
	})

	// Every rule loaded and evaluated cleanly.
	type ruleState struct {
		Name           string    `json:"name"`
		Health         string    `json:"health"`
		State          string    `json:"state"`
		LastError      string    `json:"lastError"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	}
	rulesNow := func() []ruleState {
		var data struct {
			Groups []struct {
				Rules []ruleState `json:"rules"`
			} `json:"groups"`
		}
		if err := promAPI(t, base, "/api/v1/rules", nil, &data); err != nil {
			t.Fatal(err)
		}
		var out []ruleState
		for _, g := range data.Groups {
			out = append(out, g.Rules...)
		}
		return out
	}
	want := alertRules(t)
	testkit.WaitFor(t, 30*time.Second, "every rule evaluated", func() bool {
		rs := rulesNow()
		if len(rs) != len(want) {
			return false
		}
		for _, r := range rs {
			if r.LastEvaluation.IsZero() || r.LastEvaluation.Year() < 2000 {
				return false
			}
		}
		return true
	})
	for _, r := range rulesNow() {
		if r.Health != "ok" || r.LastError != "" {
			t.Errorf("rule %s: health %q, error %q", r.Name, r.Health, r.LastError)
		}
		if r.State == "firing" {
			t.Errorf("rule %s fires on a healthy world", r.Name)
		}
	}

	// Every dashboard query evaluates.
	fill := strings.NewReplacer("$__rate_interval", "5s", "$job", ".*", "$instance", ".*")
	withData := 0
	exprs := dashboardExprs(t)
	for where, expr := range exprs {
		res, err := promQuery(t, base, fill.Replace(expr))
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if len(res) > 0 {
			withData++
		}
	}
	t.Logf("%d of %d dashboard queries return data on this world", withData, len(exprs))
	if ready, err := promQuery(t, base, fill.Replace(exprs["panel Ready #A"])); err != nil ||
		len(ready) != 1 || ready[0].Value[1] != "1" {
		t.Errorf("the Ready panel shows %+v (%v), want 1", ready, err)
	}

	// The own relay goes away: its alert and the readiness alert become pending.
	if err := w.Own.Stop(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "own-relay and readiness alerts pending", func() bool {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := promAPI(t, base, "/api/v1/alerts", nil, &data); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, a := range data.Alerts {
			if a.State == "pending" || a.State == "firing" {
				got[a.Labels["alertname"]] = true
			}
		}
		return got["GraspSyncOwnRelayDisconnected"] && got["GraspSyncNotReady"]
	})
}
