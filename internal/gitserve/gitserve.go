// Package gitserve serves the git directory's repositories read-only over smart HTTP (git http-backend, upload-pack only: clone and fetch, never a push) at /<npub>/<identifier>.git.
package gitserve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/httpserve"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// Options are what the process gives a Server besides its settings.
type Options struct {
	// GitDir is the GRASP git directory (<GitDir>/<npub>/<identifier>.git).
	GitDir string
	// GitBinary is the git executable (default "git" from PATH).
	GitBinary string
	// Log receives the server's lines; nil: none.
	Log *zap.Logger
	// Registry receives the server's metrics; nil: not exported.
	Registry prometheus.Registerer
}

// ErrNoBackend is returned by New when git has no http-backend command
// (some packagings leave git's server-side commands out).
var ErrNoBackend = errors.New("git http-backend not found")

// Server is the read-only git server. New checks the setup, Start binds
// and serves in the background, Shutdown stops it.
type Server struct {
	cfg  Config
	root string // absolute git directory
	git  string // absolute path of the git executable
	log  *zap.Logger
	m    *metrics
	bg   httpserve.Server
	// slots bounds the backends running at once.
	slots chan struct{}
	// isRepo tells whether a path inside root is a repository (tests
	// record what it is asked).
	isRepo func(string) bool
	// stop is cancelled when Shutdown gives up waiting: it kills the
	// backends still running; running counts them.
	stop    context.Context
	kill    context.CancelFunc
	running sync.WaitGroup

	mu      sync.Mutex
	closing bool // no backend starts any more
}

// New returns a server for cfg over opts.GitDir. It fails when the
// directory or git's http-backend command is missing.
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.GitDir == "" {
		return nil, fmt.Errorf("%w: git_dir is required", ErrInvalidConfig)
	}
	root, err := filepath.Abs(opts.GitDir)
	if err != nil {
		return nil, fmt.Errorf("git dir: %w", err)
	}
	if st, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("git dir: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("git dir %s is not a directory", root)
	}
	bin := opts.GitBinary
	if bin == "" {
		bin = "git"
	}
	git, err := exec.LookPath(bin)
	if err != nil {
		return nil, err
	}
	if git, err = filepath.Abs(git); err != nil {
		return nil, err
	}
	if err := checkBackend(git); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{
		cfg: cfg, root: root, git: git, log: log, m: newMetrics(opts.Registry),
		slots: make(chan struct{}, cfg.MaxConcurrent), isRepo: gitx.IsRepo,
	}
	s.stop, s.kill = context.WithCancel(context.Background())
	s.bg.OnError = func(err error) { s.log.Error("git server stopped", zap.Error(err)) }
	s.bg.Srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(log),
	}
	return s, nil
}

// maxHeaderBytes bounds a request's headers: a git client sends a few.
const maxHeaderBytes = 64 << 10

// checkBackend fails with ErrNoBackend unless git's exec path holds the
// git-http-backend command.
func checkBackend(git string) error {
	cmd := exec.Command(git, "--exec-path")
	cmd.Env = gitx.CleanEnv() // as the backend runs
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s --exec-path: %w", git, err)
	}
	dir := strings.TrimSpace(string(out))
	if st, err := os.Stat(filepath.Join(dir, "git-http-backend")); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%w in %s: git_http.listen needs git's server-side commands", ErrNoBackend, dir)
	}
	return nil
}

// Start binds the listen address and serves in the background.
func (s *Server) Start() error {
	addr, err := s.bg.Start(s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	s.log.Info("serving the git directory read-only over smart HTTP (clone and fetch)",
		zap.String("listen", addr.String()), zap.String("git_dir", s.root))
	return nil
}

// Addr is the bound address ("" before Start): with port 0 the port the
// system chose.
func (s *Server) Addr() string { return s.bg.Addr() }

// Shutdown stops accepting requests and waits for those being served
// until ctx is done; then it kills their backends and closes their
// connections. It returns once no backend runs.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.bg.Shutdown(ctx, s.kill)
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.running.Wait()
	s.kill()
	return err
}

// enter counts a backend about to start; false once Shutdown waits for
// the running ones.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.running.Add(1)
	return true
}
