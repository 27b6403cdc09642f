package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// manyRepos is a world of many repositories whose clone URLs share one
// host: an own relay holding their announcements, a remote relay holding
// their state events and an issue each, one real git server holding every
// repository's commit, and an own git directory that starts empty (the
// sidecar creates the repositories).
type manyRepos struct {
	Own, Remote *harness.Relay
	Git         *gitserver.Server
	GitDir      string
	// States are the state events whose commits the git server has;
	// Missing those whose commits it never has (they expire).
	States, Missing []*nostr.Event
	Issues          []*nostr.Event

	mu      sync.Mutex
	fetched map[string]bool // repository paths the git server was asked for
}

// manyReposRun is one sidecar on a manyRepos world, with its HTTP surface
// and its log observed at DEBUG.
type manyReposRun struct {
	Sidecar *runningSidecar
	HTTP    *httpapi.Server
	Logs    *observer.ObservedLogs
}

// newManyRepos builds the world with n repositories, the last missing of
// them without their commit on the git server.
func newManyRepos(t *testing.T, n, missing int) *manyRepos {
	t.Helper()
	w := &manyRepos{fetched: map[string]bool{}, GitDir: t.TempDir()}
	w.Own = ownRelay(t)
	w.Remote = harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	w.Git = gitserver.NewT(t, t.TempDir(), gitserver.Options{OnRequest: func(r *http.Request) {
		if r.URL.Query().Get("service") == "git-upload-pack" {
			w.mu.Lock()
			w.fetched[strings.TrimSuffix(r.URL.Path, "/info/refs")] = true
			w.mu.Unlock()
		}
	}})
	owner := signed.NewKey()
	var anns, remote []*nostr.Event
	for i := range n {
		d := fmt.Sprintf("repo-%03d", i)
		rel := owner.Npub() + "/" + d + ".git"
		repo, err := w.Git.CreateRepo(rel)
		if err != nil {
			t.Fatal(err)
		}
		head := strings.Repeat("ab", 20) // a commit nobody has
		if i < n-missing {
			if head, err = repo.Commit("main", "first commit of "+d, map[string]string{"README": d + "\n"}); err != nil {
				t.Fatal(err)
			}
		}
		ann := owner.Announcement(d, signed.WithRelays(w.Own.URL(), w.Remote.URL()),
			signed.WithClone(signed.DefaultCloneURL(w.Own.URL(), owner.Npub(), d), w.Git.CloneURL(rel)))
		state := owner.State(d, signed.WithRef("refs/heads/main", head), signed.WithHEAD("main"))
		issue := owner.Issue(owner.RepoAddress(d), "issue in "+d)
		anns = append(anns, ann)
		remote = append(remote, ann, state, issue)
		if i < n-missing {
			w.States = append(w.States, state)
		} else {
			w.Missing = append(w.Missing, state)
		}
		w.Issues = append(w.Issues, issue)
	}
	mustPublish(t, w.Own, anns...)
	w.Remote.Inject(remote...)
	return w
}

// start runs a sidecar on the world, with the configuration mut leaves,
// until the test ends or Stop.
func (w *manyRepos) start(t *testing.T, mut func(*config.Config)) *manyReposRun {
	t.Helper()
	cfg := fastConfig(w.Own)
	cfg.GitDir = w.GitDir
	cfg.ServiceDomain = w.Own.Addr()
	cfg.Purgatory.CreateMissingRepos = true
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.GitTimeout = 30 * time.Second
	if mut != nil {
		mut(cfg)
	}
	r := &manyReposRun{}
	log, logs := observedLogger(t)
	r.Logs = logs
	r.Sidecar = startSidecarDeps(t, cfg, sidecar.Deps{Log: log, Git: gitx.NewExec(30 * time.Second)})
	r.HTTP = serveHTTP(t, httpapi.Options{Provider: r.Sidecar.Sidecar, Gatherer: r.Sidecar.Registry})
	return r
}

