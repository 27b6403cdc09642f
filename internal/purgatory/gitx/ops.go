package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsRepo reports whether path looks like a bare repository (HEAD and objects/).
func IsRepo(path string) bool {
	if st, err := os.Stat(filepath.Join(path, "objects")); err != nil || !st.IsDir() {
		return false
	}
	_, err := os.Stat(filepath.Join(path, "HEAD"))
	return err == nil
}

// InitBare creates a bare repository at path (parents included).
func InitBare(ctx context.Context, r Runner, path string) error {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	_, err := r.Run(ctx, Cmd{Dir: path, Args: []string{"init", "--bare", "--quiet", "."}})
	if err != nil {
		return fmt.Errorf("init %s: %w", path, err)
	}
	return nil
}

// Present returns the subset of oids that exist in repo.
func Present(ctx context.Context, r Runner, repo string, oids []string) (map[string]bool, error) {
	have := make(map[string]bool, len(oids))
	if len(oids) == 0 {
		return have, nil
	}
	var in bytes.Buffer
	for _, o := range oids {
		if !ValidOID(o) {
			return nil, fmt.Errorf("%w: object id %q", ErrInvalid, o)
		}
		in.WriteString(o)
		in.WriteByte('\n')
	}
	res, err := r.Run(ctx, Cmd{Dir: repo, Args: []string{"cat-file", "--batch-check=%(objectname)"}, Stdin: in.Bytes()})
	if err != nil {
		return nil, fmt.Errorf("check objects in %s: %w", repo, err)
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasSuffix(line, " missing") || strings.HasSuffix(line, " ambiguous") {
			continue
		}
		have[line] = true
	}
	return have, nil
}

// Gate is consulted before every git command after the first against one
// remote in a fetch round: it returns false when the per-domain request
// budget is spent, which ends the round early.
type Gate interface {
	Extra() bool
}

type always struct{}

func (always) Extra() bool { return true }

// AlwaysGate never stops a round.
var AlwaysGate Gate = always{}

// ErrRoundCut is returned by FetchOIDs when the gate refused a further
// request; what was fetched so far is still reported.
var ErrRoundCut = errors.New("fetch round cut short by the request budget")

// FetchOIDs fetches oids from the remote url into repo and returns the ones
// now present. It asks for the objects by id; when the remote answers "not our
// ref <oid>" that id is dropped and the rest is asked for again; when it
// refuses unadvertised objects (protocol v0/v1 servers) it fetches the
// remote's branches and tags instead and checks which ids arrived.
func FetchOIDs(ctx context.Context, r Runner, repo, url string, oids []string, gate Gate) ([]string, error) {
	if gate == nil {
		gate = AlwaysGate
	}
	u, err := ParseCloneURL(url)
	if err != nil {
		return nil, err
	}
	remaining := make([]string, 0, len(oids))
	seen := map[string]bool{}
	for _, o := range oids {
		if !ValidOID(o) {
			return nil, fmt.Errorf("%w: object id %q", ErrInvalid, o)
		}
		if !seen[o] {
			seen[o] = true
			remaining = append(remaining, o)
		}
	}
	sort.Strings(remaining)
	first := true
	var fetchErr error
	for len(remaining) > 0 {
		if !first && !gate.Extra() {
			fetchErr = ErrRoundCut
			break
		}
		first = false
		args := append([]string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--", u.Raw}, remaining...)
		_, err := r.Run(ctx, Cmd{Dir: repo, Config: []string{"protocol.version=2"}, Args: args})
		if err == nil {
			break
		}
		var xe *ExitError
		if !errors.As(err, &xe) {
			return confirm(ctx, r, repo, oids, err)
		}
		if missing := notOurRefs(xe.Stderr); len(missing) > 0 {
			before := len(remaining)
			remaining = without(remaining, missing)
			if len(remaining) < before {
				continue
			}
		}
		if strings.Contains(xe.Stderr, "does not allow request for unadvertised object") {
			if !gate.Extra() {
				fetchErr = ErrRoundCut
				break
			}
			err := fetchAdvertised(ctx, r, repo, u.Raw)
			return confirm(ctx, r, repo, oids, err)
		}
		return confirm(ctx, r, repo, oids, err)
	}
	return confirm(ctx, r, repo, oids, fetchErr)
}

// tmpNamespace holds the remote's refs while a fallback fetch runs; they
// are deleted right after, the objects stay.
const tmpNamespace = "refs/grasp-sync-tmp/"

// fetchAdvertised fetches the remote's branches and tags into a temporary
// namespace and deletes those refs again.
func fetchAdvertised(ctx context.Context, r Runner, repo, url string) error {
	_, err := r.Run(ctx, Cmd{Dir: repo, Args: []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--", url,
		"+refs/heads/*:" + tmpNamespace + "heads/*", "+refs/tags/*:" + tmpNamespace + "tags/*"}})
	if err != nil {
		err = fmt.Errorf("fetch advertised refs: %w", err)
	}
	res, lerr := r.Run(ctx, Cmd{Dir: repo, Args: []string{"for-each-ref", "--format=delete %(refname)", tmpNamespace}})
	if lerr == nil && len(bytes.TrimSpace(res.Stdout)) > 0 {
		if _, derr := r.Run(ctx, Cmd{Dir: repo, Args: []string{"update-ref", "--stdin"}, Stdin: res.Stdout}); derr != nil && err == nil {
			err = fmt.Errorf("drop temporary refs: %w", derr)
		}
	}
	return err
}

