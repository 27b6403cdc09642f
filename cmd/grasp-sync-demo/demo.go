package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/grasp-sync/grasp-sync/testkit/demo"
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
			&cli.StringFlag{Name: "log", Usage: "write the sidecar's log to `FILE` (console format, info level)"},
		},
		Action: func(c *cli.Context) error {
			opts := demo.DefaultOptions()
			opts.Repos = c.Int("repos")
			opts.Timeout = c.Duration("timeout")
			if path := c.String("log"); path != "" {
				f, err := os.Create(path)
				if err != nil {
					return fmt.Errorf("demo: --log: %w", err)
				}
				defer f.Close()
				opts.Log = fileLogger(f)
				defer func() { _ = opts.Log.Sync() }()
				fmt.Fprintf(c.App.Writer, "sidecar log: %s\n", path)
			}
			if _, err := demo.Run(c.Context, c.App.Writer, opts); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			return nil
		},
	}
}

// fileLogger logs at info in the console format, as a person reads it.
func fileLogger(f *os.File) *zap.Logger {
	ec := zap.NewDevelopmentEncoderConfig()
	ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(f), zapcore.InfoLevel))
}
