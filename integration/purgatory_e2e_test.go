package integration

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestSidecarPurgatoryEndToEnd: a state event and a PR found on a remote
// relay wait in purgatory until the sidecar fetched their commits from the
// repository's other clone URL into the shared git directory; then the own
// repository's refs match the state, the PR tip sits at refs/nostr/<id>,
// and both events are in the own relay.
func TestSidecarPurgatoryEndToEnd(t *testing.T) {
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	gitDir := t.TempDir()
	alice := signed.NewKey()
	const d = "tool"
	rel := alice.Npub() + "/" + d + ".git"

	// The commits live only on another GRASP server's git endpoint.
	other := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	upstream, err := other.CreateRepo(rel)
	if err != nil {
		t.Fatal(err)
	}
	main, err := upstream.Commit("main", "first", map[string]string{"README": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	feature, err := upstream.Commit("feature", "feature work", map[string]string{"feature.txt": "new"})
	if err != nil {
		t.Fatal(err)
	}
	// Our copy exists but is empty (the relay created it on announcement).
	local, err := gitserver.InitBare(filepath.Join(gitDir, rel))
	if err != nil {
		t.Fatal(err)
	}

	ann := alice.Announcement(d,
		signed.WithRelays(own.URL(), remote.URL()),
		signed.WithClone("http://"+own.Addr()+"/"+rel, other.CloneURL(rel)))
	mustPublish(t, own, ann)
	state := alice.State(d, signed.WithRef("refs/heads/main", main), signed.WithRef("refs/tags/v1", main), signed.WithHEAD("main"))
	pr := alice.PR(alice.RepoAddress(d), feature, signed.WithClone(other.CloneURL(rel)))
	remote.Inject(ann, state, pr)

	cfg := fastConfig(own)
	cfg.GitDir = gitDir
	cfg.ServiceDomain = own.Addr()
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.GitTimeout = 30 * time.Second
	sc := startSidecar(t, cfg)

	waitHas(t, own, state, pr)
	refs, err := local.Refs()
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{
		"refs/heads/main":     main,
		"refs/tags/v1":        main,
		"refs/nostr/" + pr.ID: feature,
	} {
		if refs[ref] != want {
			t.Errorf("%s = %q, want %q (refs %v)", ref, refs[ref], want, refs)
		}
	}
	if head, err := local.HEAD(); err != nil || head != "refs/heads/main" {
		t.Errorf("HEAD = %q, %v", head, err)
	}
	if st := sc.Status(); !st.Purgatory.Enabled || st.Purgatory.Events != 0 {
		t.Errorf("purgatory status %+v, want enabled and empty", st.Purgatory)
	}
}
