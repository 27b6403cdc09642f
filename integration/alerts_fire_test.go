package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"gopkg.in/yaml.v3"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// subqueryStepRE matches the resolution of a range subquery ([1h:1m]).
var subqueryStepRE = regexp.MustCompile(`\[([0-9a-z]+):[0-9a-z]+\]`)

// fastRules writes deploy/prometheus/alerts.yml to dir with its time
// resolutions set for a test, and returns the copy's path: every rule's
// for: duration removed, so a rule fires at the first evaluation that
// finds its condition, and every subquery's resolution set to the test
// Prometheus's 1s evaluation interval (a 1m resolution samples at whole
// minutes, so a condition would wait up to a minute for its first point).
// Nothing else of an expression changes.
func fastRules(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	groups, _ := file["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			rule := r.(map[string]any)
			delete(rule, "for")
			if expr, ok := rule["expr"].(string); ok {
				rule["expr"] = subqueryStepRE.ReplaceAllString(expr, "[$1:1s]")
			}
		}
	}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "alerts.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// prometheusBinary returns the prometheus binary's path, skipping the test
// when there is none, unless requirePrometheusEnv is set.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv(requirePrometheusEnv) == "" {
			t.Skipf("no prometheus in PATH (Debian: apt-get install prometheus); set %s=1 to make this a failure", requirePrometheusEnv)
		}
		t.Fatalf("%s is set but no prometheus is in PATH", requirePrometheusEnv)
	}
	return bin
}