// confirm reports which oids are present in repo, passing err through.
func confirm(ctx context.Context, r Runner, repo string, oids []string, err error) ([]string, error) {
	have, perr := Present(ctx, r, repo, oids)
	if perr != nil {
		if err != nil {
			return nil, err
		}
		return nil, perr
	}
	out := make([]string, 0, len(have))
	for _, o := range oids {
		if have[o] {
			out = append(out, o)
			delete(have, o)
		}
	}
	return out, err
}

// notOurRefs extracts the ids named in "not our ref <oid>" lines.
func notOurRefs(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		_, after, ok := strings.Cut(line, "not our ref ")
		if !ok {
			continue
		}
		f := strings.Fields(after)
		if len(f) > 0 && ValidOID(f[0]) {
			out = append(out, f[0])
		}
	}
	return out
}

func without(list, drop []string) []string {
	d := make(map[string]bool, len(drop))
	for _, x := range drop {
		d[x] = true
	}
	out := list[:0:0]
	for _, x := range list {
		if !d[x] {
			out = append(out, x)
		}
	}
	return out
}

// CopyObjects makes oids (and everything they reach) present in dst by
// fetching them from the local repository src. Both paths are ours (built by
// RepoPath), so the file transport is allowed for this command only.
func CopyObjects(ctx context.Context, r Runner, dst, src string, oids []string) error {
	if len(oids) == 0 {
		return nil
	}
	for _, o := range oids {
		if !ValidOID(o) {
			return fmt.Errorf("%w: object id %q", ErrInvalid, o)
		}
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return fmt.Errorf("%w: source path: %v", ErrInvalid, err)
	}
	args := append([]string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--", abs}, oids...)
	if _, err := r.Run(ctx, Cmd{Dir: dst, Config: []string{"protocol.file.allow=always"}, Args: args}); err != nil {
		return fmt.Errorf("copy objects %s -> %s: %w", src, dst, err)
	}
	return nil
}

// Refs returns refs under the given prefixes (e.g. "refs/heads/") mapped to
// the object they point at.
func Refs(ctx context.Context, r Runner, repo string, prefixes ...string) (map[string]string, error) {
	args := append([]string{"for-each-ref", "--format=%(objectname) %(refname)"}, prefixes...)
	res, err := r.Run(ctx, Cmd{Dir: repo, Args: args})
	if err != nil {
		return nil, fmt.Errorf("list refs in %s: %w", repo, err)
	}
	refs := map[string]string{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if oid, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			refs[name] = oid
		}
	}
	return refs, nil
}

// RefUpdate sets Ref to OID, or deletes Ref when OID is empty.
type RefUpdate struct {
	Ref string
	OID string
}

// UpdateRefs applies updates in one `git update-ref --stdin` transaction.
func UpdateRefs(ctx context.Context, r Runner, repo string, updates []RefUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	var in bytes.Buffer
	for _, u := range updates {
		if err := ValidateRefName(u.Ref); err != nil {
			return err
		}
		if u.OID == "" {
			fmt.Fprintf(&in, "delete %s\n", u.Ref)
			continue
		}
		if !ValidOID(u.OID) {
			return fmt.Errorf("%w: object id %q", ErrInvalid, u.OID)
		}
		fmt.Fprintf(&in, "update %s %s\n", u.Ref, u.OID)
	}
	if _, err := r.Run(ctx, Cmd{Dir: repo, Args: []string{"update-ref", "--stdin"}, Stdin: in.Bytes()}); err != nil {
		return fmt.Errorf("update refs in %s: %w", repo, err)
	}
	return nil
}

// SetHEAD points HEAD of repo at refs/heads/<branch>.
func SetHEAD(ctx context.Context, r Runner, repo, branch string) error {
	ref := "refs/heads/" + branch
	if err := ValidateRefName(ref); err != nil {
		return err
	}
	if _, err := r.Run(ctx, Cmd{Dir: repo, Args: []string{"symbolic-ref", "HEAD", ref}}); err != nil {
		return fmt.Errorf("set HEAD in %s: %w", repo, err)
	}
	return nil
}

// HEAD returns the symbolic target of HEAD in repo ("refs/heads/…").
func HEAD(ctx context.Context, r Runner, repo string) (string, error) {
	res, err := r.Run(ctx, Cmd{Dir: repo, Args: []string{"symbolic-ref", "--quiet", "HEAD"}})
	if err != nil {
		return "", fmt.Errorf("read HEAD in %s: %w", repo, err)
	}
	return strings.TrimSpace(string(res.Stdout)), nil
}
