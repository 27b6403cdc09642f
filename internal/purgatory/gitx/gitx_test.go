package gitx_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
)

func TestValidateIdentifier(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"repo", true}, {"my-repo_1.2", true}, {"", false}, {"-rf", false}, {".hidden", false},
		{"a..b", false}, {"a/b", false}, {`a\b`, false}, {"a b", false}, {strings.Repeat("x", 101), false},
		{strings.Repeat("x", 100), true}, {"ünï", false},
	} {
		err := gitx.ValidateIdentifier(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateIdentifier(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("error %v is not ErrInvalid", err)
		}
	}
}

func TestValidateRefName(t *testing.T) {
	for _, tc := range []struct {
		ref string
		ok  bool
	}{
		{"refs/heads/main", true}, {"refs/heads/feature/x", true}, {"refs/tags/v1.0", true},
		{"refs/nostr/" + strings.Repeat("a", 64), true},
		{"refs/remotes/x", false}, {"refs/heads/", false}, {"refs/heads/a..b", false}, {"refs/heads/a b", false},
		{"refs/heads/-x", false}, {"refs/heads/.x", false}, {"refs/heads/x.lock", false}, {"refs/heads/a//b", false},
		{"refs/heads/a@{1}", false}, {"refs/heads/a~1", false}, {"refs/heads/a:b", false}, {"refs/heads/x/", false},
		{"HEAD", false}, {"refs/heads/HEAD", false},
	} {
		if err := gitx.ValidateRefName(tc.ref); (err == nil) != tc.ok {
			t.Errorf("ValidateRefName(%q) = %v, want ok=%v", tc.ref, err, tc.ok)
		}
	}
}

