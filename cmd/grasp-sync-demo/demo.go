package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/demo"
)

// demoCommand runs the sidecar against in-process relays on 127.0.0.1.
func demoCommand() *cli.Command {
	def := demo.DefaultOptions()
	return &cli.Command{
		Name:  "demo",
		Usage: "sync seeded NIP-34 repositories between in-process relays on 127.0.0.1 and print what happened (default command)",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "repos", Value: def.Repos, Usage: "repositories to seed on the remote relays"},
			&cli.DurationFlag{Name: "timeout", Value: def.Timeout, Usage: "give up after this long"},
		},
		Action: func(c *cli.Context) error {
			opts := demo.DefaultOptions()
			opts.Repos = c.Int("repos")
			opts.Timeout = c.Duration("timeout")
			if _, err := demo.Run(c.Context, c.App.Writer, opts); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			return nil
		},
	}
}
