package netpolicy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// The git the purgatory runs (gitx.Exec behind the guard) sees none of the
// configuration an attacker-influenced environment could inject: no
// GIT_CONFIG_* or GIT_CONFIG_PARAMETERS settings, no global or system
// config (url rewrites, credential helpers), and it runs with the
// hardening settings and without terminal prompts.
func TestGitEnvironmentIsClean(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[url \"file:///etc/\"]\n\tinsteadOf = https://evil/\n[credential]\n\thelper = store\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.sshcommand'='touch /tmp/pwned'")
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "url.file:///.insteadof")
	t.Setenv("GIT_CONFIG_VALUE_0", "https://")
	t.Setenv("GIT_SSH_COMMAND", "touch /tmp/pwned")
	t.Setenv("GIT_ASKPASS", "/bin/echo")
	t.Setenv("GIT_TERMINAL_PROMPT", "1")

	p := mustPolicy(t, Options{})
	g := p.GitRunner(gitx.NewExec(30 * time.Second))
	ctx := context.Background()
	res, err := g.Run(ctx, gitx.Cmd{Dir: t.TempDir(), Args: []string{"config", "--list", "--show-origin"}})
	if err != nil {
		t.Fatal(err)
	}
	out := strings.ToLower(string(res.Stdout))
	for _, leaked := range []string{"sshcommand", "insteadof", "helper=store", ".gitconfig"} {
		if strings.Contains(out, leaked) {
			t.Errorf("git saw injected configuration %q:\n%s", leaked, out)
		}
	}
	for _, want := range []string{"credential.helper=", "protocol.allow=never", "protocol.https.allow=always", "core.hookspath=/dev/null", "http.followredirects=false"} {
		if !strings.Contains(out, want) {
			t.Errorf("git runs without %q:\n%s", want, out)
		}
	}
	env := gitx.CleanEnv()
	joined := strings.Join(env, "\n")
	for _, leaked := range []string{"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_SSH_COMMAND", "GIT_ASKPASS=/bin/echo", "GIT_TERMINAL_PROMPT=1"} {
		if strings.Contains(joined, leaked) {
			t.Errorf("clean environment carries %s", leaked)
		}
	}
	if !strings.Contains(joined, "GIT_TERMINAL_PROMPT=0") {
		t.Error("clean environment allows terminal prompts")
	}
	// A remote that starts with '-' never reaches git as an option, and a
	// refused remote never starts git.
	for _, remote := range []string{"--upload-pack=touch /tmp/pwned", "-oProxyCommand=x", "ext::sh -c x", "file:///etc/passwd"} {
		if _, err := g.Run(ctx, gitx.Cmd{Dir: t.TempDir(), Args: []string{"ls-remote", "--", remote}}); !errors.Is(err, ErrRefused) {
			t.Errorf("ls-remote %q: %v", remote, err)
		}
	}
}