func TestRepoPath(t *testing.T) {
	dir := t.TempDir()
	pk := strings.Repeat("ab", 32)
	p, err := gitx.RepoPath(dir, pk, "repo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, dir+string(filepath.Separator)+"npub1") || !strings.HasSuffix(p, string(filepath.Separator)+"repo.git") {
		t.Errorf("RepoPath = %q", p)
	}
	for _, bad := range [][2]string{{pk, "../x"}, {pk, ".."}, {"AB" + pk[2:], "repo"}, {pk[:60], "repo"}, {pk, "-x"}} {
		if _, err := gitx.RepoPath(dir, bad[0], bad[1]); !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("RepoPath(%q,%q) err = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}

func TestParseCloneURL(t *testing.T) {
	for _, tc := range []struct {
		raw, domain string
	}{
		{"https://Example.com/npub1x/repo.git", "example.com"},
		{"http://127.0.0.1:8080/a.git", "127.0.0.1:8080"},
		{"git://host/x", "host"},
		{"https://Host:443/x", "host"}, {"http://host:80/x", "host"}, {"https://host:8443/x", "host:8443"},
		{"file:///etc", ""}, {"ext::sh -c id", ""}, {"-u http://x", ""}, {"https://user:pw@host/x", ""},
		{"ssh://host/x", ""}, {"https:///x", ""}, {"https://host/x y", ""},
	} {
		u, err := gitx.ParseCloneURL(tc.raw)
		if tc.domain == "" {
			if err == nil {
				t.Errorf("ParseCloneURL(%q) accepted", tc.raw)
			}
			continue
		}
		if err != nil || u.Domain != tc.domain {
			t.Errorf("ParseCloneURL(%q) = %+v, %v; want domain %q", tc.raw, u, err, tc.domain)
		}
	}
}

func TestCheckPublicHost(t *testing.T) {
	ctx := context.Background()
	for _, h := range []string{"127.0.0.1", "10.1.2.3", "192.168.1.1", "169.254.169.254", "::1", "fe80::1", "0.0.0.0", "localhost", "100.64.0.1"} {
		if err := gitx.CheckPublicHost(ctx, net.DefaultResolver, h); !errors.Is(err, gitx.ErrPrivateAddress) {
			t.Errorf("CheckPublicHost(%q) = %v, want ErrPrivateAddress", h, err)
		}
	}
	if err := gitx.CheckPublicHost(ctx, net.DefaultResolver, "8.8.8.8"); err != nil {
		t.Errorf("CheckPublicHost(8.8.8.8) = %v", err)
	}
}

// v0Runner forces protocol v0 so the server refuses unadvertised objects.
type v0Runner struct{ gitx.Runner }

func (v v0Runner) Run(ctx context.Context, c gitx.Cmd) (gitx.Result, error) {
	c.Config = append(c.Config, "protocol.version=0")
	return v.Runner.Run(ctx, c)
}

type countGate struct{ n, max int }

func (g *countGate) Extra() bool {
	if g.n >= g.max {
		return false
	}
	g.n++
	return true
}

func TestFetchOIDs(t *testing.T) {
	root := t.TempDir()
	srv := gitserver.NewT(t, root, gitserver.Options{})
	remote, err := srv.CreateRepo("owner/repo.git")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := remote.Commit("main", "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := remote.Commit("main", "two", nil)
	if err != nil {
		t.Fatal(err)
	}
	loose, err := remote.Commit("", "unreferenced", nil) // not reachable from any ref
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Repeat("1", 40)
	url := srv.CloneURL("owner/repo.git")
	r := gitx.NewExec(30 * time.Second)
	ctx := context.Background()

	t.Run("by id, dropping not-our-ref", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "l.git")
		if err := gitx.InitBare(ctx, r, local); err != nil {
			t.Fatal(err)
		}
		before := srv.Stats().Fetches
		got, err := gitx.FetchOIDs(ctx, r, local, url, []string{c2, missing, loose}, gitx.AlwaysGate)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !contains(got, c2) || !contains(got, loose) {
			t.Fatalf("fetched %v, want %s and %s", got, c2, loose)
		}
		have, err := gitx.Present(ctx, r, local, []string{c1, c2, loose, missing})
		if err != nil {
			t.Fatal(err)
		}
		if !have[c1] || !have[c2] || !have[loose] || have[missing] {
			t.Errorf("present = %v", have)
		}
		if n := srv.Stats().Fetches - before; n != 2 {
			t.Errorf("server saw %d fetches, want 2 (one refused, one retry)", n)
		}
	})

	t.Run("gate cuts the round", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "l.git")
		if err := gitx.InitBare(ctx, r, local); err != nil {
			t.Fatal(err)
		}
		got, err := gitx.FetchOIDs(ctx, r, local, url, []string{c2, missing}, &countGate{max: 0})
		if !errors.Is(err, gitx.ErrRoundCut) || len(got) != 0 {
			t.Fatalf("got %v, %v; want nothing and ErrRoundCut", got, err)
		}
	})

	t.Run("unadvertised falls back to refs", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "l.git")
		if err := gitx.InitBare(ctx, r, local); err != nil {
			t.Fatal(err)
		}
		got, err := gitx.FetchOIDs(ctx, v0Runner{r}, local, url, []string{c1, loose}, gitx.AlwaysGate)
		if err != nil {
			t.Fatal(err)
		}
		// c1 is reachable from main and arrives with the refs; the loose commit cannot.
		if len(got) != 1 || got[0] != c1 {
			t.Fatalf("fetched %v, want [%s]", got, c1)
		}
	})

	t.Run("dead server", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "l.git")
		if err := gitx.InitBare(ctx, r, local); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String() + "/owner/repo.git"
		ln.Close()
		got, err := gitx.FetchOIDs(ctx, r, local, dead, []string{c1}, gitx.AlwaysGate)
		if !errors.Is(err, gitx.ErrFailed) || len(got) != 0 {
			t.Fatalf("got %v, %v; want ErrFailed", got, err)
		}
	})

	t.Run("copy, update refs, HEAD", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "s.git")
		dst := filepath.Join(t.TempDir(), "d.git")
		for _, p := range []string{src, dst} {
			if err := gitx.InitBare(ctx, r, p); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := gitx.FetchOIDs(ctx, r, src, url, []string{c2}, nil); err != nil {
			t.Fatal(err)
		}
		if err := gitx.CopyObjects(ctx, r, dst, src, []string{c2}); err != nil {
			t.Fatal(err)
		}
		if err := gitx.UpdateRefs(ctx, r, dst, []gitx.RefUpdate{{Ref: "refs/heads/dev", OID: c2}, {Ref: "refs/tags/v1", OID: c1}}); err != nil {
			t.Fatal(err)
		}
		if err := gitx.UpdateRefs(ctx, r, dst, []gitx.RefUpdate{{Ref: "refs/tags/v1"}}); err != nil {
			t.Fatal(err)
		}
		if err := gitx.SetHEAD(ctx, r, dst, "dev"); err != nil {
			t.Fatal(err)
		}
		refs, err := gitx.Refs(ctx, r, dst, "refs/heads/", "refs/tags/")
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 1 || refs["refs/heads/dev"] != c2 {
			t.Errorf("refs = %v", refs)
		}
		if h, err := gitx.HEAD(ctx, r, dst); err != nil || h != "refs/heads/dev" {
			t.Errorf("HEAD = %q, %v", h, err)
		}
		if err := gitx.UpdateRefs(ctx, r, dst, []gitx.RefUpdate{{Ref: "refs/heads/--upload-pack=x", OID: c2}}); !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("bad ref accepted: %v", err)
		}
	})
}

