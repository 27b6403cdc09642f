package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/testkit/bench"
)

// benchCommand runs the end-to-end benchmark on 127.0.0.1.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "end-to-end benchmark on 127.0.0.1: remote relays with generated NIP-34 repositories, a grasp-sync process syncing them into an own relay",
		Description: "Runs own-relay-ingest, sidecar, sidecar-resync, sidecar-state, state-restart, sidecar-req-only, baseline and, with --strfry, strfry-sync (see BENCHMARKS.md)\n" +
			"and prints a table (and JSON with --json). The sidecar is the grasp-sync command, run as a separate\n" +
			"process: --binary, else a grasp-sync next to this command, else one built with the go tool.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Value: "small", Usage: "size: " + strings.Join(bench.ProfileNames(), ", ")},
			&cli.IntFlag{Name: "events", Usage: "override the profile's number of events"},
			&cli.IntFlag{Name: "relays", Usage: "override the profile's number of remote relays"},
			&cli.IntFlag{Name: "repos", Usage: "override the profile's number of repositories"},
			&cli.Uint64Flag{Name: "seed", Value: bench.DefaultSeed, Usage: "universe seed"},
			&cli.StringSliceFlag{Name: "run", Usage: "runs to measure (repeatable): " + strings.Join(bench.AllRuns, ", ") + " (default: all)"},
			&cli.DurationFlag{Name: "timeout", Value: bench.DefaultTimeout, Usage: "give up on a run after this long"},
			&cli.DurationFlag{Name: "batch-window", Usage: "the sidecar's sync.batch_window (default: the sidecar's own default, as every setting)"},
			&cli.DurationFlag{Name: "delay", Usage: "one-way latency of every remote relay (a round trip is twice this), e.g. 50ms; the own relay stays local"},
			&cli.StringSliceFlag{Name: "sidecar-arg", Usage: "extra flag for the sidecar process, e.g. --sidecar-arg=--limits.relay-event-rate=100000 (repeatable)"},
			&cli.StringFlag{Name: "binary", Usage: "grasp-sync executable to run as the sidecar (default: grasp-sync next to this command, else built from source)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write the sidecar run's Go CPU profile to this file"},
			&cli.StringFlag{Name: "memprofile", Usage: "write the sidecar run's Go heap profile (at exit) to this file"},
			&cli.StringFlag{Name: "json", Usage: "also write the report as JSON to this file (- for stdout)"},
			&cli.StringFlag{Name: "strfry", EnvVars: []string{"GRASP_SYNC_STRFRY"}, Usage: "path of a strfry binary: the remote and own relays are strfry processes loaded with strfry import (--delay puts a TCP proxy in front of each remote), and the strfry-sync run is added"},
			&cli.IntFlag{Name: "window", Value: bench.DefaultWindow, Usage: "EVENTs awaiting their OK in own-relay-ingest (the own relay's ingest ceiling) and the baseline"},
			&cli.StringFlag{Name: "workdir", Usage: "keep the sidecars' logs in this directory (default: a temporary one, removed)"},
		},
		Action: benchAction,
	}
}

func benchAction(c *cli.Context) error {
	prof, ok := bench.Profiles[c.String("profile")]
	if !ok {
		return fmt.Errorf("bench: unknown profile %q (want one of %s)", c.String("profile"), strings.Join(bench.ProfileNames(), ", "))
	}
	opts := bench.Options{
		Profile:     prof.Resized(c.Int("events"), c.Int("relays"), c.Int("repos")),
		Seed:        c.Uint64("seed"),
		Binary:      c.String("binary"),
		WorkDir:     c.String("workdir"),
		Runs:        c.StringSlice("run"),
		Timeout:     c.Duration("timeout"),
		BatchWindow: c.Duration("batch-window"),
		Delay:       c.Duration("delay"),
		SidecarArgs: c.StringSlice("sidecar-arg"),
		CPUProfile:  c.String("cpuprofile"),
		MemProfile:  c.String("memprofile"),
		Strfry:      c.String("strfry"),
		Window:      c.Int("window"),
		Progress:    c.App.Writer,
	}
	if opts.WorkDir != "" {
		if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if opts.Binary == "" {
		dir, err := os.MkdirTemp("", "grasp-sync-bench-bin-")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		if opts.Binary, err = bench.FindBinary(c.Context, dir); err != nil {
			return err
		}
	}
	out := c.App.Writer
	rep, runErr := bench.Run(c.Context, opts)
	if rep == nil || len(rep.Runs) == 0 {
		return runErr
	}
	fmt.Fprintln(out)
	if err := rep.WriteTable(out); err != nil {
		return err
	}
	switch path := c.String("json"); path {
	case "":
	case "-":
		if err := rep.WriteJSON(out); err != nil {
			return err
		}
	default:
		if err := rep.WriteJSONFile(path); err != nil {
			return err
		}
	}
	return runErr
}
