package integration

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
)

// TestPurgatoryPRFromNostrFork: a PR whose only clone URL is
// nostr://<npub>/<relay-hint>/<identifier>, naming the contributor's fork,
// is released: the URL is resolved through the fork owner's announcement
// on the hinted relay to the fork's git server, and no git command line
// ever carries the nostr:// URL.
func TestPurgatoryPRFromNostrFork(t *testing.T) {
	own := startPgOwnRelay(t)
	hint := harness.Start(t, harness.RelayOptions{Name: "hint"})
	const d, forkD = "app", "app-fork"
	owner, contributor := newPgKey(t), newPgKey(t)
	forkSrv := pgGitServer(t, 0)
	forkRepo, err := forkSrv.CreateRepo(contributor.rel(t, forkD))
	if err != nil {
		t.Fatal(err)
	}
	tip := mustCommit(t, forkRepo, "feature", "work in the fork")
	hint.Inject(pgAnnouncement(t, contributor, forkD, []string{forkSrv.CloneURL(contributor.rel(t, forkD))}))

	resolver := nostrResolver(nil)
	nostrURL := "nostr://" + contributor.npub(t) + "/" + url.PathEscape(hint.URL()) + "/" + forkD
	releaseNostrForkPR(t, own, owner, contributor, d, nostrURL, forkSrv.CloneURL(contributor.rel(t, forkD)), tip, resolver.Resolve)
}

// nostrResolver is the sidecar's nostr:// resolver for these tests
// (relays dialled with the sidecar's options), with nip05 when set.
func nostrResolver(nip05 func(context.Context, string) (string, []string, error)) *purgatory.NostrResolver {
	ropts := sidecar.RelayOptions(config.Default())
	return &purgatory.NostrResolver{
		Dial:    func(ctx context.Context, u string) (*relay.Conn, error) { return relay.Dial(ctx, u, ropts) },
		Timeout: 5 * time.Second, MaxRelays: 4, TTL: time.Minute, NIP05: nip05,
	}
}

// releaseNostrForkPR runs a purgatory resolving nostr:// URLs with resolve,
// hosting owner's repository d, and adds a PR by contributor whose only
// clone URL is nostrURL (naming the contributor's fork at forkCloneURL).
// The PR must be released with refs/nostr/<id> at tip and published, the
// fork fetched from, and no git command line may carry a nostr:// URL.
func releaseNostrForkPR(t *testing.T, own *pgOwnRelay, owner, contributor pgKey, d, nostrURL, forkCloneURL, tip string,
	resolve func(context.Context, nip34.NostrURL) ([]string, error)) {
	t.Helper()
	git := &recordingGit{inner: gitx.NewExec(20 * time.Second)}
	cfg := purgatory.DefaultConfig()
	cfg.GitDir = t.TempDir()
	cfg.OwnDomain = "own.example:443"
	cfg.AllowPrivateAddresses = true
	cfg.SyncedDelay = 50 * time.Millisecond
	cfg.Loop = 50 * time.Millisecond
	p, err := purgatory.New(cfg, purgatory.Options{Publisher: wsPublisher{own.URL}, Logger: zap.NewNop(),
		Registerer: prometheus.NewRegistry(), Git: git, ResolveNostr: resolve})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	env := &pgEnv{P: p, Cfg: cfg, GitDir: cfg.GitDir, Own: own}
	local := env.localRepo(t, owner, d)
	p.AddAnnouncement(pgAnnouncement(t, owner, d, []string{"https://own.example:443/" + owner.rel(t, d)}))

	pr := pgPR(t, contributor, purgatory.KindPR, owner, d, tip, nostrURL)
	if err := p.Add(pr, false); err != nil {
		t.Fatal(err)
	}
	pgWait(t, "PR released", func() bool { return !p.Has(pr.ID) })
	if got := mustRefs(t, local)["refs/nostr/"+pr.ID]; got != tip {
		t.Fatalf("refs/nostr/%s = %q, want %s", pr.ID, got, tip)
	}
	if _, ok := own.has(pr.ID); !ok {
		t.Fatal("PR not published")
	}
	fetched := false
	for _, args := range git.commandLines() {
		line := strings.Join(args, " ")
		if strings.Contains(strings.ToLower(line), "nostr://") {
			t.Fatalf("a nostr:// URL reached git: %s", line)
		}
		fetched = fetched || strings.Contains(line, forkCloneURL)
	}
	if !fetched {
		t.Fatal("the fork's clone URL was never fetched from")
	}
}