func TestExecHardening(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent")
	dir := t.TempDir()
	r := gitx.NewExec(10 * time.Second)
	ctx := context.Background()
	if err := gitx.InitBare(ctx, r, dir); err != nil {
		t.Fatalf("inherited GIT_DIR leaked into git: %v", err)
	}
	// file:// is refused for remote fetches.
	other := filepath.Join(t.TempDir(), "o.git")
	if err := gitx.InitBare(ctx, r, other); err != nil {
		t.Fatal(err)
	}
	_, err := r.Run(ctx, gitx.Cmd{Dir: dir, Args: []string{"fetch", "--", "file://" + other}})
	var xe *gitx.ExitError
	if !errors.As(err, &xe) || !strings.Contains(xe.Stderr, "transport 'file' not allowed") {
		t.Errorf("file transport: err = %v", err)
	}
	// Timeout.
	_, err = r.Run(ctx, gitx.Cmd{Dir: dir, Args: []string{"cat-file", "--batch"}, Stdin: nil, Timeout: time.Millisecond})
	if err != nil && !errors.Is(err, gitx.ErrTimeout) && !errors.Is(err, gitx.ErrFailed) {
		t.Errorf("timeout err = %v", err)
	}
	// Output cap.
	res, err := r.Run(ctx, gitx.Cmd{Dir: dir, Args: []string{"help", "-a"}, OutputCap: 10})
	if err == nil && (!res.Truncated || len(res.Stdout) > 10) {
		t.Errorf("output not capped: %d bytes truncated=%v", len(res.Stdout), res.Truncated)
	}
	_ = os.Remove
}

func contains(list []string, x string) bool {
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}

func TestNpub(t *testing.T) {
	// Vector from NIP-19.
	got, err := gitx.Npub("3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d")
	if err != nil || got != "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6" {
		t.Errorf("Npub = %q, %v", got, err)
	}
}

// PubKeyFromNpub reads back what Npub writes, and nothing else: another
// prefix, a bad checksum, upper case, padding or a path.
func TestPubKeyFromNpub(t *testing.T) {
	const hex = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	const npub = "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"
	if got, err := gitx.PubKeyFromNpub(npub); err != nil || got != hex {
		t.Fatalf("PubKeyFromNpub = %q, %v", got, err)
	}
	for _, bad := range []string{
		"", "npub1", strings.ToUpper(npub), npub[:len(npub)-1] + "7", npub + "q", " " + npub,
		"nsec180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", "..", "../" + npub[3:],
		"note1" + npub[5:], hex,
	} {
		if got, err := gitx.PubKeyFromNpub(bad); err == nil || !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("PubKeyFromNpub(%q) = %q, %v; want ErrInvalid", bad, got, err)
		}
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// PinAddress refuses names resolving to private addresses, and pins the
// checked address so git connects there whatever DNS says later.
func TestPinAddress(t *testing.T) {
	ctx := context.Background()
	res := fakeResolver{
		"public.example": {netip.MustParseAddr("93.184.216.34")},
		"mixed.example":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")},
		"git.test":       {netip.MustParseAddr("127.0.0.1")},
		"v6.example":     {netip.MustParseAddr("2606:2800:220:1::1")},
	}
	parse := func(raw string) gitx.CloneURL {
		u, err := gitx.ParseCloneURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	cfg, err := gitx.PinAddress(ctx, res, parse("https://public.example/r.git"), false)
	if err != nil || len(cfg) != 1 || cfg[0] != "http.curloptResolve=public.example:443:93.184.216.34" {
		t.Errorf("public: %v, %v", cfg, err)
	}
	cfg, err = gitx.PinAddress(ctx, res, parse("http://v6.example:8080/r.git"), false)
	if err != nil || len(cfg) != 1 || cfg[0] != "http.curloptResolve=v6.example:8080:[2606:2800:220:1::1]" {
		t.Errorf("v6: %v, %v", cfg, err)
	}
	for _, raw := range []string{"https://mixed.example/r.git", "https://git.test/r.git", "http://127.0.0.1/r.git", "https://localhost/r.git", "git://git.test/r.git"} {
		if _, err := gitx.PinAddress(ctx, res, parse(raw), false); !errors.Is(err, gitx.ErrPrivateAddress) {
			t.Errorf("%s: %v, want ErrPrivateAddress", raw, err)
		}
	}

	// The pin is what git uses: a name that does not resolve at all reaches
	// the local server through it.
	srv := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	remote, err := srv.CreateRepo("r.git")
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.Commit("main", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Host()[strings.LastIndex(srv.Host(), ":")+1:]
	u := parse("http://git.test:" + port + "/r.git")
	pin, err := gitx.PinAddress(ctx, res, u, true)
	if err != nil || len(pin) != 1 {
		t.Fatalf("pin: %v %v", pin, err)
	}
	r := gitx.NewExec(30 * time.Second)
	local := filepath.Join(t.TempDir(), "l.git")
	if err := gitx.InitBare(ctx, r, local); err != nil {
		t.Fatal(err)
	}
	got, err := gitx.FetchOIDs(ctx, gitx.WithConfig(r, pin...), local, u.Raw, []string{c}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("fetch through the pin: %v, %v", got, err)
	}
}

// TestExitErrorShort: a failed command's error names the subcommand and
// its operands without options, counts the object ids, and keeps git's
// first stderr lines.
func TestExitErrorShort(t *testing.T) {
	oid := strings.Repeat("a", 40)
	e := &gitx.ExitError{
		Args:     []string{"fetch", "--quiet", "--no-tags", "--", "https://git.example/x.git", oid, strings.Repeat("b", 40)},
		ExitCode: 128,
		Stderr:   "fatal: repository not found\n",
	}
	want := "git fetch https://git.example/x.git (2 objects): exit 128: fatal: repository not found"
	if got := e.Error(); got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
