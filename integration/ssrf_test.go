package integration

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

const refusedMsg = "destination refused by the outbound address policy"

// ssrfResolver maps test host names to addresses; unknown names fail.
type ssrfResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	asked   map[string]int
}

func (r *ssrfResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked[host]++
	if a, ok := r.answers[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *ssrfResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[host]
}

// acceptCounterLn is a TCP listener that counts connections and never
// answers: a destination that must never be reached.
type acceptCounterLn struct {
	ln       net.Listener
	accepted atomic.Int64
}

func listenCounting(t *testing.T, addr string) *acceptCounterLn {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptCounterLn{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return a
}

func (a *acceptCounterLn) port() string {
	_, p, _ := net.SplitHostPort(a.ln.Addr().String())
	return p
}

// guardedDial is the policy's final connect in these tests: it fails the
// test for any address but the allowed ones, so nothing leaves loopback
// even if the policy were broken.
func guardedDial(t *testing.T, allowed ...string) (func(ctx context.Context, network, address string) (net.Conn, error), *atomic.Int64) {
	var n atomic.Int64
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		n.Add(1)
		host, _, err := net.SplitHostPort(address)
		ok := false
		for _, a := range allowed {
			ok = ok || (err == nil && host == a)
		}
		if !ok {
			t.Errorf("the policy dialled %s", address)
			return nil, fmt.Errorf("test: refusing to dial %s", address)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, address)
	}, &n
}

// countingGit records every git command the purgatory runs.
type countingGit struct {
	next gitx.Runner
	mu   sync.Mutex
	cmds [][]string
}

func (g *countingGit) Run(ctx context.Context, c gitx.Cmd) (gitx.Result, error) {
	g.mu.Lock()
	g.cmds = append(g.cmds, append([]string{c.Dir}, c.Args...))
	g.mu.Unlock()
	return g.next.Run(ctx, c)
}

func (g *countingGit) commands() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]string(nil), g.cmds...)
}

var _ gitx.Runner = (*countingGit)(nil)

