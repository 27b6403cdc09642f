package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/bench"
	"github.com/grasp-sync/grasp-sync/internal/config"
)

func init() { extraCommands = append(extraCommands, benchCommand()) }

// benchCommand runs the end-to-end benchmark on 127.0.0.1.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "end-to-end benchmark on 127.0.0.1: remote relays with generated NIP-34 repositories, a grasp-sync process syncing them into an own relay",
		Description: "Runs own-relay-ingest, sidecar, sidecar-resync, sidecar-req-only and baseline (see BENCHMARKS.md)\n" +
			"and prints a table (and JSON with --json). The sidecar is this binary, run as a separate process.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Value: "small", Usage: "size: " + strings.Join(bench.ProfileNames(), ", ")},
			&cli.IntFlag{Name: "events", Usage: "override the profile's number of events"},
			&cli.IntFlag{Name: "relays", Usage: "override the profile's number of remote relays"},
			&cli.IntFlag{Name: "repos", Usage: "override the profile's number of repositories"},
			&cli.Uint64Flag{Name: "seed", Value: bench.DefaultSeed, Usage: "universe seed"},
			&cli.StringSliceFlag{Name: "run", Usage: "runs to measure (repeatable): " + strings.Join(bench.AllRuns, ", ") + " (default: all)"},
			&cli.DurationFlag{Name: "timeout", Value: bench.DefaultTimeout, Usage: "give up on a run after this long"},
			&cli.DurationFlag{Name: "batch-window", Value: bench.DefaultBatchWindow, Usage: "the sidecar's sync.batch_window"},
			&cli.StringSliceFlag{Name: "sidecar-arg", Usage: "extra flag for the sidecar process, e.g. --sidecar-arg=--limits.relay-event-rate=100000 (repeatable)"},
			&cli.StringFlag{Name: "binary", Usage: "grasp-sync executable to run as the sidecar (default: this one)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write the sidecar run's Go CPU profile to this file"},
			&cli.StringFlag{Name: "memprofile", Usage: "write the sidecar run's Go heap profile (at exit) to this file"},
			&cli.StringFlag{Name: "json", Usage: "also write the report as JSON to this file (- for stdout)"},
			&cli.StringFlag{Name: "workdir", Usage: "keep the sidecars' logs in this directory (default: a temporary one, removed)"},
		},
		Subcommands: []*cli.Command{benchSidecarCommand()},
		Action:      benchAction,
	}
}

func benchAction(c *cli.Context) error {
	prof, ok := bench.Profiles[c.String("profile")]
	if !ok {
		return fmt.Errorf("bench: unknown profile %q (want one of %s)", c.String("profile"), strings.Join(bench.ProfileNames(), ", "))
	}
	if n := c.Int("events"); n > 0 {
		prof.Events = n
		prof.Name += "-custom"
	}
	if n := c.Int("relays"); n > 0 {
		prof.Relays = n
		prof.Name = strings.TrimSuffix(prof.Name, "-custom") + "-custom"
	}
	if n := c.Int("repos"); n > 0 {
		prof.Repos = n
		prof.Name = strings.TrimSuffix(prof.Name, "-custom") + "-custom"
	}
	binary := c.String("binary")
	if binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: find own executable: %w", err)
		}
		binary = exe
	}
	out := c.App.Writer
	opts := bench.Options{
		Profile:     prof,
		Seed:        c.Uint64("seed"),
		Binary:      binary,
		WorkDir:     c.String("workdir"),
		Runs:        c.StringSlice("run"),
		Timeout:     c.Duration("timeout"),
		BatchWindow: c.Duration("batch-window"),
		SidecarArgs: c.StringSlice("sidecar-arg"),
		CPUProfile:  c.String("cpuprofile"),
		MemProfile:  c.String("memprofile"),
		Progress:    out,
	}
	if opts.WorkDir != "" {
		if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	rep, runErr := bench.Run(c.Context, opts)
	if rep != nil && len(rep.Runs) > 0 {
		fmt.Fprintln(out)
		if err := rep.WriteTable(out); err != nil {
			return err
		}
		if err := writeBenchJSON(c.String("json"), rep, out); err != nil {
			return err
		}
	}
	return runErr
}

func writeBenchJSON(path string, rep *bench.Report, stdout io.Writer) error {
	switch path {
	case "":
		return nil
	case "-":
		return rep.WriteJSON(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return f.Close()
}

// benchSidecarCommand is `run` with a CPU profile and/or a heap profile:
// the benchmark starts the sidecar this way when asked for a profile.
func benchSidecarCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile to this file until exit"},
		&cli.StringFlag{Name: "memprofile", Usage: "write a Go heap profile to this file at exit, and one taken at the highest heap seen to FILE.peak"},
	}, config.Flags()...)
	return &cli.Command{
		Name:   "sidecar",
		Usage:  "run the sidecar (like `run`) while profiling it; used by bench --cpuprofile/--memprofile",
		Hidden: true,
		Flags:  flags,
		Action: func(c *cli.Context) (err error) {
			if path := c.String("cpuprofile"); path != "" {
				f, err := os.Create(path)
				if err != nil {
					return fmt.Errorf("bench sidecar: %w", err)
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					f.Close()
					return fmt.Errorf("bench sidecar: %w", err)
				}
				defer func() {
					pprof.StopCPUProfile()
					err = errors.Join(err, f.Close())
				}()
			}
			if path := c.String("memprofile"); path != "" {
				stop := watchPeakHeap(path + ".peak")
				defer func() { stop(); err = errors.Join(err, writeHeapProfile(path)) }()
			}
			return newEnv().runAction(c)
		},
	}
}

// watchPeakHeap writes a heap profile to path each time the heap in use
// passes its highest value so far by 10 %, so that the file ends up showing
// what was live near the peak. Call the returned function to stop.
func watchPeakHeap(path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		var peak, peakSys, peakStack uint64
		defer func() {
			fmt.Fprintf(os.Stderr, "bench sidecar: peak heap in use %d MiB, heap from the OS %d MiB, stacks %d MiB\n",
				peak>>20, peakSys>>20, peakStack>>20)
		}()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peakSys = max(peakSys, ms.HeapSys)
			peakStack = max(peakStack, ms.StackSys)
			if ms.HeapInuse < peak+peak/10 {
				continue
			}
			peak = ms.HeapInuse
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
	return func() { close(done); <-finished }
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench sidecar: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("bench sidecar: %w", err)
	}
	return f.Close()
}
