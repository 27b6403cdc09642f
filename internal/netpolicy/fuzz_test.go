package netpolicy

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// FuzzURLChecks: no input panics; an accepted URL has an allowed scheme,
// a host, no credentials and no control characters, and an IP-literal host
// that the policy allows; the git guard never lets a refused URL through.
func FuzzURLChecks(f *testing.F) {
	for _, s := range []string{
		"wss://relay.example.com", "ws://127.0.0.1:7777", "ws://[::1]", "ws://169.254.169.254/",
		"ws://[::ffff:10.0.0.1]/", "ws://localhost", "https://github.com/a/b.git", "git://h/x",
		"ext::sh -c touch% /tmp/x", "--upload-pack=x", "file:///etc", "http://10.0.0.1/x.git",
		"http://[fd00:ec2::254]/", "ws://[fe80::1%25eth0]/", "ws://host:0", "http://u@h/", "ws:opaque",
		"http://[64:ff9b::a00:1]/", "HTTPS://EXAMPLE.COM./", "ws://xn--nxasmq6b.example/",
	} {
		f.Add(s)
	}
	p, err := New(Options{Allow: []string{"192.168.7.0/24", "allowed.internal"}, Resolver: &fakeResolver{answers: map[string][]netip.Addr{}}})
	if err != nil {
		f.Fatal(err)
	}
	g := p.GitRunner(&recordingRunner{})
	f.Fuzz(func(t *testing.T, raw string) {
		for _, c := range []struct {
			check   func(string) error
			schemes []string
		}{
			{p.CheckRelayURL, []string{"ws", "wss"}},
			{p.CheckCloneURL, []string{"http", "https", "git"}},
		} {
			err := c.check(raw)
			if err != nil {
				if !errors.Is(err, ErrRefused) || Reason(err) == "" {
					t.Fatalf("check(%q) = %v: not a refusal with a reason", raw, err)
				}
				continue
			}
			u, perr := url.Parse(raw)
			if perr != nil {
				t.Fatalf("accepted unparsable %q", raw)
			}
			ok := false
			for _, s := range c.schemes {
				ok = ok || strings.EqualFold(u.Scheme, s)
			}
			if !ok || u.User != nil || u.Hostname() == "" || strings.HasPrefix(raw, "-") {
				t.Fatalf("accepted %q (scheme %q, user %v, host %q)", raw, u.Scheme, u.User, u.Hostname())
			}
			for i := 0; i < len(raw); i++ {
				if raw[i] <= ' ' || raw[i] == 0x7f {
					t.Fatalf("accepted %q with control character or space", raw)
				}
			}
			if a, err := netip.ParseAddr(u.Hostname()); err == nil && p.AddrReason(a) != "" {
				t.Fatalf("accepted %q whose address %s is refused", raw, a)
			}
		}
		// Through the git guard: the fake resolver knows no names, so only
		// IP literals (or allowed names) can pass, and only if allowed.
		_, gerr := g.Run(context.Background(), gitx.Cmd{Args: []string{"fetch", "--", raw}})
		if gerr == nil && !strings.HasPrefix(raw, "/") {
			u, _ := url.Parse(raw)
			a, aerr := netip.ParseAddr(strings.Trim(u.Hostname(), "[]"))
			if !p.HostAllowed(u.Hostname()) && (aerr != nil || p.AddrReason(a) != "") {
				t.Fatalf("git guard let %q through", raw)
			}
		}
	})
}

// FuzzClassify: mapped addresses classify as their IPv4 address, allowed
// CIDRs are honoured, and a public verdict never covers a loopback,
// private, link-local, multicast or unspecified address.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::1", "10.1.2.3", "169.254.169.254", "8.8.8.8", "fd00:ec2::254", "64:ff9b::a00:1", "2002:a00:1::"} {
		a := netip.MustParseAddr(s).As16()
		f.Add(a[:])
	}
	p, err := New(Options{Allow: []string{"10.0.0.0/8"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var a netip.Addr
		switch len(b) {
		case 4:
			a = netip.AddrFrom4([4]byte(b))
		case 16:
			a = netip.AddrFrom16([16]byte(b))
		default:
			return
		}
		r := Classify(a)
		if r == "" {
			u := a.Unmap()
			if u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() || u.IsMulticast() || u.IsUnspecified() {
				t.Fatalf("Classify(%s) = public", a)
			}
		}
		if a.Is4In6() && Classify(a.Unmap()) != r {
			t.Fatalf("Classify(%s) = %q but Classify(%s) = %q", a, r, a.Unmap(), Classify(a.Unmap()))
		}
		if pr := p.AddrReason(a); a.Unmap().Is4() && a.Unmap().As4()[0] == 10 {
			if pr != "" {
				t.Fatalf("AddrReason(%s) = %q despite allow 10.0.0.0/8", a, pr)
			}
		} else if pr != r {
			t.Fatalf("AddrReason(%s) = %q, Classify = %q", a, pr, r)
		}
	})
}

// FuzzIdentifier: an identifier gitx accepts is a single path component
// of safe ASCII, and the repository path built from it stays inside the git
// directory; anything else is refused before touching the filesystem.
func FuzzIdentifier(f *testing.F) {
	for _, s := range []string{"repo", "my-repo.v2", "../x", "a/b", "-x", ".hidden", "..", strings.Repeat("a", 101), "\xff\xfe", "a\x00b", "ok_name"} {
		f.Add(s)
	}
	dir := f.TempDir()
	const owner = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	f.Fuzz(func(t *testing.T, id string) {
		err := gitx.ValidateIdentifier(id)
		path, perr := gitx.RepoPath(dir, owner, id)
		if (err == nil) != (perr == nil) {
			t.Fatalf("ValidateIdentifier(%q) = %v but RepoPath = %v", id, err, perr)
		}
		if err != nil {
			if !errors.Is(err, gitx.ErrInvalid) {
				t.Fatalf("refusal of %q is not ErrInvalid: %v", id, err)
			}
			return
		}
		if !utf8.ValidString(id) || strings.ContainsAny(id, "/\\\x00") || id == "." || id == ".." || strings.HasPrefix(id, "-") || len(id) > gitx.MaxIdentifierLen {
			t.Fatalf("accepted identifier %q", id)
		}
		rel, rerr := filepath.Rel(dir, path)
		if rerr != nil || strings.HasPrefix(rel, "..") || filepath.Base(path) != id+".git" || filepath.Dir(filepath.Dir(path)) != dir {
			t.Fatalf("RepoPath(%q) = %q escapes or misplaces %q", id, path, dir)
		}
		if _, err := os.Lstat(path); err == nil {
			t.Fatalf("validation created %q", path)
		}
	})
}

// Identifiers that must never become paths.
func TestHostileIdentifiersRefused(t *testing.T) {
	dir := t.TempDir()
	const owner = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	for _, id := range []string{"../x", "a/b", "-x", strings.Repeat("a", gitx.MaxIdentifierLen+1), "r\xffepo", "", ".", "..", "a\\b", "x\x00", ".git"} {
		if _, err := gitx.RepoPath(dir, owner, id); !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("RepoPath(%q) = %v, want ErrInvalid", id, err)
		}
	}
	for _, owner := range []string{"", "../../etc", strings.ToUpper(owner), owner[:63]} {
		if _, err := gitx.RepoPath(dir, owner, "repo"); !errors.Is(err, gitx.ErrInvalid) {
			t.Errorf("RepoPath(owner %q) = %v, want ErrInvalid", owner, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("git dir touched: %v %v", entries, err)
	}
}
