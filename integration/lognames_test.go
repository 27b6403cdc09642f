package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestLogNamesOnceAndPurgatoryPerEventAtDebug runs a state event through
// the purgatory of a whole sidecar: every component's logger is named
// once (no "purgatory.purgatory", "health.health", "publisher.publish"),
// and the per-event "released" line is DEBUG.
func TestLogNamesOnceAndPurgatoryPerEventAtDebug(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	gitDir := t.TempDir()
	alice := signed.NewKey()
	const d = "named-once"
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
	if _, err := gitserver.InitBare(filepath.Join(gitDir, rel)); err != nil {
		t.Fatal(err)
	}
	ann := alice.Announcement(d,
		signed.WithRelays(own.URL(), remote.URL()),
		signed.WithClone("http://"+own.Addr()+"/"+rel, other.CloneURL(rel)))
	mustPublish(t, own, ann)
	state := alice.State(d, signed.WithRef("refs/heads/main", main), signed.WithHEAD("main"))
	remote.Inject(ann, state)

	cfg := fastConfig(own)
	cfg.GitDir = gitDir
	cfg.ServiceDomain = own.Addr()
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.GitTimeout = 30 * time.Second
	log, logs := observedLogger(t)
	startSidecarDeps(t, cfg, sidecar.Deps{Log: log, Git: gitx.NewExec(30 * time.Second)})
	waitHas(t, own, state)
	// The own relay stores the state before its OK reaches the purgatory,
	// which logs the release only then.
	testkit.WaitFor(t, syncTimeout, "the release logged", func() bool { return logs.FilterMessage("released").Len() > 0 })

	names := map[string]bool{}
	for _, e := range logs.All() {
		names[e.LoggerName] = true
		parts := strings.Split(e.LoggerName, ".")
		for i := 1; i < len(parts); i++ {
			if parts[i] == parts[i-1] || strings.HasPrefix(parts[i-1], parts[i]) {
				t.Errorf("logger %q names its component twice (%q)", e.LoggerName, e.Message)
			}
		}
	}
	for _, want := range []string{"purgatory", "publisher"} {
		if !names[want] {
			t.Errorf("no line from logger %q; loggers: %v", want, names)
		}
	}
	rel2 := logs.FilterMessage("released").All()
	if len(rel2) == 0 {
		t.Fatalf("no per-event released line; loggers %v", names)
	}
	for _, e := range rel2 {
		if e.Level != zapcore.DebugLevel || e.LoggerName != "purgatory" {
			t.Errorf("per-event released at %v from %q, want DEBUG from purgatory", e.Level, e.LoggerName)
		}
	}
}