// startPrometheus runs the prometheus binary (skipping the test when there
// is none, unless requirePrometheusEnv is set) scraping target every
// second with the rule file rules, and returns its base URL.
func startPrometheus(t *testing.T, rules, target string) string {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	conf := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: grasp-sync
    static_configs: [{targets: [%q]}]
`, rules, target)
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
	return "http://" + addr
}

// alertStates returns each alert's most advanced state (firing over
// pending) from Prometheus's /api/v1/alerts.
func alertStates(t *testing.T, base string) map[string]string {
	t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := promAPI(t, base, "/api/v1/alerts", nil, &data); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range data.Alerts {
		if n := a.Labels["alertname"]; out[n] != "firing" {
			out[n] = a.State
		}
	}
	return out
}

// TestAlertsFireOnPrometheus drives a sidecar into the conditions of the
// rules in deploy/prometheus/alerts.yml, under a real Prometheus that loads
// them (fastRules), and sees each rule fire: a state event expiring in
// purgatory, one refused by a full purgatory, historic batches failing
// against a relay that never answers, a relay nothing listens on declared
// dead, one rate-limiting every REQ, and the own relay going down
// (disconnected, not ready). Prometheus scrapes the sidecar before it runs,
// so the counters' first increments are increases over series seen at 0.
func TestAlertsFireOnPrometheus(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	// A relay that accepts REQs and never ends them: its historic batches fail.
	silent := startFakeRelay(t, &fakeRelay{
		onReq: func(ctx context.Context, w *fakeWriter, sub string, _ nostr.Filters) {},
	})
	// A relay nothing listens on: it fails until it is dead.
	dead := "ws://" + freeListen(t)
	// A relay that answers every REQ "rate-limited": with a long cooldown,
	// it stays rate-limited.
	limited := harness.Start(t, harness.RelayOptions{Name: "limited", Faults: harness.Faults{ReqClosed: "rate-limited: too many requests"}})
	gitDir := t.TempDir()
	other := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	alice := signed.NewKey()
	var evs []*nostr.Event
	for _, d := range []string{"held1", "held2"} {
		// The only other clone URL has no such repository: the state's git
		// data never arrives.
		rel := alice.Npub() + "/" + d + ".git"
		if _, err := gitserver.InitBare(gitDir + "/" + rel); err != nil {
			t.Fatal(err)
		}
		ann := alice.Announcement(d, signed.WithRelays(own.URL(), remote.URL(), silent.URL(), dead, limited.URL()),
			signed.WithClone("http://"+own.Addr()+"/"+rel, other.CloneURL(rel)))
		mustPublish(t, own, ann)
		evs = append(evs, ann, alice.State(d, signed.WithRef("refs/heads/main", strings.Repeat("ab", 20)), signed.WithHEAD("main")))
	}
	remote.Inject(evs...)

	cfg := fastConfig(own)
	cfg.GitDir = gitDir
	cfg.State.Dir = t.TempDir()
	cfg.ServiceDomain = own.Addr()
	cfg.Sync.EOSETimeout = 2 * time.Second
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.Expiry = 3 * time.Second
	cfg.Purgatory.MaxEntries = 1
	cfg.Health.DeadAfter = 2 * time.Second
	cfg.Health.RateLimitCooldown = 10 * time.Minute

	rs, base := scrapedSidecar(t, cfg)

	want := []string{
		"GraspSyncPurgatoryExpiries", "GraspSyncPurgatoryFull", "GraspSyncHistoricSyncFailing",
		"GraspSyncRelaysDead", "GraspSyncRelayRateLimitedLong",
	}
	var last map[string]string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("alert states last seen: %v", last)
		}
	})
	firing := func(names ...string) func() bool {
		return func() bool {
			st := alertStates(t, base)
			last = st
			for _, n := range names {
				if st[n] != "firing" {
					return false
				}
			}
			return true
		}
	}
	testkit.WaitFor(t, 120*time.Second, fmt.Sprintf("%v firing", want), firing(want...))
	for name, m := range map[string]string{
		"expired": "ngit_sync_purgatory_events_expired_total", "refused": "ngit_sync_purgatory_events_refused_total",
	} {
		if v := testkit.Metric(t, rs.Registry, m, nil); v < 1 {
			t.Errorf("%s: %s = %v, want the event counted", name, m, v)
		}
	}

	// The own relay goes away.
	if err := own.Stop(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 60*time.Second, "GraspSyncOwnRelayDisconnected and GraspSyncNotReady firing",
		firing("GraspSyncOwnRelayDisconnected", "GraspSyncNotReady"))
}

// TestPublisherAlertsFireOnPrometheus: under a real Prometheus loading
// deploy/prometheus/alerts.yml (fastRules), a sidecar whose own relay
// swallows every EVENT (no OK) fires GraspSyncPublisherStuck, and once the
// relay rejects them instead, GraspSyncPublisherRejectionsRising. Its local
// index, bounded to one event, cannot take the two the own relay holds:
// GraspSyncLocalIndexFull fires too.
func TestPublisherAlertsFireOnPrometheus(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	alice := signed.NewKey()
	ann := repoFor(alice, "proj", own, remote)
	addr := alice.RepoAddress("proj")
	mustPublish(t, own, ann, alice.Issue(addr, "on the own relay"))
	const issues = 20 // the rule wants more than 10 rejections
	evs := []*nostr.Event{ann}
	for i := 0; i < issues; i++ {
		evs = append(evs, alice.Issue(addr, fmt.Sprintf("issue %d", i)))
	}
	remote.Inject(evs...)
	own.SetFaults(harness.Faults{EventIgnore: true})

	cfg := fastConfig(own)
	cfg.GitDir = t.TempDir()
	cfg.State.Dir = t.TempDir()
	cfg.ServiceDomain = own.Addr()
	cfg.Publisher.Window = 2 // the rest wait in the queue
	cfg.Publisher.OKTimeout = time.Second
	cfg.Limits.MaxLocalIndexEvents = 1 // the own relay holds two events
	rs, base := scrapedSidecar(t, cfg)

	var last map[string]string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("alert states last seen: %v", last)
		}
	})
	firing := func(name string) func() bool {
		return func() bool {
			last = alertStates(t, base)
			return last[name] == "firing"
		}
	}
	testkit.WaitFor(t, 60*time.Second, "GraspSyncPublisherStuck and GraspSyncLocalIndexFull firing", func() bool {
		return firing("GraspSyncPublisherStuck")() && last["GraspSyncLocalIndexFull"] == "firing"
	})
	if st := alertStates(t, base); st["GraspSyncPublisherRejectionsRising"] != "" {
		t.Fatalf("GraspSyncPublisherRejectionsRising is %q before any rejection", st["GraspSyncPublisherRejectionsRising"])
	}

	own.SetFaults(harness.Faults{EventReject: "blocked: not today"})
	testkit.WaitFor(t, 60*time.Second, "GraspSyncPublisherRejectionsRising firing", firing("GraspSyncPublisherRejectionsRising"))
	if v := testkit.Metric(t, rs.Registry, "ngit_sync_publisher_results_total", map[string]string{"result": "rejected"}); v < issues {
		t.Errorf("publisher_results_total{result=rejected} = %v, want the %d issues rejected", v, issues)
	}
}

// scrapedSidecar builds a sidecar on cfg with its HTTP surface on a free
// port and a Prometheus, with the test copy of the rules, that scraped it
// twice before it runs; then it runs it until the test ends. It returns
// the sidecar and Prometheus's base URL.
func scrapedSidecar(t *testing.T, cfg *config.Config) (*runningSidecar, string) {
	t.Helper()
	reg := newRecordingRegistry()
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), Registry: reg, Version: "test"})
	if err != nil {
		t.Fatalf("sidecar.New: %v", err)
	}
	srv := serveHTTP(t, httpapi.Options{Provider: sc, Gatherer: reg})
	base := startPrometheus(t, fastRules(t, t.TempDir()), srv.Addr())
	// Prometheus scrapes the sidecar before anything happens.
	testkit.WaitFor(t, 60*time.Second, "two scrapes of the sidecar before it runs", func() bool {
		res, err := promQuery(t, base, `count_over_time(up{job="grasp-sync"}[1m]) >= 2 and on() up{job="grasp-sync"} == 1`)
		return err == nil && len(res) == 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningSidecar{Sidecar: sc, Registry: reg.Registry, cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- sc.Run(ctx) }()
	t.Cleanup(func() { rs.Stop(t) })
	return rs, base
}