// startPolicySidecar runs a sidecar with test seams for the address policy
// and git, logging policy refusals to the returned observer.
func startPolicySidecar(t *testing.T, cfg *config.Config, d sidecar.Deps) (*runningSidecar, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	d.Log = zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(ssrfLogLevel())).Core()))
	reg := prometheus.NewRegistry()
	d.Registry, d.Version = reg, "test"
	sc, err := sidecar.New(cfg, d)
	if err != nil {
		t.Fatalf("sidecar.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningSidecar{Sidecar: sc, Registry: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- sc.Run(ctx) }()
	t.Cleanup(func() { rs.Stop(t) })
	testkit.WaitFor(t, syncTimeout, "sidecar never became ready", sc.Ready)
	return rs, logs
}

// refusals counts the policy's log entries per destination.
func refusals(logs *observer.ObservedLogs) map[string][]string {
	out := map[string][]string{}
	for _, e := range logs.FilterMessage(refusedMsg).All() {
		m := e.ContextMap()
		dest, _ := m["destination"].(string)
		reason, _ := m["reason"].(string)
		out[dest] = append(out[dest], reason)
	}
	return out
}

// TestSSRFRelayURLsRefusedBeforeDial: relay URLs from an announcement that
// point at loopback, metadata, private or unique-local addresses (directly
// or through a name) cause no connection; each is logged once with its
// reason; an allowed destination behind a name is still synced.
func TestSSRFRelayURLsRefusedBeforeDial(t *testing.T) {
	own := ownRelay(t)
	// The only remote the operator allows: 127.0.0.2, reached by name.
	good := harness.Start(t, harness.RelayOptions{Name: "good", Addr: "127.0.0.2:0"})
	_, goodPort, _ := net.SplitHostPort(good.Addr())
	target := listenCounting(t, "127.0.0.1:0") // must never be reached
	res := &ssrfResolver{asked: map[string]int{}, answers: map[string][]netip.Addr{
		"good.test":     {netip.MustParseAddr("127.0.0.2")},
		"internal.test": {netip.MustParseAddr("10.0.0.5")},
		"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
		"meta.test":     {netip.MustParseAddr("169.254.169.254")},
	}}
	dial, dials := guardedDial(t, "127.0.0.2")

	alice := signed.NewKey()
	hostile := map[string]string{ // URL as announced → refusal reason
		"ws://127.0.0.1:" + target.port():     "loopback",
		"ws://localhost:" + target.port():     "loopback",
		"ws://[::1]:" + target.port():         "loopback",
		"ws://169.254.169.254/":               "metadata",
		"ws://[fd00:ec2::254]/":               "metadata",
		"ws://100.100.100.200/":               "metadata",
		"ws://10.0.0.1/":                      "private",
		"ws://[fd12::1]/":                     "private",
		"ws://[::ffff:192.168.1.1]/":          "private",
		"ws://0.0.0.0:" + target.port():       "unspecified",
		"ws://internal.test:" + target.port(): "private",  // refused at dial time
		"ws://rebind.test:" + target.port():   "loopback", // refused at dial time
		"ws://meta.test/":                     "metadata", // refused at dial time
	}
	relays := []string{own.URL(), "ws://good.test:" + goodPort}
	for u := range hostile {
		relays = append(relays, u)
	}
	// Relays are also derived from GRASP-style clone URLs.
	repo := alice.Announcement("ssrf", signed.WithRelays(relays...), signed.WithClone(
		"http://"+own.Addr()+"/"+alice.Npub()+"/ssrf.git",
		"http://192.168.7.7/"+alice.Npub()+"/ssrf.git"))
	issue := alice.Issue(alice.RepoAddress("ssrf"), "synced through the allowed relay")
	good.Inject(repo, issue)
	own.Inject(repo)

	cfg := fastConfig(own)
	cfg.Dial.Allow = []string{"127.0.0.2/32"}
	cfg.Limits.MaxRelaysPerAnnouncement = 50
	sc, logs := startPolicySidecar(t, cfg, sidecar.Deps{Resolver: res, PolicyDial: dial})

	waitHas(t, own, issue)
	// Names resolving to refused addresses are retried with backoff; wait
	// for several refusals so that "logged once" means something.
	testkit.WaitFor(t, syncTimeout, "refusals were not repeated", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_dial_refused_total", map[string]string{"kind": "relay", "reason": "loopback"}) >= 8
	})

	got := refusals(logs)
	want := map[string]string{"ws://192.168.7.7": "private"} // derived from a clone URL
	for u, reason := range hostile {
		dest, err := relay.NormalizeURL(u)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(u, ".test") {
			dest = strings.Split(strings.TrimPrefix(u, "ws://"), ":")[0] // refused at dial time: the host
			dest = strings.TrimSuffix(dest, "/")
		}
		want[dest] = reason
	}
	for dest, reason := range want {
		if r := got[dest]; len(r) != 1 || r[0] != reason {
			t.Errorf("%s: logged %v, want once with reason %s", dest, r, reason)
		}
	}
	for dest, r := range got {
		if _, ok := want[dest]; !ok {
			t.Errorf("unexpected refusal of %s: %v", dest, r)
		}
	}
	if n := target.accepted.Load(); n != 0 {
		t.Errorf("the loopback target was connected to %d times", n)
	}
	if dials.Load() == 0 {
		t.Error("the allowed relay was never dialled through the policy")
	}
	// Names are resolved by the policy at dial time only: literal
	// addresses and localhost never reach the resolver.
	res.mu.Lock()
	for host := range res.asked {
		if !strings.HasSuffix(host, ".test") {
			t.Errorf("resolver asked for %q", host)
		}
	}
	res.mu.Unlock()
}

