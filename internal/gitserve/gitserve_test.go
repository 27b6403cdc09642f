package gitserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
)

const (
	testHex  = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"
	testNpub = "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6"
)

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
}

// newTestServer builds a server over a fresh git directory holding
// <npub>/tool.git with one commit on main; it records every path the
// server asks isRepo about.
func newTestServer(t *testing.T, cfg Config) (*Server, *gitserver.Repo, *[]string) {
	t.Helper()
	needGit(t)
	dir := t.TempDir()
	repo, err := gitserver.InitBare(filepath.Join(dir, testNpub, "tool.git"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit("main", "first", map[string]string{"README": "hello\n"}); err != nil {
		t.Fatal(err)
	}
	if cfg.RequestTimeout == 0 {
		cfg = DefaultConfig()
	}
	s, err := New(cfg, Options{GitDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	s.isRepo = func(p string) bool {
		mu.Lock()
		asked = append(asked, p)
		mu.Unlock()
		return gitx.IsRepo(p)
	}
	return s, repo, &asked
}

func TestParsePath(t *testing.T) {
	pub, id, rest, err := parsePath("/" + testNpub + "/tool.git/info/refs")
	if err != nil || pub != testHex || id != "tool" || rest != "info/refs" {
		t.Fatalf("parsePath = %q %q %q %v", pub, id, rest, err)
	}
	if _, id, _, err := parsePath("/" + testNpub + "/my.repo-1_x.git/git-upload-pack"); err != nil || id != "my.repo-1_x" {
		t.Fatalf("identifier with dots: %q %v", id, err)
	}
	for _, p := range hostilePaths() {
		if _, _, _, err := parsePath(p); err == nil {
			t.Errorf("parsePath(%q) accepted", p)
		}
	}
}

// hostilePaths name no repository the server may serve: traversal,
// absolute paths, encodings, names the sidecar's rules refuse.
func hostilePaths() []string {
	info := "/info/refs"
	return []string{
		"",
		"/",
		"/" + testNpub,
		"/" + testNpub + "/tool.git",
		"/../" + testNpub + "/tool.git" + info,
		"/" + testNpub + "/../tool.git" + info,
		"/" + testNpub + "/..git" + info,
		"/" + testNpub + "/...git" + info,
		"/" + testNpub + "/.hidden.git" + info,
		"/" + testNpub + "/-x.git" + info,
		"/" + testNpub + "/tool" + info,
		"/" + testNpub + "/.git" + info,
		"//etc/passwd.git" + info,
		"/" + testNpub + "//tool.git" + info,
		"/" + testNpub + "/tool.git/../../x.git" + info,
		"/" + testNpub + "%2Ftool.git" + info,
		"/" + testNpub + "/tool%2Egit" + info,
		"/" + testNpub + "/%2e%2e.git" + info,
		"/" + testNpub + "/tool.git%2Finfo%2Frefs",
		"/" + testNpub + "/t%6fol.git" + info,
		"/" + testNpub + `/tool.git\..\x` + info,
		"/" + strings.ToUpper(testNpub) + "/tool.git" + info,
		"/" + testNpub[:len(testNpub)-1] + "7/tool.git" + info,
		"/" + testHex + "/tool.git" + info,
		"/nsec180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6/tool.git" + info,
		"/" + testNpub + "/" + strings.Repeat("a", gitx.MaxIdentifierLen+1) + ".git" + info,
		"/" + testNpub + "/to ol.git" + info,
		testNpub + "/tool.git" + info,
	}
}

// A path naming no repository the sidecar would lay out gets 404 without
// the server looking at the filesystem; a repository that does not exist
// is looked up inside the git directory only.
func TestHostilePathsAre404WithoutTouchingTheFilesystem(t *testing.T) {
	s, _, asked := newTestServer(t, Config{})
	for _, p := range hostilePaths() {
		for _, q := range []string{"", "service=git-upload-pack"} {
			req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
			req.URL.RawQuery = q
			// The path as a client sent it, escapes and all.
			if u, err := url.Parse("http://x" + p); err == nil && strings.HasPrefix(p, "/") {
				req.URL.Path, req.URL.RawPath = u.Path, u.RawPath
			} else {
				req.URL.Path, req.URL.RawPath = p, ""
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound {
				t.Errorf("GET %q?%s: %d, want 404", p, q, rec.Code)
			}
		}
	}
	if len(*asked) != 0 {
		t.Fatalf("hostile paths made the server look at %q", *asked)
	}
	other, err := gitx.Npub(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/" + testNpub + "/missing.git/info/refs", "/" + other + "/tool.git/info/refs"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p+"?service=git-upload-pack", nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
	for _, p := range *asked {
		if rel, err := filepath.Rel(s.root, p); err != nil || strings.HasPrefix(rel, "..") || strings.Count(rel, string(filepath.Separator)) != 1 {
			t.Errorf("looked at %s, outside <git-dir>/<npub>/<id>.git", p)
		}
	}
	if len(*asked) != 2 {
		t.Errorf("looked at %q, want the two repositories asked for", *asked)
	}
}

// A push is refused with 403 in every form, before the path is looked at.
func TestPushIsRefused(t *testing.T) {
	s, _, asked := newTestServer(t, Config{})
	base := "/" + testNpub + "/tool.git"
	for _, c := range []struct{ method, target string }{
		{http.MethodGet, base + "/info/refs?service=git-receive-pack"},
		{http.MethodGet, base + "/info/refs?service=git-upload-pack&service=git-receive-pack"},
		{http.MethodGet, base + "/info/refs?service=git%2Dreceive%2Dpack"},
		{http.MethodPost, base + "/git-receive-pack"},
		{http.MethodGet, base + "/git-receive-pack"},
		{http.MethodPost, "/" + testNpub + "/missing.git/git-receive-pack"},
		{http.MethodPost, "/../../x/git-receive-pack"},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, strings.NewReader("0000")))
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "read-only") {
			t.Errorf("%s %s: %d %q, want 403", c.method, c.target, rec.Code, rec.Body.String())
		}
	}
	if len(*asked) != 0 {
		t.Errorf("a push made the server look at %q", *asked)
	}
	// Anything but the smart upload-pack requests is refused too.
	for _, c := range []struct {
		method, target string
		code           int
	}{
		{http.MethodGet, base + "/info/refs", http.StatusForbidden}, // the dumb protocol
		{http.MethodGet, base + "/info/refs?service=git-upload-archive", http.StatusForbidden},
		{http.MethodPost, base + "/info/refs?service=git-upload-pack", http.StatusMethodNotAllowed},
		{http.MethodGet, base + "/git-upload-pack", http.StatusMethodNotAllowed},
		{http.MethodGet, base + "/HEAD", http.StatusNotFound},
		{http.MethodGet, base + "/objects/info/packs", http.StatusNotFound},
		{http.MethodGet, base + "/config", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, nil))
		if rec.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.target, rec.Code, c.code)
		}
	}
	for result, want := range map[string]float64{resultPush: 7, resultRefused: 4, resultNotFound: 3, resultServed: 0, resultBusy: 0} {
		if got := requests(t, s, result); got != want {
			t.Errorf("ngit_sync_git_http_requests_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// requests reads ngit_sync_git_http_requests_total{result}.
func requests(t *testing.T, s *Server, result string) float64 {
	return testkit.Value(t, s.m.requests.WithLabelValues(result))
}

// The settings git http-backend runs with keep receive-pack off even for a
// repository whose own config turns it on and an authenticated user (the
// two ways http-backend enables it): the server's routing is not the only
// guard.
func TestBackendArgsKeepReceivePackOff(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	repo, err := gitserver.InitBare(filepath.Join(dir, "r.git"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", repo.Path, "config", "http.receivepack", "true").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	run := func(args []string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo.Path
		cmd.Env = append(gitx.CleanEnv(), "GIT_PROJECT_ROOT="+dir, "GIT_HTTP_EXPORT_ALL=1",
			"REQUEST_METHOD=GET", "PATH_INFO=/r.git/info/refs", "QUERY_STRING=service=git-receive-pack",
			"REMOTE_USER=alice", "REMOTE_ADDR=127.0.0.1")
		out, _ := cmd.Output()
		return string(out)
	}
	// Without the settings this repository would accept a push …
	if out := run([]string{"http-backend"}); !strings.Contains(out, "git-receive-pack-advertisement") {
		t.Fatalf("control: http-backend did not advertise receive-pack:\n%s", out)
	}
	// … with them it never does.
	out := run(backendArgs)
	if !strings.Contains(out, "Status: 403") || strings.Contains(out, "advertisement") {
		t.Fatalf("http-backend with the server's settings answered:\n%s", out)
	}
}

// A real git clones and fetches through the server, with protocol v2 and
// v0; a chunked upload-pack request (a long negotiation) is served too.
func TestCloneFetchAndChunkedRequest(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	s, repo, _ := newTestServer(t, cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	refs, err := repo.Refs()
	if err != nil {
		t.Fatal(err)
	}
	main := refs["refs/heads/main"]
	url := "http://" + s.Addr() + "/" + testNpub + "/tool.git"
	for _, proto := range []string{"2", "0"} {
		dst := filepath.Join(t.TempDir(), "clone")
		out, err := gitCmd("", "-c", "protocol.version="+proto, "clone", "--quiet", url, dst)
		if err != nil {
			t.Fatalf("clone (protocol %s): %v\n%s", proto, err, out)
		}
		got, err := gitCmd(dst, "rev-parse", "refs/remotes/origin/main")
		if err != nil || strings.TrimSpace(got) != main {
			t.Fatalf("clone (protocol %s): origin/main %q, %v; want %s", proto, got, err, main)
		}
	}

	// protocol v0 upload-pack request: want main, done; sent chunked.
	body := pktLine("want "+main+" ofs-delta\n") + "0000" + pktLine("done\n")
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < len(body); i += 7 {
			_, _ = pw.Write([]byte(body[i:min(i+7, len(body))]))
		}
		_ = pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, url+"/git-upload-pack", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-git-upload-pack-request")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte("PACK")) {
		t.Fatalf("chunked upload-pack: %d, %q", resp.StatusCode, data[:min(len(data), 200)])
	}
	// Two clones (an advertisement and an upload-pack each, at least) and
	// the chunked request.
	if got := requests(t, s, resultServed); got < 5 {
		t.Errorf("ngit_sync_git_http_requests_total{result=served} = %v, want >= 5", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-result" {
		t.Errorf("Content-Type %q", ct)
	}
}

func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func gitCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitx.CleanEnv(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A request that does not finish within request_timeout is cut off: its
// backend is killed, a warning says so, and its slot is free again.
func TestRequestTimeoutStopsTheBackend(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.RequestTimeout = 300 * time.Millisecond
	cfg.MaxConcurrent = 1
	s, repo, _ := newTestServer(t, cfg)
	core, logs := observer.New(zapcore.DebugLevel)
	s.log = zap.New(core)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	refs, _ := repo.Refs()
	url := "http://" + s.Addr() + "/" + testNpub + "/tool.git"

	// A client that sends the start of its request and then nothing.
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := pktLine("want " + refs["refs/heads/main"] + "\n")
	fmt.Fprintf(conn, "POST /%s/tool.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/x-git-upload-pack-request\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
		testNpub, len(want), want)
	// The server closes the connection (after whatever it answered).
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the stalled request was never cut off: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for logs.FilterMessage("git request stopped after git_http.request_timeout").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no timeout warning; log: %v", logs.All())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The only slot is free: an advertisement is served.
	resp, err := http.Get(url + "/info/refs?service=git-upload-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after the timeout: %d", resp.StatusCode)
	}
	if got := requests(t, s, resultTimeout); got != 1 {
		t.Errorf("ngit_sync_git_http_requests_total{result=timeout} = %v, want 1", got)
	}
	testkit.WaitFor(t, time.Minute, "ngit_sync_git_http_backends_running back at 0", func() bool {
		return testkit.Value(t, s.m.running) == 0
	})
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := DefaultConfig()
	c.Listen = "8080"
	c.RequestTimeout = 0
	c.MaxConcurrent = 0
	err := c.Validate()
	want := `listen: must be HOST:PORT or :PORT (empty: off), got "8080"` + "\n" +
		`request_timeout: must be > 0, got "0s"` + "\n" +
		`max_concurrent: must be > 0, got "0"`
	if fmt.Sprint(err) != want || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

// New refuses a setup that cannot serve: no git directory, or a git
// without http-backend.
func TestNewChecksTheSetup(t *testing.T) {
	needGit(t)
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	if _, err := New(cfg, Options{GitDir: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing git directory was accepted")
	}
	// A git whose exec path lacks http-backend.
	bin := t.TempDir()
	fake := filepath.Join(bin, "git")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho "+bin+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := New(cfg, Options{GitDir: t.TempDir(), GitBinary: fake})
	if !errors.Is(err, ErrNoBackend) {
		t.Errorf("git without http-backend: %v", err)
	}
}
