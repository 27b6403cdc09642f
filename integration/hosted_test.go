package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// recordingGit runs git and remembers every command's arguments.
type recordingGit struct {
	inner gitx.Runner
	mu    sync.Mutex
	cmds  []string
	args  [][]string
}

var _ gitx.Runner = (*recordingGit)(nil)

func (g *recordingGit) Run(ctx context.Context, c gitx.Cmd) (gitx.Result, error) {
	g.mu.Lock()
	g.cmds = append(g.cmds, strings.Join(append([]string{c.Dir}, c.Args...), " "))
	g.args = append(g.args, append([]string(nil), c.Args...))
	g.mu.Unlock()
	return g.inner.Run(ctx, c)
}

// commandLines returns every command's arguments so far.
func (g *recordingGit) commandLines() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]string(nil), g.args...)
}

func (g *recordingGit) mentioning(s string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.cmds {
		if strings.Contains(c, s) {
			out = append(out, c)
		}
	}
	return out
}

// observedLogger logs warnings to the test and records every entry.
func observedLogger(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	tl := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	return zap.New(zapcore.NewTee(tl.Core(), core)), logs
}

// warningsMentioning returns the WARN and ERROR entries whose message or
// fields contain s.
func warningsMentioning(logs *observer.ObservedLogs, s string) []string {
	var out []string
	for _, e := range logs.All() {
		if e.Level < zapcore.WarnLevel {
			continue
		}
		line := e.Message + fmt.Sprint(e.ContextMap())
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// TestForeignRepositoriesNeverReachPurgatory: a remote relay holds the
// hosted repository (announcement listing the service, state, PR) and 300
// foreign ones (announcement, state, PR; hosted elsewhere). With a git
// directory, the purgatory never holds more than the hosted repository's
// two git-bound events, no git command names a foreign identifier, and no
// warning mentions one.
func TestForeignRepositoriesNeverReachPurgatory(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	gitDir := t.TempDir()
	alice := signed.NewKey()
	const d = "hosted-tool"
	rel := alice.Npub() + "/" + d + ".git"
	other := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	upstream, err := other.CreateRepo(rel)
	if err != nil {
		t.Fatal(err)
	}
	main, err := upstream.Commit("main", "first", map[string]string{"README": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	feature, err := upstream.Commit("feature", "feature work", map[string]string{"f.txt": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gitserver.InitBare(filepath.Join(gitDir, rel)); err != nil {
		t.Fatal(err)
	}
	ann := alice.Announcement(d,
		signed.WithRelays(own.URL(), remote.URL()),
		signed.WithClone("http://"+own.Addr()+"/"+rel, other.CloneURL(rel)))
	mustPublish(t, own, ann)
	state := alice.State(d, signed.WithRef("refs/heads/main", main), signed.WithHEAD("main"))
	pr := alice.PR(alice.RepoAddress(d), feature, signed.WithClone(other.CloneURL(rel)))
	remote.Inject(ann, state, pr)

	n := scaled(300, 100)
	var foreignStates []*nostr.Event
	for i := range n {
		k := signed.NewKey()
		fd := fmt.Sprintf("foreign-%03d", i)
		frel := k.Npub() + "/" + fd + ".git"
		fann := k.Announcement(fd, signed.WithRelays(remote.URL()), signed.WithClone(other.CloneURL(frel)))
		fst := k.State(fd, signed.WithRef("refs/heads/main", fmt.Sprintf("%040x", i+1)), signed.WithHEAD("main"))
		fpr := k.PR(k.RepoAddress(fd), fmt.Sprintf("%040x", i+1), signed.WithClone(other.CloneURL(frel)))
		remote.Inject(fann, fst, fpr)
		foreignStates = append(foreignStates, fst)
	}

	cfg := fastConfig(own)
	cfg.GitDir = gitDir
	cfg.ServiceDomain = own.Addr()
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.Backoff = []time.Duration{100 * time.Millisecond}
	cfg.Purgatory.GitTimeout = 30 * time.Second
	git := &recordingGit{inner: gitx.NewExec(30 * time.Second)}
	log, logs := observedLogger(t)

	// The purgatory's size, sampled from the start.
	var maxHeld atomic.Int64
	sc := startSidecarDeps(t, cfg, sidecar.Deps{Log: log, Git: git})
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if held := int64(sc.Status().Purgatory.Events); held > maxHeld.Load() {
				maxHeld.Store(held)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()

	waitHas(t, own, state, pr)
	// Every foreign state was received and set aside.
	testkit.WaitFor(t, syncTimeout, "foreign states in the RejectedIndex", func() bool {
		return sc.Status().Rejected.Cold >= n
	})
	// Give the purgatory loop a few rounds to touch anything it holds.
	time.Sleep(10 * cfg.Purgatory.Loop)
	close(stop)
	<-sampled

	if got := maxHeld.Load(); got > 2 {
		t.Errorf("purgatory held up to %d events, want at most the hosted repository's 2", got)
	}
	ever := testkit.Metric(t, sc.Registry, "ngit_sync_purgatory_events_released_total", nil) +
		testkit.Metric(t, sc.Registry, "ngit_sync_purgatory_events_expired_total", nil) +
		testkit.Metric(t, sc.Registry, "ngit_sync_purgatory_events", nil)
	if ever != 2 {
		t.Errorf("purgatory took %v events in all, want 2", ever)
	}
	if cmds := git.mentioning("foreign-"); len(cmds) > 0 {
		t.Errorf("%d git commands for foreign repositories, first: %s", len(cmds), cmds[0])
	}
	if ws := warningsMentioning(logs, "foreign-"); len(ws) > 0 {
		t.Errorf("%d warnings about foreign repositories, first: %s", len(ws), ws[0])
	}
	for _, st := range foreignStates {
		if own.Has(st.ID) {
			t.Fatalf("foreign state %s published into the own relay", st.ID)
		}
	}
	if got := sc.Status().Repositories; got != 1 {
		t.Errorf("repositories synced = %d, want 1", got)
	}
}

// TestAcceptEverythingOwnRelaySyncsOnlyHosted: an own relay without policy
// (a plain strfry) and a bootstrap relay carrying 200 repositories, one of
// which lists the service. Only that repository is synced (its issue
// arrives, no other's does); with sync.host_all every repository is.
func TestAcceptEverythingOwnRelaySyncsOnlyHosted(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("host_all=%v", archive), func(t *testing.T) {
			own := harness.Start(t, harness.RelayOptions{Name: "own"}) // accepts everything
			boot := harness.Start(t, harness.RelayOptions{Name: "bootstrap"})
			n := scaled(200, 60)
			hosted := signed.NewKey()
			hostedIssue := hosted.Issue(hosted.RepoAddress("listed"), "hosted issue")
			boot.Inject(repoFor(hosted, "listed", own, boot), hostedIssue)
			var foreignIssues []*nostr.Event
			for i := range n - 1 {
				k := signed.NewKey()
				fd := fmt.Sprintf("elsewhere-%03d", i)
				fann := k.Announcement(fd, signed.WithRelays(boot.URL(), "wss://relay.example.org"),
					signed.WithClone("https://git.example.org/"+k.Npub()+"/"+fd+".git"))
				issue := k.Issue(k.RepoAddress(fd), "foreign issue")
				boot.Inject(fann, issue)
				foreignIssues = append(foreignIssues, issue)
			}

			cfg := fastConfig(own)
			cfg.ServiceDomain = own.Addr()
			cfg.BootstrapRelays = []string{boot.URL()}
			cfg.Sync.HostAll = archive
			sc := startSidecar(t, cfg)

			waitHas(t, own, hostedIssue)
			if archive {
				waitHas(t, own, foreignIssues...)
				if got := sc.Status().Repositories; got != n {
					t.Errorf("repositories synced = %d, want %d", got, n)
				}
				return
			}
			// Every announcement reached the own relay (layer 1), which
			// accepted them all; the sidecar still syncs one repository.
			testkit.WaitFor(t, syncTimeout, "announcements on the own relay", func() bool {
				return own.Count(nostr.Filter{Kinds: []int{signed.KindAnnouncement}}) >= n
			})
			testkit.WaitFor(t, syncTimeout, "bootstrap relay synced", func() bool {
				for _, r := range sc.Status().Relays {
					if r.URL == boot.URL() {
						return r.State == "connected" && r.PendingBatches == 0
					}
				}
				return false
			})
			if got := sc.Status().Repositories; got != 1 {
				t.Errorf("repositories synced = %d, want 1", got)
			}
			for _, ev := range foreignIssues {
				if own.Has(ev.ID) {
					t.Fatalf("issue %s of a repository not listing the service was synced", ev.ID)
				}
			}
		})
	}
}

// TestBootstrapRelayServesDiscoveryOnly: a bootstrap relay is asked for
// layer 1 (announcements, states) only; a repository's other events are
// asked of it when the repository lists it, or with
// sync.bootstrap_all_layers.
func TestBootstrapRelayServesDiscoveryOnly(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("bootstrap_all_layers=%v", all), func(t *testing.T) {
			own := ownRelay(t)
			boot := harness.Start(t, harness.RelayOptions{Name: "bootstrap"})
			k := signed.NewKey()
			ann := repoFor(k, "quiet", own) // lists the own relay only
			issue := k.Issue(k.RepoAddress("quiet"), "asked of the bootstrap relay?")
			listing := signed.NewKey()
			listingAnn := repoFor(listing, "loud", own, boot)
			listingIssue := listing.Issue(listing.RepoAddress("loud"), "listed relay")
			boot.Inject(ann, issue, listingAnn, listingIssue)

			cfg := fastConfig(own)
			cfg.ServiceDomain = own.Addr()
			cfg.BootstrapRelays = []string{boot.URL()}
			cfg.Sync.BootstrapAllLayers = all
			sc := startSidecar(t, cfg)

			waitHas(t, own, ann, listingAnn, listingIssue)
			if all {
				waitHas(t, own, issue)
				return
			}
			testkit.WaitFor(t, syncTimeout, "bootstrap relay synced", func() bool {
				for _, r := range sc.Status().Relays {
					if r.URL == boot.URL() {
						return r.State == "connected" && r.PendingBatches == 0 && r.ReposConfirmed == 1
					}
				}
				return false
			})
			if own.Has(issue.ID) {
				t.Fatal("a repository not listing the bootstrap relay had its issue asked of it")
			}
		})
	}
}

// TestTwoHopDiscoveryTime: an announcement found on a bootstrap relay lists
// a second relay holding the repository's history (issues, then comments on
// them): two discovery hops through the own relay's self-subscription. With
// the production batch settings (5 s window, 250 ms quiet period) the
// sidecar's time from ready to holding everything is reported, beside the
// window alone (quiet period off). No wall-clock assertion.
func TestTwoHopDiscoveryTime(t *testing.T) {
	issues, comments := scaled(500, 100), scaled(1500, 300)
	for _, v := range []struct {
		name  string
		quiet time.Duration
	}{{"quiet=250ms", 250 * time.Millisecond}, {"quiet=off", 0}} {
		t.Run(v.name, func(t *testing.T) {
			own := ownRelay(t)
			boot := harness.Start(t, harness.RelayOptions{Name: "bootstrap"})
			history := harness.Start(t, harness.RelayOptions{Name: "history"})
			k := signed.NewKey()
			ann := repoFor(k, "twohop", own, history)
			boot.Inject(ann)
			var all []*nostr.Event
			for i := range issues {
				issue := k.Issue(k.RepoAddress("twohop"), fmt.Sprintf("issue %d", i))
				all = append(all, issue)
				for range comments / issues {
					all = append(all, k.Comment(issue, nil))
				}
			}
			history.Inject(ann)
			history.Inject(all...)

			cfg := fastConfig(own)
			cfg.ServiceDomain = own.Addr()
			cfg.BootstrapRelays = []string{boot.URL()}
			cfg.Sync.BatchWindow = 5 * time.Second
			cfg.Sync.BatchQuiet = v.quiet
			start := time.Now()
			startSidecar(t, cfg)
			ready := time.Now()
			waitHas(t, own, append(all, ann)...)
			t.Logf("two-hop discovery of %d events (%s, batch_window 5s): %v from ready (%v from start)",
				len(all)+1, v.name, time.Since(ready).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestSelfBatchAppliedAtBatchMax: announcements stored on the own relay
// faster than batch_quiet lets a self batch end (a first sync's echoes)
// are applied each time the batch holds sync.batch_max events, not at the
// end of batch_window (an hour here; root_wait too, so nothing else
// applies them).
func TestSelfBatchAppliedAtBatchMax(t *testing.T) {
	own := ownRelay(t)
	cfg := fastConfig(own)
	cfg.Sync.BatchWindow, cfg.Sync.BatchQuiet, cfg.Sync.RootWait, cfg.Sync.BatchMax = time.Hour, 0, time.Hour, 40
	sc := startSidecar(t, cfg)
	var anns []*nostr.Event
	for i := range 100 {
		anns = append(anns, repoFor(signed.NewKey(), fmt.Sprintf("burst-%d", i), own))
	}
	mustPublish(t, own, anns...)
	testkit.WaitFor(t, syncTimeout, "two batches of batch_max announcements applied", func() bool { return sc.Status().Repositories >= 80 })
	if got := sc.Status().Repositories; got != 80 {
		t.Fatalf("%d repositories known, want 80: two batches of 40, the last 20 waiting for batch_window", got)
	}
}
