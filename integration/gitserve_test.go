package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// TestClonesServed: a repository the sidecar synced from a remote relay
// and another GRASP service's git server is cloned with real git from the
// sidecar's read-only git server (git_http.listen), and the clone holds
// the refs of the latest state event (not those of an older one); a push
// to it fails, even with http.receivepack turned on in the repository.
func TestClonesServed(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote"})
	gitDir := t.TempDir()
	alice := signed.NewKey()
	const d = "served"
	rel := alice.Npub() + "/" + d + ".git"

	other := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	upstream, err := other.CreateRepo(rel)
	if err != nil {
		t.Fatal(err)
	}
	first, err := upstream.Commit("main", "first", map[string]string{"README": "one\n"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := upstream.Commit("main", "second", map[string]string{"README": "two\n"})
	if err != nil {
		t.Fatal(err)
	}
	feature, err := upstream.Commit("feature", "feature work", map[string]string{"feature.txt": "new\n"})
	if err != nil {
		t.Fatal(err)
	}

	ann := alice.Announcement(d,
		signed.WithRelays(own.URL(), remote.URL()),
		signed.WithClone("http://"+own.Addr()+"/"+rel, other.CloneURL(rel)))
	mustPublish(t, own, ann)
	older := alice.State(d, signed.WithRef("refs/heads/main", first), signed.WithHEAD("main"),
		signed.At(time.Now().Add(-time.Hour)))
	latest := alice.State(d, signed.WithRef("refs/heads/main", second), signed.WithRef("refs/heads/feature", feature),
		signed.WithRef("refs/tags/v1", first), signed.WithHEAD("main"))
	remote.Inject(ann, older, latest)

	cfg := fastConfig(own)
	cfg.GitDir = gitDir
	cfg.ServiceDomain = own.Addr()
	cfg.Purgatory.CreateMissingRepos = true
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.GitTimeout = 30 * time.Second
	cfg.GitHTTP.Listen = "127.0.0.1:0"
	sc := startSidecar(t, cfg)
	waitHas(t, own, latest)
	testkit.WaitFor(t, syncTimeout, "git server listening", func() bool { return sc.GitHTTPAddr() != "" })
	url := "http://" + sc.GitHTTPAddr() + "/" + rel

	// The advertisement is the latest state's refs, HEAD included.
	out := mustGit(t, "", "ls-remote", "--symref", url)
	want := map[string]string{"refs/heads/main": second, "refs/heads/feature": feature, "refs/tags/v1": first, "HEAD": second}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 {
			got[f[1]] = f[0]
		} else if len(f) == 3 && f[0] == "ref:" && (f[1] != "refs/heads/main" || f[2] != "HEAD") {
			t.Errorf("HEAD is %s, want refs/heads/main", f[1])
		}
	}
	for ref, oid := range want {
		if got[ref] != oid {
			t.Errorf("ls-remote %s = %q, want %s (latest state)", ref, got[ref], oid)
		}
	}
	for ref := range got {
		if _, ok := want[ref]; !ok && !strings.HasPrefix(ref, "refs/nostr/") {
			t.Errorf("ls-remote has %s, which the latest state does not name", ref)
		}
	}

	// A real clone has them, main checked out at the latest state's tip.
	clone := filepath.Join(t.TempDir(), "clone")
	mustGit(t, "", "clone", "--quiet", url, clone)
	for ref, oid := range map[string]string{
		"HEAD": second, "refs/remotes/origin/main": second, "refs/remotes/origin/feature": feature, "refs/tags/v1": first,
	} {
		if got := strings.TrimSpace(mustGit(t, clone, "rev-parse", ref)); got != oid {
			t.Errorf("clone: %s = %s, want %s", ref, got, oid)
		}
	}
	if branch := strings.TrimSpace(mustGit(t, clone, "symbolic-ref", "HEAD")); branch != "refs/heads/main" {
		t.Errorf("clone checked out %s, want refs/heads/main", branch)
	}

	// A push fails, even where the repository itself would allow one.
	served := filepath.Join(gitDir, rel)
	mustGit(t, served, "config", "http.receivepack", "true")
	mustGit(t, clone, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "--allow-empty", "-m", "pushed")
	cmd := gitCommand(clone, "push", "origin", "HEAD:refs/heads/main", "HEAD:refs/heads/pushed")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("git push succeeded:\n%s", out)
	} else if !strings.Contains(string(out), "403") {
		t.Errorf("git push failed without a 403:\n%s", out)
	}
	refs, err := gitserver.OpenRepo(served).Refs()
	if err != nil {
		t.Fatal(err)
	}
	if refs["refs/heads/main"] != second || refs["refs/heads/pushed"] != "" {
		t.Errorf("the served repository changed: %v", refs)
	}
}

// gitCommand is git in dir with git's clean environment (no user or
// system config, no prompts).
func gitCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitx.CleanEnv()
	return cmd
}

func mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitCommand(dir, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
