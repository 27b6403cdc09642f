// Package gitserver serves a directory of bare git repositories over smart
// HTTP on 127.0.0.1, using the real `git http-backend` behind net/http/cgi.
//
// It is a test and demo helper: it counts requests, observes concurrency on
// the server side, can slow every request down, and has helpers to create
// bare repositories and commits with real git plumbing. Repositories are laid
// out as a GRASP service does: <root>/<npub>/<identifier>.git, served at
// <URL>/<npub>/<identifier>.git.
package gitserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Options configures a Server. The zero value serves without delay.
type Options struct {
	// Delay is added before every request is handed to git http-backend:
	// a slow server. It can be changed later with SetDelay.
	Delay time.Duration
	// OnRequest, if set, is called at the start of every request (after the
	// request has been counted) from the serving goroutine.
	OnRequest func(r *http.Request)
	// GitBinary is the git executable; default "git" from PATH.
	GitBinary string
	// Stderr receives git http-backend's stderr; default: discarded.
	Stderr io.Writer
}

// Stats are counters observed on the server side.
type Stats struct {
	// Requests is the number of HTTP requests received.
	Requests int
	// Fetches is the number of upload-pack sessions started, counted as
	// GET .../info/refs?service=git-upload-pack (one per git fetch/clone/ls-remote).
	Fetches int
	// InFlight is the number of requests being served now.
	InFlight int
	// MaxInFlight is the highest InFlight seen.
	MaxInFlight int
}

// Server is a running smart-HTTP git server.
type Server struct {
	// Root is the directory whose bare repositories are served.
	Root string
	// URL is the base URL, e.g. http://127.0.0.1:40123 (no trailing slash).
	URL string

	opts    Options
	git     string
	srv     *httptest.Server
	mu      sync.Mutex
	delay   time.Duration
	stats   Stats
	fetchAt []time.Time
}

// New starts a server for root on a random 127.0.0.1 port. Close it when done.
func New(root string, opts Options) (*Server, error) {
	gitBin := opts.GitBinary
	if gitBin == "" {
		gitBin = "git"
	}
	path, err := exec.LookPath(gitBin)
	if err != nil {
		return nil, fmt.Errorf("gitserver: find git: %w", err)
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("gitserver: root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("gitserver: root %q is not a directory", root)
	}
	s := &Server{Root: root, opts: opts, git: path, delay: opts.Delay}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gitserver: listen: %w", err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// NewT is New for tests: it fails t on error and closes the server at cleanup.
func NewT(t interface {
	Helper()
	Fatalf(string, ...any)
	Cleanup(func())
}, root string, opts Options) *Server {
	t.Helper()
	s, err := New(root, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and waits for requests being served.
func (s *Server) Close() { s.srv.Close() }

// Host returns host:port of the server, which acts as its "domain".
func (s *Server) Host() string { return strings.TrimPrefix(s.URL, "http://") }

// CloneURL returns the clone URL of the repository at <root>/<rel>.
func (s *Server) CloneURL(rel string) string { return s.URL + "/" + strings.TrimPrefix(rel, "/") }

// SetDelay changes the artificial per-request delay.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// Stats returns a snapshot of the server-side counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// FetchTimes returns when each upload-pack session started, in arrival order.
func (s *Server) FetchTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.fetchAt...)
}

// MaxFetchesInWindow returns the largest number of upload-pack sessions that
// started within any interval of length window (a sliding window over the
// recorded start times).
func (s *Server) MaxFetchesInWindow(window time.Duration) int {
	times := s.FetchTimes()
	best := 0
	j := 0
	for i := range times {
		for times[i].Sub(times[j]) >= window {
			j++
		}
		if n := i - j + 1; n > best {
			best = n
		}
	}
	return best
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.stats.Requests++
	s.stats.InFlight++
	if s.stats.InFlight > s.stats.MaxInFlight {
		s.stats.MaxInFlight = s.stats.InFlight
	}
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") &&
		r.URL.Query().Get("service") == "git-upload-pack" {
		s.stats.Fetches++
		s.fetchAt = append(s.fetchAt, time.Now())
	}
	delay := s.delay
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.stats.InFlight--
		s.mu.Unlock()
	}()
	if s.opts.OnRequest != nil {
		s.opts.OnRequest(r)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	env := []string{
		"GIT_PROJECT_ROOT=" + s.Root,
		"GIT_HTTP_EXPORT_ALL=1",
		"GIT_CONFIG_NOSYSTEM=1",
		"HOME=" + s.Root,
		"PATH=" + os.Getenv("PATH"),
	}
	if p := r.Header.Get("Git-Protocol"); p != "" {
		env = append(env, "GIT_PROTOCOL="+p)
	}
	h := &cgi.Handler{
		Path: s.git,
		Args: []string{"http-backend"},
		Dir:  s.Root,
		Env:  env,
	}
	h.Stderr = io.Discard
	if s.opts.Stderr != nil {
		h.Stderr = s.opts.Stderr
	}
	h.ServeHTTP(w, r)
}

// ErrGit is returned (wrapped) when a git command run by a helper fails.
var ErrGit = errors.New("gitserver: git command failed")

// runGit runs git with args in dir and returns trimmed stdout.
func runGit(ctx context.Context, dir string, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: git %s: %v: %s", ErrGit, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func cleanEnv() []string {
	env := []string{
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=gitserver",
		"GIT_AUTHOR_EMAIL=gitserver@example.invalid",
		"GIT_COMMITTER_NAME=gitserver",
		"GIT_COMMITTER_EMAIL=gitserver@example.invalid",
		"GIT_TERMINAL_PROMPT=0",
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env
}
