// Package httpapi serves grasp-sync's HTTP surface on one http.Server:
// /metrics (Prometheus), /healthz (liveness), /readyz (readiness),
// /status (JSON status.Snapshot) and / (the same as an HTML status page).
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/httpserve"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/internal/version"
)

// Provider supplies the sidecar's state. *sidecar.Sidecar satisfies it.
type Provider interface {
	Status() status.Snapshot
	Ready() bool
}

// ReasonProvider is optionally implemented by a Provider to explain why it
// is not ready; /readyz prints the reason.
type ReasonProvider interface {
	NotReadyReason() string
}

// Defaults of Options' timeouts.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
)

// ErrStarted is returned by Start on a server that is already running.
var ErrStarted = errors.New("httpapi: server already started")

// Options configures a Server.
type Options struct {
	// Addr is the listen address, e.g. ":9090" or "127.0.0.1:0".
	Addr string
	// Provider answers /readyz and /status.
	Provider Provider
	// Gatherer is exposed on /metrics; normally the process's
	// *prometheus.Registry. Nil disables /metrics (404).
	Gatherer prometheus.Gatherer
	// Log receives serve errors; nil means no logging.
	Log *zap.Logger
	// ReadHeaderTimeout, WriteTimeout and IdleTimeout bound each
	// connection; zero values take the Default… constants.
	ReadHeaderTimeout time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
}

// Server is the HTTP surface. Start binds and serves in the background;
// Shutdown stops it gracefully.
type Server struct {
	opts Options
	log  *zap.Logger
	bg   httpserve.Server
}

// New returns a server for opts. It does not listen yet.
func New(opts Options) *Server {
	if opts.ReadHeaderTimeout == 0 {
		opts.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{opts: opts, log: log.Named("http")}
	s.bg.Srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		ErrorLog:          zap.NewStdLog(s.log),
	}
	s.bg.OnError = func(err error) { s.log.Error("serve", zap.Error(err)) }
	return s
}

// Handler returns the routes, for tests and for embedding.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      zap.NewStdLog(s.log),
		}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /status", s.status)
	mux.HandleFunc("GET /{$}", s.page)
	return mux
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, text)
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	p := s.opts.Provider
	if p == nil {
		writeText(w, http.StatusServiceUnavailable, "not ready: starting")
		return
	}
	if p.Ready() {
		writeText(w, http.StatusOK, "ready")
		return
	}
	writeText(w, http.StatusServiceUnavailable, "not ready: "+NotReadyReason(p))
}

// NotReadyReason explains why p is not ready: the provider's own reason if
// it implements ReasonProvider, else one derived from its status snapshot.
func NotReadyReason(p Provider) string {
	if rp, ok := p.(ReasonProvider); ok {
		if r := rp.NotReadyReason(); r != "" {
			return r
		}
	}
	st := p.Status()
	switch {
	case !st.OwnRelay.Connected:
		return "own relay " + st.OwnRelay.URL + " not connected"
	case !st.OwnRelay.SelfSubscriptionEOSE:
		return "self-subscription on the own relay has not reached EOSE"
	}
	return "starting"
}

// snapshot is the provider's status with the reason it is not ready, the
// one document /status and the status page render.
func (s *Server) snapshot() status.Snapshot {
	p := s.opts.Provider
	if p == nil {
		return status.Snapshot{Version: version.Get().Version, NotReady: "starting"}
	}
	snap := p.Status()
	if !snap.Ready {
		snap.NotReady = NotReadyReason(p)
	}
	return snap
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	snap := s.snapshot()
	b, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		s.log.Error("encode status", zap.Error(err))
		http.Error(w, "cannot encode status", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// Start binds the listen address and serves in a background goroutine. A
// bind error (port in use, bad address) is returned here.
func (s *Server) Start() error {
	addr, err := s.bg.Start(s.opts.Addr)
	if errors.Is(err, httpserve.ErrStarted) {
		return ErrStarted
	}
	if err != nil {
		return fmt.Errorf("httpapi: listen %s: %w", s.opts.Addr, err)
	}
	s.log.Info("listening", zap.String("addr", addr.String()))
	return nil
}

// Addr returns the bound address ("" before Start): with port 0 the port
// the system chose.
func (s *Server) Addr() string { return s.bg.Addr() }

// Shutdown stops accepting connections, waits for in-flight requests until
// ctx is done, and returns once the serving goroutine has exited. Calling
// it on a server never started is a no-op.
func (s *Server) Shutdown(ctx context.Context) error { return s.bg.Shutdown(ctx, nil) }

// NewBuildInfoCollector returns the gauge ngit_sync_build_info{version,
// commit,date,goversion} = 1.
func NewBuildInfoCollector(b version.Build) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ngit_sync_build_info",
		Help: "Build information of the running grasp-sync binary; always 1.",
	}, []string{"version", "commit", "date", "goversion"})
	g.WithLabelValues(b.Version, b.Commit, b.Date, b.GoVersion).Set(1)
	return g
}
