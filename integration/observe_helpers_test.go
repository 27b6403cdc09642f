package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/version"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// recordingRegistry is a registry that remembers every collector
// registered with it, so a test can list each metric the sidecar defines,
// including label vectors that have no series yet.
type recordingRegistry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func newRecordingRegistry() *recordingRegistry {
	return &recordingRegistry{Registry: prometheus.NewRegistry()}
}

func (r *recordingRegistry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return nil
}

func (r *recordingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// metricInfo is one exported metric family: its type (counter, gauge,
// histogram, summary, untyped) and its variable label names, sorted.
type metricInfo struct {
	Type   string
	Labels []string
}

func (m metricInfo) String() string { return m.Type + "{" + strings.Join(m.Labels, ",") + "}" }

// descRE parses prometheus.Desc.String(); help is a quoted Go string.
var (
	descRE       = regexp.MustCompile(`^Desc\{fqName: "([^"]*)", help: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	constLabelRE = regexp.MustCompile(`(?:^|,)([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// exported lists every metric family the registry defines: names and
// labels (constant and variable) from the registered collectors' descriptors, types from what they
// gather, or from the collector's Go type for a label vector with no
// series yet. For families that gather, the labels of every series must
// equal the descriptor's.
func (r *recordingRegistry) exported(t *testing.T) map[string]metricInfo {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	gathered := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		gathered[mf.GetName()] = mf
	}
	r.mu.Lock()
	cs := slices.Clone(r.collectors)
	r.mu.Unlock()
	out := map[string]metricInfo{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot parse descriptor %s", d)
			}
			name := m[1]
			info := metricInfo{}
			for _, cl := range constLabelRE.FindAllStringSubmatch(m[2], -1) {
				info.Labels = append(info.Labels, cl[1])
			}
			for _, l := range strings.Split(m[3], ",") {
				if l = strings.TrimSpace(l); l != "" {
					info.Labels = append(info.Labels, strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"))
				}
			}
			sort.Strings(info.Labels)
			if mf := gathered[name]; mf != nil {
				info.Type = strings.ToLower(mf.GetType().String())
				for _, s := range mf.GetMetric() {
					var got []string
					for _, lp := range s.GetLabel() {
						got = append(got, lp.GetName())
					}
					sort.Strings(got)
					if !slices.Equal(got, info.Labels) {
						t.Errorf("%s: a series has labels %v, the descriptor %v", name, got, info.Labels)
					}
				}
			} else {
				switch c.(type) {
				case *prometheus.CounterVec:
					info.Type = "counter"
				case *prometheus.GaugeVec:
					info.Type = "gauge"
				case *prometheus.HistogramVec:
					info.Type = "histogram"
				case *prometheus.SummaryVec:
					info.Type = "summary"
				default:
					t.Fatalf("%s: no series gathered and collector %T does not tell its type", name, c)
				}
			}
			if prev, ok := out[name]; ok {
				t.Fatalf("%s described twice (%v, %v)", name, prev, info)
			}
			out[name] = info
		}
	}
	return out
}

// observedWorld is a sidecar syncing a harness world that touches every
// part the dashboard shows: a state directory, an own relay, a remote relay with NIP-77, a
// relay that is down, repositories with issues, a state event released
// after a git fetch and one whose git data never arrives (held in
// purgatory), and the HTTP surface of the binary.
type observedWorld struct {
	Own, Remote, Down *harness.Relay
	Sidecar           *runningSidecar
	Reg               *recordingRegistry
	HTTP              *httpapi.Server
	// HeldIdentifier is the repository whose state event stays in purgatory.
	HeldIdentifier string
}

// startObservedWorld starts the world and waits until it has synced: the
// released state event and the issues are on the own relay and the held
// state event has had a failed fetch attempt.
func startObservedWorld(t *testing.T) *observedWorld {
	t.Helper()
	w := &observedWorld{HeldIdentifier: "held"}
	w.Own = ownRelay(t)
	w.Remote = harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	w.Down = harness.Start(t, harness.RelayOptions{Name: "down"})
	if err := w.Down.Stop(); err != nil {
		t.Fatal(err)
	}
	gitDir := t.TempDir()
	alice := signed.NewKey()

	// "tool": its commit lives on another git server; the state event is
	// released once fetched.
	const d = "tool"
	rel := alice.Npub() + "/" + d + ".git"
	other := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	upstream, err := other.CreateRepo(rel)
	if err != nil {
		t.Fatal(err)
	}
	head, err := upstream.Commit("main", "first", map[string]string{"README": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitserver.InitBare(gitDir + "/" + rel); err != nil {
		t.Fatal(err)
	}
	ann := alice.Announcement(d,
		signed.WithRelays(w.Own.URL(), w.Remote.URL(), w.Down.URL()),
		signed.WithClone("http://"+w.Own.Addr()+"/"+rel, other.CloneURL(rel)))
	// "held": its only other clone URL has no such repository.
	heldRel := alice.Npub() + "/" + w.HeldIdentifier + ".git"
	if _, err := gitserver.InitBare(gitDir + "/" + heldRel); err != nil {
		t.Fatal(err)
	}
	heldAnn := alice.Announcement(w.HeldIdentifier,
		signed.WithRelays(w.Own.URL(), w.Remote.URL()),
		signed.WithClone("http://"+w.Own.Addr()+"/"+heldRel, other.CloneURL(heldRel)))
	mustPublish(t, w.Own, ann, heldAnn)
	state := alice.State(d, signed.WithRef("refs/heads/main", head), signed.WithHEAD("main"))
	heldState := alice.State(w.HeldIdentifier, signed.WithRef("refs/heads/main", strings.Repeat("ab", 20)), signed.WithHEAD("main"))
	var issues []*nostr.Event
	for i := range 5 {
		issues = append(issues, alice.Issue(alice.RepoAddress(d), fmt.Sprintf("issue %d", i)))
	}
	w.Remote.Inject(append([]*nostr.Event{ann, heldAnn, state, heldState}, issues...)...)

	cfg := fastConfig(w.Own)
	cfg.GitDir = gitDir
	cfg.GitHTTP.Listen = "127.0.0.1:0" // its metrics are exported too
	cfg.State.Dir = t.TempDir()
	cfg.ServiceDomain = w.Own.Addr()
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.GitTimeout = 30 * time.Second

	w.Reg = newRecordingRegistry()
	// As cmd/grasp-sync's run does.
	w.Reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		httpapi.NewBuildInfoCollector(version.Get()),
	)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	sc, err := sidecar.New(cfg, sidecar.Deps{Log: log, Registry: w.Reg, Version: "test"})
	if err != nil {
		t.Fatalf("sidecar.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.Sidecar = &runningSidecar{Sidecar: sc, Registry: w.Reg.Registry, cancel: cancel, done: make(chan error, 1)}
	go func() { w.Sidecar.done <- sc.Run(ctx) }()
	t.Cleanup(func() { w.Sidecar.Stop(t) })
	w.HTTP = serveHTTP(t, httpapi.Options{Provider: sc, Gatherer: w.Reg})
	testkit.WaitFor(t, syncTimeout, "sidecar never became ready", sc.Ready)
	waitHas(t, w.Own, append([]*nostr.Event{state}, issues...)...)
	// The own relay stores the released state before its OK reaches the
	// sidecar, which drops the state from purgatory only then.
	testkit.WaitFor(t, syncTimeout, "the released state to leave purgatory", func() bool {
		for _, id := range sc.Status().Purgatory.Identifiers {
			if id.Identifier == d {
				return false
			}
		}
		return true
	})
	testkit.WaitFor(t, syncTimeout, "a failed purgatory attempt for the held state", func() bool {
		return testkit.Metric(t, w.Reg.Registry, "ngit_sync_purgatory_sync_attempts_total", map[string]string{"result": "retry"}) > 0
	})
	return w
}

// URL returns the HTTP surface's base URL.
func (w *observedWorld) URL() string { return "http://" + w.HTTP.Addr() }