// wasFetched tells whether the git server was asked for d's repository.
func (w *manyRepos) wasFetched(d string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for path := range w.fetched {
		if strings.HasSuffix(path, "/"+d+".git") {
			return true
		}
	}
	return false
}

// onOwn counts the events of evs the own relay holds.
func (w *manyRepos) onOwn(evs []*nostr.Event) int {
	n := 0
	for _, ev := range evs {
		if w.Own.Has(ev.ID) {
			n++
		}
	}
	return n
}

// allOnOwn tells whether the own relay holds every state event with data
// and every issue.
func (w *manyRepos) allOnOwn() bool {
	return w.onOwn(w.States) == len(w.States) && w.onOwn(w.Issues) == len(w.Issues)
}

// get returns the body of the HTTP surface's path.
func (r *manyReposRun) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + r.HTTP.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// infoLines counts the lines logged at INFO and above, and lists them by
// level, logger and message with their number.
func (r *manyReposRun) infoLines() (int, string) {
	byMessage := map[string]int{}
	lines := 0
	for _, e := range r.Logs.All() {
		if e.Level >= zapcore.InfoLevel {
			lines++
			byMessage[fmt.Sprintf("%s %s: %s", e.Level.CapitalString(), e.LoggerName, e.Message)]++
		}
	}
	report := make([]string, 0, len(byMessage))
	for m, c := range byMessage {
		report = append(report, fmt.Sprintf("%4d  %s", c, m))
	}
	sort.Strings(report)
	return lines, strings.Join(report, "\n")
}

// warnCount sums the count field of the WARN lines logged as message, and
// fails on such a line at another level.
func (r *manyReposRun) warnCount(t *testing.T, message string) int64 {
	t.Helper()
	var total int64
	for _, e := range r.Logs.FilterMessage(message).All() {
		if e.Level != zapcore.WarnLevel {
			t.Errorf("%q at %v, want WARN", message, e.Level)
		}
		total += e.ContextMap()["count"].(int64)
	}
	return total
}

