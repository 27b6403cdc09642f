// Command grasp-sync is the sync sidecar for Nostr git relays (NIP-34 /
// GRASP). Subcommands: run (default), check, status, config, version, and
// strfry-policy (strfry's write-policy plugin).
//
// Configuration flags and their GRASP_SYNC_* environment twins are defined
// by the config package (config.Flags); see CONFIGURATION.md.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/version"
)

func main() {
	os.Exit(newEnv().main(os.Args))
}

// env is everything the commands take from the process, injectable in tests.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// newEngine builds the sidecar for run.
	newEngine engineFactory
	// notify subscribes to SIGINT/SIGTERM; stop undoes it.
	notify func() (signals <-chan os.Signal, stop func())
	// exit ends the process at once (second signal, stuck shutdown).
	exit func(code int)
	// environment replaces os.Environ() when not nil (unknown-variable warnings).
	environment []string
	// args is the command line main was given (where a value came from).
	args []string
	// typosReported is set once a command has reported the unknown
	// GRASP_SYNC_* variables (log, YAML header, check report); otherwise
	// main adds them to an error, which they may well explain.
	typosReported bool
}

func newEnv() *env {
	return &env{
		stdin:     os.Stdin,
		stdout:    os.Stdout,
		stderr:    os.Stderr,
		newEngine: newSidecarEngine,
		notify: func() (<-chan os.Signal, func()) {
			ch := make(chan os.Signal, 2)
			signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
			return ch, func() { signal.Stop(ch) }
		},
		exit: os.Exit,
	}
}

// exitError carries a specific exit code without urfave/cli's own printing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// app builds the command tree.
func (e *env) app() *cli.App {
	cmds := []*cli.Command{
		e.runCommand(),
		e.checkCommand(),
		e.statusCommand(),
		e.versionCommand(),
		e.configCommand(),
		e.strfryPolicyCommand(),
	}
	usageErrors(cmds)
	return &cli.App{
		Name:      "grasp-sync",
		Usage:     "sync sidecar for Nostr git relays (NIP-34 / GRASP)",
		UsageText: "grasp-sync [command] [flags]   (run is the default command)",
		Version:   version.Get().Version,
		Commands:  cmds,
		// Reached with a first word that is no command ("run" is inserted
		// otherwise, see withDefaultCommand).
		Action:    unknownCommand,
		Writer:    e.stdout,
		ErrWriter: e.stderr,
		// Errors are printed once, by main, as one line.
		ExitErrHandler:         func(*cli.Context, error) {},
		UseShortOptionHandling: false,
		Suggest:                true,
	}
}

// withDefaultCommand inserts "run" when there are no arguments or the first
// one is a flag other than help/version (`grasp-sync`,
// `grasp-sync --own-relay ws://…`). An unknown word stays an unknown command.
func (e *env) withDefaultCommand(args []string) []string {
	if len(args) > 1 {
		switch first := args[1]; {
		case first == "-h", first == "--help", first == "-v", first == "--version":
			return args
		case !strings.HasPrefix(first, "-"):
			return args
		}
	}
	return append([]string{args[0], "run"}, args[1:]...)
}

// main runs the app and returns the process exit code. Errors are printed
// as one line per problem, prefixed with "grasp-sync: "; a bad setting is
// named by its YAML key, flag and environment variable (config.Detail).
func (e *env) main(args []string) int {
	e.args = args
	app := e.app()
	err := app.Run(e.withDefaultCommand(args))
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	for _, line := range strings.Split(strings.TrimSpace(config.Detail(err)), "\n") {
		fmt.Fprintf(e.stderr, "grasp-sync: %s\n", line)
	}
	if !e.typosReported {
		for _, typo := range e.envTypos(app.Commands) {
			fmt.Fprintf(e.stderr, "grasp-sync: %s\n", typo)
		}
	}
	return code
}

func (e *env) versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print version, commit, build date, Go version and signature backend",
		Action: func(c *cli.Context) error {
			b := version.Get()
			_, err := fmt.Fprintf(e.stdout, "grasp-sync %s\ncommit:     %s\nbuilt:      %s\ngo version: %s\nsignatures: %s\n",
				b.Version, b.Commit, b.Date, b.GoVersion, ingest.SignatureBackend)
			return err
		},
	}
}
