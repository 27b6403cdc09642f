// Package gitx runs the git command line for the purgatory: a hardened
// exec-based runner behind a small interface, input validation for values that
// become paths, refs or URLs, and the handful of git operations the purgatory
// needs (check objects, fetch objects by id, copy objects between local
// repositories, align refs).
package gitx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Sentinel errors callers branch on.
var (
	// ErrFailed wraps a git command that exited non-zero; errors.As to *ExitError for stderr.
	ErrFailed = errors.New("git command failed")
	// ErrTimeout is returned when a command ran longer than its timeout.
	ErrTimeout = errors.New("git command timed out")
	// ErrInvalid is returned for a value rejected before it reaches git
	// (identifier, npub, ref name, object id, URL, path).
	ErrInvalid = errors.New("invalid git input")
)

// Cmd is one git invocation.
type Cmd struct {
	// Dir is the working directory (a bare repository for most commands).
	Dir string
	// Config are extra `-c key=value` settings placed before the subcommand.
	Config []string
	// Args is the argument vector after `git` and the config settings.
	Args []string
	// Env are extra KEY=VALUE entries added to the clean environment.
	Env []string
	// Stdin, if set, is fed to the command.
	Stdin []byte
	// Timeout overrides the runner's default timeout when > 0.
	Timeout time.Duration
	// OutputCap overrides the runner's default cap on captured stdout and
	// stderr (each) when > 0.
	OutputCap int
}

// Result is what a command printed.
type Result struct {
	Stdout []byte
	Stderr []byte
	// Truncated is true if stdout or stderr exceeded the output cap.
	Truncated bool
}

// ExitError describes a git command that exited non-zero.
type ExitError struct {
	Args     []string
	ExitCode int
	Stderr   string
}

// Error names the command short (its subcommand and operands, no
// options; object ids counted, not listed: an error is shown on the status
// page and in /status) and git's first lines of stderr.
func (e *ExitError) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", shortArgs(e.Args), e.ExitCode, firstLines(e.Stderr, 4))
}

// shortArgs is args without options, object ids counted at the end.
func shortArgs(args []string) string {
	var out []string
	objects := 0
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "-"):
		case ValidOID(a):
			objects++
		default:
			out = append(out, a)
		}
	}
	switch objects {
	case 0:
	case 1:
		out = append(out, "(1 object)")
	default:
		out = append(out, fmt.Sprintf("(%d objects)", objects))
	}
	return strings.Join(out, " ")
}

// Unwrap makes errors.Is(err, ErrFailed) true.
func (e *ExitError) Unwrap() error { return ErrFailed }

// Runner runs git. The exec implementation is Exec; tests may fake it.
type Runner interface {
	Run(ctx context.Context, c Cmd) (Result, error)
}

// Exec runs the git binary with a clean environment and protocol
// restrictions. The zero value is not usable; use NewExec.
type Exec struct {
	// Binary is the git executable (default "git").
	Binary string
	// Timeout is the default per-command timeout (default 2m).
	Timeout time.Duration
	// OutputCap is the default cap on captured stdout and stderr, each
	// (default 16 MiB).
	OutputCap int
	// WaitDelay bounds how long to wait for output pipes after the process
	// is killed (default 5s).
	WaitDelay time.Duration
}

var _ Runner = (*Exec)(nil)

// Defaults of Exec (purgatory's git_timeout and output cap).
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultOutputCap = 16 << 20
)

// NewExec returns an Exec with the given default timeout (DefaultTimeout
// when not positive) and the other defaults filled in.
func NewExec(timeout time.Duration) *Exec {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Exec{Binary: "git", Timeout: timeout, OutputCap: DefaultOutputCap, WaitDelay: 5 * time.Second}
}

// hardening are the -c settings every command gets: no credential helper,
// only network transports an announcement may name, no repository hooks, no
// redirects. safe.directory=* because a sidecar shares the relay's git
// directory and often runs as another user; the paths it works on are
// built by RepoPath inside the configured directory.
var hardening = []string{
	"safe.directory=*",
	"credential.helper=",
	"protocol.allow=never",
	"protocol.https.allow=always",
	"protocol.http.allow=always",
	"protocol.git.allow=always",
	"core.hooksPath=/dev/null",
	"core.askPass=",
	"http.followRedirects=false",
}

// Run implements Runner.
func (e *Exec) Run(ctx context.Context, c Cmd) (Result, error) {
	timeout := e.Timeout
	if c.Timeout > 0 {
		timeout = c.Timeout
	}
	limit := e.OutputCap
	if c.OutputCap > 0 {
		limit = c.OutputCap
	}
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	bin := e.Binary
	if bin == "" {
		bin = "git"
	}
	args := make([]string, 0, 2*(len(hardening)+len(c.Config))+len(c.Args))
	for _, kv := range hardening {
		args = append(args, "-c", kv)
	}
	for _, kv := range c.Config {
		args = append(args, "-c", kv)
	}
	args = append(args, c.Args...)

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(CleanEnv(), c.Env...)
	cmd.WaitDelay = e.WaitDelay
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	stdout := &capped{limit: limit}
	stderr := &capped{limit: limit}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Truncated: stdout.over || stderr.over}
	if err == nil {
		return res, nil
	}
	if cctx.Err() != nil && ctx.Err() == nil {
		return res, fmt.Errorf("%w after %s: git %s", ErrTimeout, timeout, strings.Join(c.Args, " "))
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	var xe *exec.ExitError
	if errors.As(err, &xe) {
		return res, &ExitError{Args: c.Args, ExitCode: xe.ExitCode(), Stderr: string(res.Stderr)}
	}
	return res, fmt.Errorf("run git %s: %w", strings.Join(c.Args, " "), err)
}

// CleanEnv is the environment git runs with: PATH, HOME, TMPDIR, proxy and
// CA settings from the process, a C locale (stable error texts), no terminal
// prompts, no system or global git config (no url rewrites, helpers or
// hooks from the host), and none of the inherited GIT_* variables.
func CleanEnv() []string {
	env := []string{"GIT_TERMINAL_PROMPT=0", "LC_ALL=C", "LANG=C", "GIT_ASKPASS=", "SSH_ASKPASS=",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	for _, key := range []string{"PATH", "HOME", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
		"http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR"} {
		if v, ok := os.LookupEnv(key); ok {
			env = append(env, key+"="+v)
		}
	}
	return env
}

// capped is an io.Writer keeping at most limit bytes.
type capped struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.limit - c.buf.Len()
	if room <= 0 {
		c.over = c.over || len(p) > 0
		return len(p), nil
	}
	if len(p) > room {
		c.buf.Write(p[:room])
		c.over = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

var _ io.Writer = (*capped)(nil)

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
