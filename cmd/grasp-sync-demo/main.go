// Command grasp-sync-demo shows and measures grasp-sync on 127.0.0.1 with
// in-process test relays; nothing needs to be installed. Subcommands: demo
// (default), world (the demo's relays and git server kept running for the
// real grasp-sync binary) and bench. It is kept apart from the grasp-sync command so that
// the shipped binary links no test relays.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/version"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// app builds the command tree.
func app(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "grasp-sync-demo",
		Usage:     "demo and end-to-end benchmark of grasp-sync on 127.0.0.1",
		UsageText: "grasp-sync-demo [command] [flags]   (demo is the default command)",
		Version:   version.Get().Version,
		Commands:  []*cli.Command{demoCommand(), worldCommand(), benchCommand()},
		Writer:    stdout,
		ErrWriter: stderr,
		// Errors are printed once, by run, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
		Suggest:        true,
	}
}

// withDefaultCommand inserts "demo" when there are no arguments or the
// first one is a flag other than help/version.
func withDefaultCommand(args []string) []string {
	if len(args) > 1 {
		switch first := args[1]; {
		case first == "-h", first == "--help", first == "-v", first == "--version":
			return args
		case !strings.HasPrefix(first, "-"):
			return args
		}
	}
	return append([]string{args[0], "demo"}, args[1:]...)
}

// run runs the app and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	err := app(stdout, stderr).Run(withDefaultCommand(args))
	if err == nil {
		return 0
	}
	code := 1
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		fmt.Fprintf(stderr, "grasp-sync-demo: %s\n", line)
	}
	return code
}
