package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/testkit/demo"
)

// worldCommand keeps the demo's relays and git server running for the
// real grasp-sync binary, and prints the command line to run it.
func worldCommand() *cli.Command {
	def := demo.DefaultWorldOptions()
	return &cli.Command{
		Name:  "world",
		Usage: "start the demo's relays and git server on 127.0.0.1, print the grasp-sync run command line that syncs them, and keep them running until interrupted",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "repos", Value: def.Repos, Usage: "repositories to seed on the remote relays"},
			&cli.StringFlag{Name: "listen", Value: def.Listen, Usage: "the sidecar's HTTP surface address in the printed command (--listen)"},
			&cli.StringFlag{Name: "git-http-listen", Value: def.GitHTTPListen, Usage: "the sidecar's git server address in the printed command (--git-http.listen; empty: none)"},
		},
		Action: func(c *cli.Context) error {
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := demo.DefaultWorldOptions()
			opts.Repos = c.Int("repos")
			opts.Listen = c.String("listen")
			opts.GitHTTPListen = c.String("git-http-listen")
			w, err := demo.StartWorld(ctx, opts)
			if err != nil {
				return fmt.Errorf("world: %w", err)
			}
			w.Describe(c.App.Writer)
			w.Watch(ctx, c.App.Writer)
			w.Close()
			fmt.Fprintf(c.App.Writer, "stopped: relays and git server closed, %s removed\n", w.Dir())
			return nil
		},
	}
}
