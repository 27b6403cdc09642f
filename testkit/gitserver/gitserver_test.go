package gitserver_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
)

func TestServeCloneAndCount(t *testing.T) {
	srv := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	repo, err := srv.CreateRepo("npub1x/repo.git")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := repo.Commit("main", "first", map[string]string{"README": "hi\n"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := repo.Commit("main", "second", nil)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := repo.AnnotatedTag("v1", c1, "one")
	if err != nil {
		t.Fatal(err)
	}
	refs, err := repo.Refs()
	if err != nil {
		t.Fatal(err)
	}
	if refs["refs/heads/main"] != c2 || refs["refs/tags/v1"] != tag || len(refs) != 2 {
		t.Fatalf("refs = %v", refs)
	}
	if head, err := repo.HEAD(); err != nil || head != "refs/heads/main" {
		t.Fatalf("HEAD = %q, %v", head, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dst := filepath.Join(t.TempDir(), "clone")
	out, err := exec.CommandContext(ctx, "git", "-c", "protocol.version=2", "clone", "--quiet", "--bare", srv.CloneURL("npub1x/repo.git"), dst).CombinedOutput()
	if err != nil {
		t.Fatalf("clone: %v: %s", err, out)
	}
	if !gitserver.OpenRepo(dst).HasObject(c1) {
		t.Fatal("clone lacks the first commit")
	}
	st := srv.Stats()
	if st.Fetches != 1 || st.Requests < 2 || st.InFlight != 0 || st.MaxInFlight < 1 {
		t.Fatalf("stats = %+v", st)
	}
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") || srv.Host() != strings.TrimPrefix(srv.URL, "http://") {
		t.Fatalf("URL %q host %q", srv.URL, srv.Host())
	}
}

func TestMaxFetchesInWindow(t *testing.T) {
	srv := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	if _, err := srv.CreateRepo("r.git"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 3; i++ {
		if out, err := exec.CommandContext(ctx, "git", "ls-remote", srv.CloneURL("r.git")).CombinedOutput(); err != nil {
			t.Fatalf("ls-remote: %v: %s", err, out)
		}
	}
	times := srv.FetchTimes()
	if len(times) != 3 {
		t.Fatalf("fetch times = %v", times)
	}
	if got := srv.MaxFetchesInWindow(time.Hour); got != 3 {
		t.Errorf("MaxFetchesInWindow(1h) = %d, want 3", got)
	}
	if got := srv.MaxFetchesInWindow(time.Nanosecond); got != 1 {
		t.Errorf("MaxFetchesInWindow(1ns) = %d, want 1", got)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := gitserver.New(filepath.Join(t.TempDir(), "missing"), gitserver.Options{}); err == nil {
		t.Error("missing root accepted")
	}
	if _, err := gitserver.New(t.TempDir(), gitserver.Options{GitBinary: "no-such-git-binary"}); err == nil {
		t.Error("missing git binary accepted")
	}
}
