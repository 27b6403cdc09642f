package main

import (
	"context"
	"errors"
	"strings"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/sidecar"
	"github.com/grasp-sync/grasp-sync/internal/strfrypolicy"
	"github.com/grasp-sync/grasp-sync/internal/version"
)

func (e *env) strfryPolicyCommand() *cli.Command {
	return &cli.Command{
		Name:  "strfry-policy",
		Usage: "strfry write-policy plugin: accept what a GRASP-01 relay accepts, by the sidecar's hosting rules",
		Description: "strfry starts it (strfry.conf: relay.writePolicy.plugin = \"grasp-sync strfry-policy\")\n" +
			"and writes one JSON request a line to its standard input; it answers one JSON line each on\n" +
			"standard output and logs to standard error. It accepts repository announcements that list\n" +
			"service_domain in clone and relays, and events about those repositories; it reads own_relay\n" +
			"(strfry itself) at start for the announcements and root events already stored. Settings as\n" +
			"for run: GRASP_SYNC_* variables (strfry passes its environment on) or --config FILE.",
		Flags:  config.Flags(),
		Action: e.strfryPolicyAction,
	}
}

func (e *env) strfryPolicyAction(c *cli.Context) error {
	cfg, err := config.FromCLI(c)
	if err != nil {
		return err
	}
	if err := cfg.ValidateStrfryPolicy(); err != nil {
		return errors.New(config.Detail(err))
	}
	log, err := newLogger(cfg.Log, e.stderr)
	if err != nil {
		return err
	}
	log = log.Named("strfry-policy")
	defer func() { _ = log.Sync() }()
	log.Info("starting grasp-sync strfry-policy", zap.String("version", version.Get().Version),
		zap.String("own_relay", cfg.OwnRelay), zap.String("service_domain", cfg.ServiceDomain),
		zap.Bool("host_all", cfg.Sync.HostAll))
	e.typosReported = true
	for _, typo := range e.envTypos(c.App.Commands) {
		log.Warn("unknown environment variable ignored (see grasp-sync strfry-policy --help for the names)",
			zap.String("variable", typo.name), zap.String("did_you_mean", typo.suggestion))
	}
	p := strfrypolicy.New(strfrypolicy.Config{
		Settings:       cfg.StrfryPolicy,
		OwnRelay:       cfg.OwnRelay,
		ServiceDomain:  cfg.ServiceDomain,
		HostAll:        cfg.Sync.HostAll,
		RelayOptions:   sidecar.RelayOptions(cfg),
		ConnectTimeout: cfg.Relay.ConnectTimeout,
		PageSize:       cfg.Sync.PageSize,
		EOSETimeout:    cfg.Sync.EOSETimeout,
		ReconnectBase:  cfg.Sync.OwnReconnectBase,
		ReconnectMax:   cfg.Sync.OwnReconnectMax,
	}, log, clock.Real{})
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	if e.notify != nil {
		signals, stop := e.notify()
		defer stop()
		go func() {
			select {
			case <-signals:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	in := e.stdin
	if in == nil {
		in = strings.NewReader("")
	}
	err = p.Serve(ctx, in, e.stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
