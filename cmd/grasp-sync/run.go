package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/memlimit"
	"github.com/grasp-sync/grasp-sync/internal/procs"
	"github.com/grasp-sync/grasp-sync/internal/profiling"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/internal/version"
)

// Engine is what run drives: the sidecar. It also answers the HTTP surface.
type Engine interface {
	// Run blocks until ctx is cancelled and shutdown has finished.
	Run(ctx context.Context) error
	Status() status.Snapshot
	Ready() bool
}

type engineFactory func(cfg *config.Config, log *zap.Logger, reg prometheus.Registerer) (Engine, error)

// hardStopFactor × shutdown_grace after the first signal, a shutdown that
// has not finished is abandoned with exit status 1.
const hardStopFactor = 2

func (e *env) runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "run the sync sidecar (default command)",
		Description: "Connects to the own relay, discovers the repositories it hosts, syncs their events\n" +
			"from other relays and publishes them into it. SIGTERM/SIGINT shut down gracefully;\n" +
			"a second signal exits at once.",
		Flags: append(config.Flags(),
			// The end-to-end benchmark profiles the sidecar it measures.
			&cli.StringFlag{Name: "cpuprofile", Hidden: true, Usage: "write a Go CPU profile to this file until exit"},
			&cli.StringFlag{Name: "memprofile", Hidden: true, Usage: "write a Go heap profile to this file at exit, and one taken near the highest heap to FILE.peak"},
		),
		Action: e.runAction,
	}
}

func (e *env) runAction(c *cli.Context) (err error) {
	cfg, err := config.FromCLI(c)
	if err != nil {
		return err
	}
	stopProfiling, err := profiling.Start(c.String("cpuprofile"), c.String("memprofile"), e.stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopProfiling()) }()
	log, err := newLogger(cfg.Log, e.stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	build := version.Get()
	log.Info("starting grasp-sync",
		zap.String("version", build.Version), zap.String("commit", build.Commit),
		zap.String("own_relay", cfg.OwnRelay), zap.String("listen", cfg.Listen),
		zap.String("git_dir", cfg.GitDir), zap.Bool("purgatory", cfg.PurgatoryActive()),
		zap.Bool("auth_key", !cfg.Auth.Key.IsZero()))
	// As `grasp-sync config` prints it: YAML keys, durations with units,
	// the secret key redacted.
	if values, err := cfg.Values(); err == nil {
		log.Debug("configuration", zap.Any("config", values))
	}
	if limit, src := memlimit.Apply(cfg.Memory.LimitMiB); src != memlimit.SourceNone {
		log.Info("soft memory limit", zap.Int64("bytes", limit), zap.String("source", src))
	}
	n, src := procs.Apply(cfg.CPU.MaxProcs)
	log.Info("threads running Go code (GOMAXPROCS)", zap.Int("max_procs", n), zap.String("source", src))
	if h := memlimit.StartHeadroom(cfg.Memory.GCHeadroomMiB); h != nil {
		defer h.Stop()
		log.Info("garbage collector headroom over the live heap", zap.Int("mib", cfg.Memory.GCHeadroomMiB))
	}
	e.typosReported = true
	for _, typo := range e.envTypos(c.App.Commands) {
		log.Warn("unknown environment variable ignored (see grasp-sync run --help for the names)",
			zap.String("variable", typo.name), zap.String("did_you_mean", typo.suggestion))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		httpapi.NewBuildInfoCollector(build),
	)

	eng, err := e.newEngine(cfg, log, reg)
	if err != nil {
		return fmt.Errorf("start sidecar: %w", err)
	}
	srv := httpapi.New(httpapi.Options{Addr: cfg.Listen, Provider: eng, Gatherer: reg, Log: log})
	if err := srv.Start(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	stopSignals := e.watchSignals(cancel, cfg.ShutdownGrace, log)
	defer stopSignals()

	runErr := eng.Run(ctx)
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	if runErr != nil {
		log.Error("sidecar stopped", zap.Error(runErr))
	}

	shutdownCtx, cancelShutdown := context.WithTimeout(context.WithoutCancel(c.Context), cfg.ShutdownGrace)
	defer cancelShutdown()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("http shutdown", zap.Error(err))
	}
	if runErr != nil {
		return fmt.Errorf("sidecar: %w", runErr)
	}
	log.Info("stopped")
	return nil
}

// watchSignals cancels the run on the first SIGINT/SIGTERM and exits at
// once on a second one, or when shutdown takes more than
// hardStopFactor×grace. The returned function stops watching.
func (e *env) watchSignals(cancel context.CancelFunc, grace time.Duration, log *zap.Logger) (stop func()) {
	signals, stopNotify := e.notify()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var sig os.Signal
		select {
		case sig = <-signals:
		case <-done:
			return
		}
		log.Info("signal received, shutting down; send it again to exit at once",
			zap.Stringer("signal", sig), zap.Duration("grace", grace))
		cancel()
		hard := time.NewTimer(hardStopFactor * grace)
		defer hard.Stop()
		select {
		case sig = <-signals:
			log.Error("second signal, exiting immediately", zap.Stringer("signal", sig))
			_ = log.Sync()
			e.exit(1)
		case <-hard.C:
			log.Error("shutdown did not finish in time, exiting", zap.Duration("limit", hardStopFactor*grace))
			_ = log.Sync()
			e.exit(1)
		case <-done:
		}
	}()
	return func() {
		close(done)
		stopNotify()
		<-finished
	}
}
