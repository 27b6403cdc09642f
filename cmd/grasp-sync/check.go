package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/check"
	"github.com/grasp-sync/grasp-sync/internal/config"
)

func (e *env) checkCommand() *cli.Command {
	flags := append(config.Flags(), &cli.DurationFlag{
		Name:    "timeout",
		Usage:   "time allowed for each probe (connect, REQ, NIP-11)",
		EnvVars: []string{config.EnvPrefix + "CHECK_TIMEOUT"},
		Value:   check.DefaultTimeout,
	})
	return &cli.Command{
		Name:  "check",
		Usage: "validate the configuration and probe the own relay and git directory; exit 0 or 1",
		Description: "Loads and validates the configuration exactly as run does, opens a WebSocket to the\n" +
			"own relay and sends one REQ, reads its NIP-11 document and checks the git directory\n" +
			"is writable. On failure prints one line and exits 1.",
		Flags:  flags,
		Action: e.checkAction,
	}
}

func (e *env) checkAction(c *cli.Context) error {
	cfg, err := config.FromCLI(c)
	if err != nil {
		return err
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return fmt.Errorf("--timeout: must be > 0, got %q", timeout)
	}
	rep, err := check.Run(c.Context, cfg, timeout, c.String(config.FlagConfig))
	if err != nil {
		return err
	}
	e.typosReported = true
	for _, typo := range e.envTypos(c.App.Commands) {
		rep.Warn("%s", typo)
	}
	return rep.Print(e.stdout)
}
