package demo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// gitWorld is the git side of the demo: another GRASP service's git server
// holding each repository's commits, and the own service's git directory
// that the sidecar fetches them into (purgatory). Nil when git is missing.
type gitWorld struct {
	server *gitserver.Server
	// dir is the own git directory (<dir>/<npub>/<identifier>.git).
	dir     string
	tmp     string
	watched *watchedState
}

// watchedState is the state event the demo follows through purgatory.
type watchedState struct {
	repo   string // <npub>/<identifier>.git
	commit string
	event  *nostr.Event
}

// repoCommits are the real commits one repository's events point at.
type repoCommits struct {
	main, pr, prUpdate string
	clone              string
}

// startGit starts the git server in a temporary directory, or returns nil
// when git is not installed (the demo then runs without purgatory).
func startGit() (*gitWorld, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil
	}
	tmp, err := os.MkdirTemp("", "grasp-sync-demo-")
	if err != nil {
		return nil, err
	}
	g := &gitWorld{tmp: tmp, dir: filepath.Join(tmp, "own-git")}
	upstream := filepath.Join(tmp, "other-grasp-service")
	for _, d := range []string{g.dir, upstream} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			g.close()
			return nil, err
		}
	}
	if g.server, err = gitserver.New(upstream, gitserver.Options{}); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *gitWorld) close() {
	if g == nil {
		return
	}
	if g.server != nil {
		g.server.Close()
	}
	_ = os.RemoveAll(g.tmp)
}

// commits creates repository d of owner on the git server with a main
// branch and a feature branch of two commits (a PR and its update).
func (g *gitWorld) commits(owner *signed.Key, d string) (repoCommits, error) {
	rel := owner.Npub() + "/" + d + ".git"
	repo, err := g.server.CreateRepo(rel)
	if err != nil {
		return repoCommits{}, err
	}
	var c repoCommits
	c.clone = g.server.CloneURL(rel)
	if c.main, err = repo.Commit("main", "first commit of "+d, map[string]string{"README": "# " + d + "\n"}); err != nil {
		return c, err
	}
	if c.pr, err = repo.Commit("feature", "feature work", map[string]string{"feature.txt": "one\n"}); err != nil {
		return c, err
	}
	if c.prUpdate, err = repo.Commit("feature", "feature work, revised", map[string]string{"feature.txt": "two\n"}); err != nil {
		return c, err
	}
	return c, nil
}

// has tells whether the own git directory holds commit in repository rel.
func (g *gitWorld) has(rel, commit string) bool {
	path := filepath.Join(g.dir, rel)
	if _, err := os.Stat(path); err != nil {
		return false
	}
	return gitserver.OpenRepo(path).HasObject(commit)
}

func short(oid string) string {
	if len(oid) > 10 {
		return oid[:10]
	}
	return oid
}

func (w *watchedState) String() string {
	return fmt.Sprintf("state event of %s (refs/heads/main at %s)", w.repo, short(w.commit))
}