// TestPurgatoryWaitingIsNotFailing: 40 repositories whose clone URLs share
// one host, at 6 git requests per 500 ms on it (2 at once). While the
// domain's slots are taken, /status shows the identifiers that wait for
// one as waiting, with the domain and its limit, and never a failed
// attempt (none of these fetches fails), also for those never fetched
// yet; the status page says so, and ngit_sync_purgatory_domain_waiting
// {domain} counts them (its series exists from the start). Nothing is
// logged as "will retry", no attempt counts as a retry, and every state
// event is released.
func TestPurgatoryWaitingIsNotFailing(t *testing.T) {
	const n = 40
	window := 500 * time.Millisecond
	w := newManyRepos(t, n, 0)
	r := w.start(t, func(c *config.Config) {
		c.Purgatory.DomainConcurrency = 2
		c.Purgatory.DomainRequestsPerWindow = 6
		c.Purgatory.DomainWindow = window
	})
	host := w.Git.Host()
	start := time.Now()
	gauge := func() (float64, bool) {
		return testkit.Series(t, r.Sidecar.Registry, "ngit_sync_purgatory_domain_waiting", map[string]string{"domain": host})
	}
	if _, ok := gauge(); !ok {
		t.Fatal("no ngit_sync_purgatory_domain_waiting series for the clone domain once ready: not created at 0 from the start")
	}
	want := status.DomainLimit{RequestsPerWindow: 6, WindowSeconds: window.Seconds(), Concurrency: 2}
	var maxWaiting, maxGauge float64
	seenUnfetched, pageChecked := false, false
	done := func() bool {
		var st status.Snapshot
		if err := json.Unmarshal([]byte(r.get(t, "/status")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Purgatory.DomainLimit != want {
			t.Fatalf("/status domain_limit %+v, want %+v", st.Purgatory.DomainLimit, want)
		}
		waiting := 0
		for _, id := range st.Purgatory.Identifiers {
			if id.Attempts != 0 || id.LastError != "" {
				t.Fatalf("%s: %d failed attempts, last error %q; no fetch failed", id.Identifier, id.Attempts, id.LastError)
			}
			if len(id.WaitingFor) == 0 {
				continue
			}
			waiting++
			if len(id.WaitingFor) != 1 || id.WaitingFor[0].Domain != host || id.WaitingFor[0].DomainLimit != want {
				t.Fatalf("%s waits for %+v, want %s with %+v", id.Identifier, id.WaitingFor, host, want)
			}
			if id.Syncing || id.NextAttempt != nil {
				t.Fatalf("%s waits for a slot, yet syncing %v, next attempt %v", id.Identifier, id.Syncing, id.NextAttempt)
			}
			if !w.wasFetched(id.Identifier) {
				seenUnfetched = true
			}
		}
		if waiting > 0 && st.Purgatory.Waiting != waiting {
			t.Fatalf("/status purgatory.waiting %d, %d identifiers listed waiting", st.Purgatory.Waiting, waiting)
		}
		maxWaiting = max(maxWaiting, float64(waiting))
		g, _ := gauge()
		maxGauge = max(maxGauge, g)
		if waiting >= 10 && !pageChecked {
			page := r.get(t, "/?refresh=0")
			for _, s := range []string{
				fmt.Sprintf("waiting for %s (6 requests/500ms)", host),
				"(each domain: 6 requests per 500ms, 2 at once)",
				fmt.Sprintf(`<tr class="domain" data-domain="%s">`, host),
			} {
				if !strings.Contains(page, s) {
					t.Errorf("status page lacks %q", s)
				}
			}
			pageChecked = true
		}
		return st.Purgatory.Events == 0 && w.allOnOwn()
	}
	testkit.WaitFor(t, syncTimeout, "every state event released", done)
	t.Logf("released in %v; at most %v identifiers waiting in /status, gauge at most %v, git server fetches %d",
		time.Since(start).Round(time.Millisecond), maxWaiting, maxGauge, w.Git.Stats().Fetches)
	if maxWaiting < n/3 || maxGauge < n/3 {
		t.Errorf("at most %v identifiers waiting (gauge %v): want most of %d to have waited", maxWaiting, maxGauge, n)
	}
	if !seenUnfetched {
		t.Error("no identifier seen waiting before its first fetch")
	}
	if !pageChecked {
		t.Error("the status page was never seen with identifiers waiting")
	}
	if m := w.Git.MaxFetchesInWindow(window); m > 6 {
		t.Errorf("the git server saw %d fetches within %v, limit 6", m, window)
	}
	testkit.WaitFor(t, syncTimeout, "nothing waiting", func() bool { g, _ := gauge(); return g == 0 })
	if v := testkit.Metric(t, r.Sidecar.Registry, "ngit_sync_purgatory_sync_attempts_total", map[string]string{"result": "retry"}); v != 0 {
		t.Errorf("sync_attempts_total{retry} = %v: a wait for the domain counted as a failed attempt", v)
	}
	if n := r.Logs.FilterMessage("git data still missing; will retry").Len(); n != 0 {
		t.Errorf("%d \"will retry\" lines although nothing failed", n)
	}
	for _, e := range r.Logs.All() {
		if e.LoggerName == "purgatory" && e.Level >= zapcore.WarnLevel {
			t.Errorf("purgatory warning: %s %v", e.Message, e.ContextMap())
		}
	}
}

// TestFirstSyncLogIsReadable: a first sync of 150 repositories whose clone
// URLs share one host (real git; 5 name a commit the server never has),
// with the default log intervals (log.progress_interval,
// purgatory.summary_interval), logs at most 60 lines at INFO and above:
// each event, fetch, release and created repository is a DEBUG line, their
// counts come in the summaries. Events dropped are counted at WARN: the
// purgatory, held to 140 events (and waiting 3 s before its first fetch,
// so that every state event has arrived first), refuses some in one WARN
// line whose count is the refusal metric's. Restarted on its state
// directory with a 2 s expiry, the sidecar drops the events without data
// it held (restored with their intake time) in one WARN line whose count
// is the expiry metric's.
//
// Under -race it runs with 50 repositories (held to 40); .ci/run runs it
// at full size in its heavy-scenario step.
func TestFirstSyncLogIsReadable(t *testing.T) {
	const missing = 5
	n := scaled(150, 50)
	held := n - 10
	w := newManyRepos(t, n, missing)
	stateDir := t.TempDir()
	r := w.start(t, func(c *config.Config) {
		c.State.Dir = stateDir
		c.Purgatory.DomainRequestsPerWindow = 1000 // 150 fetches at once, not throttled here
		c.Purgatory.MaxEntries = held
		c.Purgatory.SyncedDelay = 3 * time.Second
	})
	var left int // events held when the sidecar stops: those without data
	testkit.WaitFor(t, 2*syncTimeout, "every state event released, refused or held without its data", func() bool {
		left = r.Sidecar.Status().Purgatory.Events
		refused := testkit.Metric(t, r.Sidecar.Registry, "ngit_sync_purgatory_events_refused_total", nil)
		return left <= missing && w.onOwn(w.Issues) == len(w.Issues) && float64(left+w.onOwn(w.States))+refused >= float64(n)
	})
	r.Sidecar.Stop(t) // the last summary is logged as it stops

	refused := testkit.Metric(t, r.Sidecar.Registry, "ngit_sync_purgatory_events_refused_total", nil)
	if refused < 1 {
		t.Errorf("%v events refused by a purgatory held to %d of %d", refused, held, n)
	}
	if got := r.warnCount(t, "purgatory refused events: full"); float64(got) != refused {
		t.Errorf("the refusal WARN lines count %d events, the metric %v", got, refused)
	}
	lines, report := r.infoLines()
	t.Logf("first sync: %d lines at INFO and above (%d in all), %v refused, %d held without data:\n%s",
		lines, r.Logs.Len(), refused, left, report)
	if lines > 60 {
		t.Errorf("%d lines at INFO and above for a first sync of %d repositories, want at most 60", lines, n)
	}
	for _, m := range []string{"released", "released events", "fetched objects", "created repository", "git data still missing; will retry"} {
		for _, e := range r.Logs.FilterMessage(m).All() {
			if e.Level != zapcore.DebugLevel {
				t.Errorf("%q logged at %v, want DEBUG", m, e.Level)
				break
			}
		}
	}
	if got := r.Logs.FilterMessage("created repository").Len(); got < held-missing {
		t.Errorf("%d created repository lines at DEBUG, want one per repository fetched into", got)
	}
	if w.onOwn(w.Missing) != 0 {
		t.Error("a state event without git data reached the own relay")
	}
	if left == 0 {
		t.Fatal("no event without data held at the end (all refused?): nothing to expire")
	}

	// Restarted with a 2 s expiry: the held events come back with their
	// intake time, long past it.
	r = w.start(t, func(c *config.Config) {
		c.State.Dir = stateDir
		c.Purgatory.Expiry = 2 * time.Second
	})
	testkit.WaitFor(t, syncTimeout, "the events without data expired", func() bool {
		return testkit.Metric(t, r.Sidecar.Registry, "ngit_sync_purgatory_events_expired_total", nil) >= float64(left)
	})
	r.Sidecar.Stop(t)
	expired := testkit.Metric(t, r.Sidecar.Registry, "ngit_sync_purgatory_events_expired_total", nil)
	if got := r.warnCount(t, "purgatory dropped events expired without git data"); float64(got) != expired {
		t.Errorf("the expiry WARN lines count %d events, the metric %v", got, expired)
	}
	if lines, report := r.infoLines(); lines > 60 {
		t.Errorf("restart: %d lines at INFO and above, want at most 60:\n%s", lines, report)
	} else {
		t.Logf("restart: %d lines at INFO and above, %v expired:\n%s", lines, expired, report)
	}
}
