package gitserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Repo is a bare repository on disk with helpers to write commits, branches
// and tags with real git plumbing.
type Repo struct {
	// Path is the repository directory (…/<identifier>.git).
	Path string
}

var commitSeq atomic.Int64

// InitBare creates (or reopens) a bare repository at path, with HEAD on
// refs/heads/main.
func InitBare(path string) (*Repo, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("gitserver: mkdir %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := runGit(ctx, path, "", "init", "--bare", "--quiet", "--initial-branch=main", "."); err != nil {
		return nil, err
	}
	return &Repo{Path: path}, nil
}

// OpenRepo returns a Repo for an existing repository directory.
func OpenRepo(path string) *Repo { return &Repo{Path: path} }

// CreateRepo creates a bare repository at <Root>/<rel> (e.g. "npub1…/repo.git").
func (s *Server) CreateRepo(rel string) (*Repo, error) {
	return InitBare(filepath.Join(s.Root, filepath.FromSlash(rel)))
}

func (r *Repo) git(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return runGit(ctx, r.Path, stdin, args...)
}

// Commit writes a commit whose tree holds files (name → content; a unique
// file is added so every call yields a new commit), with the current tip of
// branch as parent, moves refs/heads/<branch> to it and returns its id. An
// empty branch writes a root commit that no ref points at.
func (r *Repo) Commit(branch, message string, files map[string]string) (string, error) {
	n := commitSeq.Add(1)
	all := map[string]string{fmt.Sprintf("seq-%d.txt", n): fmt.Sprintf("%s %d %d\n", message, n, time.Now().UnixNano())}
	for k, v := range files {
		all[k] = v
	}
	names := make([]string, 0, len(all))
	for k := range all {
		if strings.ContainsAny(k, "/\t\n") {
			return "", fmt.Errorf("gitserver: file name %q: only flat names are supported", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var tree strings.Builder
	for _, name := range names {
		blob, err := r.git(all[name], "hash-object", "-w", "--stdin")
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&tree, "100644 blob %s\t%s\n", blob, name)
	}
	treeID, err := r.git(tree.String(), "mktree")
	if err != nil {
		return "", err
	}
	args := []string{"commit-tree", treeID, "-m", message}
	if branch != "" {
		if parent, err := r.git("", "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil && parent != "" {
			args = append(args, "-p", parent)
		}
	}
	commit, err := r.git("", args...)
	if err != nil {
		return "", err
	}
	if branch != "" {
		if err := r.SetRef("refs/heads/"+branch, commit); err != nil {
			return "", err
		}
	}
	return commit, nil
}

// SetRef points ref (a full name such as refs/heads/x or refs/tags/v1) at oid.
func (r *Repo) SetRef(ref, oid string) error {
	_, err := r.git("", "update-ref", ref, oid)
	return err
}

// DeleteRef deletes ref.
func (r *Repo) DeleteRef(ref string) error {
	_, err := r.git("", "update-ref", "-d", ref)
	return err
}

// AnnotatedTag creates refs/tags/<name> as an annotated tag object on oid and
// returns the tag object's id.
func (r *Repo) AnnotatedTag(name, oid, message string) (string, error) {
	body := fmt.Sprintf("object %s\ntype commit\ntag %s\ntagger gitserver <gitserver@example.invalid> %d +0000\n\n%s\n",
		oid, name, time.Now().Unix(), message)
	tagID, err := r.git(body, "mktag")
	if err != nil {
		return "", err
	}
	return tagID, r.SetRef("refs/tags/"+name, tagID)
}

// SetHEAD makes HEAD a symbolic ref to refs/heads/<branch>.
func (r *Repo) SetHEAD(branch string) error {
	_, err := r.git("", "symbolic-ref", "HEAD", "refs/heads/"+branch)
	return err
}

// HEAD returns the target of the symbolic HEAD, e.g. "refs/heads/main".
func (r *Repo) HEAD() (string, error) {
	return r.git("", "symbolic-ref", "HEAD")
}

// Refs returns every ref under refs/ mapped to the object it points at.
func (r *Repo) Refs() (map[string]string, error) {
	out, err := r.git("", "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if oid, name, ok := strings.Cut(line, " "); ok {
			refs[name] = oid
		}
	}
	return refs, nil
}

// HasObject reports whether oid exists in the repository.
func (r *Repo) HasObject(oid string) bool {
	_, err := r.git("", "cat-file", "-e", oid)
	return err == nil
}