// TestSSRFCloneURLsAndIdentifiers: clone URLs that would make git run a
// command, read local files or reach private addresses start no git
// process, each is logged once with its reason; identifiers that are not
// safe path components are refused before any filesystem access.
func TestSSRFCloneURLsAndIdentifiers(t *testing.T) {
	own := ownRelay(t)
	gitDir := t.TempDir()
	res := &ssrfResolver{asked: map[string]int{}, answers: map[string][]netip.Addr{
		"internal.test": {netip.MustParseAddr("10.0.0.5")},
	}}
	dial, _ := guardedDial(t) // no remote relay may be dialled at all
	git := &countingGit{next: gitx.NewExec(30 * time.Second)}
	pwned := filepath.Join(t.TempDir(), "pwned")

	alice := signed.NewKey()
	hostile := map[string]string{ // clone URL → refusal reason
		"ext::sh -c touch% " + pwned:    "url",
		"ext::sh":                       "scheme",
		"--upload-pack=touch " + pwned:  "url",
		"file:///etc":                   "scheme",
		"ssh://git@10.0.0.1/x.git":      "scheme",
		"http://10.0.0.1/x.git":         "private",
		"https://169.254.169.254/x.git": "metadata",
		"git://[::1]/x.git":             "loopback",
		"http://localhost/x.git":        "loopback",
		"http://internal.test/x.git":    "private", // refused when git would run
		"http://127.0.0.1:1/x.git":      "loopback",
	}
	var clones []string
	for u := range hostile {
		clones = append(clones, u)
	}
	commit := signed.FakeCommit("ssrf")
	repo := alice.Announcement("clones", signed.WithRelays(own.URL()), signed.WithClone(clones...))
	state := alice.State("clones", signed.WithRef("refs/heads/main", commit), signed.WithHEAD("main"))
	evs := []*nostr.Event{repo, state}
	badIDs := []string{"../x", "a/b", "-x", strings.Repeat("a", gitx.MaxIdentifierLen+1), "r\xffepo", "..", ".git"}
	for _, d := range badIDs {
		evs = append(evs,
			alice.Announcement(d, signed.WithRelays(own.URL()), signed.WithClone("https://git.example.org/x.git")),
			alice.State(d, signed.WithRef("refs/heads/main", commit), signed.WithHEAD("main")))
	}
	own.Inject(evs...)

	cfg := fastConfig(own)
	cfg.Dial.Allow = []string{} // nothing private is allowed
	cfg.GitDir = gitDir
	cfg.Purgatory.CreateMissingRepos = true
	cfg.Purgatory.OwnRelayDelay = 50 * time.Millisecond
	cfg.Purgatory.SyncedDelay = 50 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.Backoff = []time.Duration{100 * time.Millisecond}
	sc, logs := startPolicySidecar(t, cfg, sidecar.Deps{Resolver: res, PolicyDial: dial, Git: git})

	// The git guard refuses the private clone URLs each time the purgatory
	// tries them (the announcement screening counted each once more).
	testkit.WaitFor(t, syncTimeout, "the purgatory did not try the private clone URLs repeatedly", func() bool {
		return testkit.Metric(t, sc.Registry, "ngit_sync_dial_refused_total", map[string]string{"kind": "clone", "reason": "private"}) >= 6 &&
			res.count("internal.test") >= 2
	})

	got := refusals(logs)
	for u, reason := range hostile {
		dest := u
		if strings.Contains(u, "internal.test") {
			if r := got[u]; len(r) != 0 {
				t.Errorf("%s refused before resolution: %v", u, r)
			}
			dest = "internal.test"
		}
		if r := got[dest]; len(r) != 1 || r[0] != reason {
			t.Errorf("%s: logged %v, want once with reason %s", dest, r, reason)
		}
	}
	for _, c := range git.commands() {
		line := strings.Join(c, " ")
		for u := range hostile {
			if strings.Contains(line, u) {
				t.Errorf("git ran with a hostile clone URL: %s", line)
			}
		}
		switch c[1] {
		case "fetch", "ls-remote", "clone", "pull", "push", "archive":
			t.Errorf("a network git command ran: %s", line)
		}
		for _, d := range badIDs[:5] {
			if strings.Contains(line, "/"+d+".git") {
				t.Errorf("git ran on a refused identifier: %s", line)
			}
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a clone URL ran a command")
	}
	// Only the valid identifier's repository exists in the git directory.
	var paths []string
	_ = filepath.WalkDir(gitDir, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(gitDir, p)
		if strings.Count(rel, string(filepath.Separator)) <= 1 && rel != "." {
			paths = append(paths, rel)
		}
		return nil
	})
	npub := alice.Npub()
	for _, p := range paths {
		if p != npub && p != filepath.Join(npub, "clones.git") {
			t.Errorf("unexpected path in the git directory: %q", p)
		}
	}
	if len(git.commands()) == 0 {
		t.Error("the purgatory ran no git command at all: the valid repository was not handled")
	}
	if n := res.count("internal.test"); n == 0 {
		t.Error("internal.test was never resolved: the git guard did not check it")
	}
}

func ssrfLogLevel() zapcore.Level {
	if os.Getenv("GRASP_SYNC_TEST_DEBUG") != "" {
		return zap.DebugLevel
	}
	return zap.WarnLevel
}
