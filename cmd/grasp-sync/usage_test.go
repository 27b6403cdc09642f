package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/grasp-sync/grasp-sync/internal/config"
)

func TestUsageErrorsAreOneLineWithHint(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run", "--own-relay", "ws://x", "--health.backoff-base", "5"}, nil,
			`grasp-sync: --health.backoff-base: invalid value "5" (a duration needs a unit: 500ms, 5s, 2m, 1h); see grasp-sync run --help`},
		{[]string{"--own-relay", "ws://x", "--own-rely", "ws://y"}, nil,
			`grasp-sync: unknown flag --own-rely (did you mean --own-relay?); see grasp-sync run --help`},
		{[]string{"check", "--own-relay", "ws://x", "--sync.page-size", "many"}, nil,
			`grasp-sync: --sync.page-size: invalid value "many" (a whole number); see grasp-sync check --help`},
		{[]string{"run", "ws://x"}, nil,
			`grasp-sync: unexpected argument "ws://x" (settings are flags: --own-relay ws://…); see grasp-sync run --help`},
		{[]string{"check", "--own-relay", "ws://x", "extra"}, nil,
			`grasp-sync: unexpected argument "extra" (settings are flags: --own-relay ws://…); see grasp-sync check --help`},
		{[]string{"--own-relay"}, nil,
			`grasp-sync: --own-relay needs a value; see grasp-sync run --help`},
		// No suggestion when no flag is close.
		{[]string{"--own-relay", "ws://x", "--bogus"}, nil,
			`grasp-sync: unknown flag --bogus; see grasp-sync run --help`},
		{[]string{"status", "--timeout", "4"}, nil,
			`grasp-sync: --timeout: invalid value "4" (a duration needs a unit: 500ms, 5s, 2m, 1h); see grasp-sync status --help`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newHarness(t)
			if c := h.run(tt.args...); c != 1 {
				t.Errorf("exit code %d", c)
			}
			got := h.stderr.String() + h.stdout.String()
			if lines := strings.Count(got, "\n"); lines > 3 {
				t.Errorf("%d lines of output, want at most 3:\n%s", lines, got)
			}
			if strings.TrimSpace(got) != tt.want {
				t.Errorf("output\n%s\nwant\n%s", got, tt.want)
			}
			if h.engineStarted() {
				t.Error("engine started")
			}
		})
	}
}

func TestUsageErrorFromEnvironment(t *testing.T) {
	t.Setenv("GRASP_SYNC_HEALTH_BACKOFF_BASE", "5")
	h := newHarness(t)
	if c := h.run("--own-relay", "ws://x"); c != 1 {
		t.Errorf("exit code %d", c)
	}
	want := `grasp-sync: GRASP_SYNC_HEALTH_BACKOFF_BASE: invalid value "5" for --health.backoff-base (a duration needs a unit: 500ms, 5s, 2m, 1h); see grasp-sync run --help` + "\n"
	if got := h.stderr.String() + h.stdout.String(); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestUnknownEnvironmentVariableWarned(t *testing.T) {
	h := newHarness(t)
	h.env.environment = []string{"GRASP_SYNC_OWN_RELAAY=ws://typo", "GRASP_SYNC_LISTEN=127.0.0.1:0", "HOME=/root", config.EnvAuthKey + "="}
	h.engine.runErr = errors.New("stop here")
	if c := h.run("--own-relay", "ws://x", "--listen", "127.0.0.1:0"); c != 1 {
		t.Errorf("exit code %d", c)
	}
	out := h.stderr.String()
	if !strings.Contains(out, `"unknown environment variable ignored`) || !strings.Contains(out, `"variable":"GRASP_SYNC_OWN_RELAAY","did_you_mean":"GRASP_SYNC_OWN_RELAY"`) {
		t.Errorf("no warning for GRASP_SYNC_OWN_RELAAY:\n%s", out)
	}
	if strings.Count(out, "unknown environment variable") != 1 {
		t.Errorf("known variables warned too:\n%s", out)
	}
}

// A misspelled variable that leaves the configuration invalid is named
// with the error it explains.
func TestUnknownEnvironmentVariableExplainsError(t *testing.T) {
	for _, cmd := range []string{"run", "check", "config"} {
		h := newHarness(t)
		h.env.environment = []string{"GRASP_SYNC_OWN_RELAYY=ws://typo"}
		if c := h.run(cmd); c != 1 {
			t.Errorf("%s: exit code %d", cmd, c)
		}
		want := `grasp-sync: own_relay (--own-relay, GRASP_SYNC_OWN_RELAY): is required, got ""` + "\n" +
			"grasp-sync: unknown environment variable GRASP_SYNC_OWN_RELAYY ignored (did you mean GRASP_SYNC_OWN_RELAY?)\n"
		if got := h.stderr.String() + h.stdout.String(); got != want {
			t.Errorf("%s: output\n%s\nwant\n%s", cmd, got, want)
		}
	}
}

func TestCheckWarnsAboutUnknownEnvironmentVariable(t *testing.T) {
	url := startOwnRelay(t, false)
	h := newHarness(t)
	h.env.environment = []string{"GRASP_SYNC_GIT_DIRR=/srv/git", "GRASP_SYNC_XYZZY=1"}
	if c := h.run("check", "--own-relay", url); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	out := h.stdout.String()
	for _, want := range []string{
		"unknown environment variable GRASP_SYNC_GIT_DIRR ignored (did you mean GRASP_SYNC_GIT_DIR?)",
		"unknown environment variable GRASP_SYNC_XYZZY ignored",
	} {
		if !regexp.MustCompile(`(?m)^  warning +` + regexp.QuoteMeta(want) + `$`).MatchString(out) {
			t.Errorf("report lacks the warning %q:\n%s", want, out)
		}
	}
	if h.stderr.String() != "" {
		t.Errorf("stderr %q", h.stderr)
	}
}

// stripComments drops the source comments so two renderings compare equal.
func stripComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, " # "); i >= 0 {
			line = line[:i]
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func TestConfigCommandRoundTrips(t *testing.T) {
	h := newHarness(t)
	// One setting of each kind away from its default.
	if c := h.run("config", "--own-relay", "ws://127.0.0.1:1", "--purgatory.backoff", "1m,2h",
		"--bootstrap-relay", "wss://a.example,wss://b.example", "--health.jitter", "0.35", "--sync.page-size", "321",
		"--purgatory.create-missing-repos", "--git-dir", "/srv/git", "--health.backoff-base", "1500ms"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	out := h.stdout.String()
	var generic map[string]any
	if err := yaml.Unmarshal([]byte(out), &generic); err != nil {
		t.Fatalf("not valid YAML: %v\n%s", err, out)
	}
	for _, want := range []string{
		"own_relay: ws://127.0.0.1:1 # flag --own-relay\n",
		"shutdown_grace: 10s # default\n",
		"backoff: # flag --purgatory.backoff\n    - 1m\n    - 2h\n",
		"jitter: 0.35 # flag --health.jitter\n",
		"backoff_base: 1.5s # flag --health.backoff-base\n",
		"create_missing_repos: true # flag --purgatory.create-missing-repos\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0s #") && strings.Contains(out, "m0s") {
		t.Errorf("durations not in short form:\n%s", out)
	}
	// --config accepts it back unchanged and yields the same configuration.
	path := filepath.Join(t.TempDir(), "effective.yml")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := config.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	h2 := newHarness(t)
	if c := h2.run("config", "--config", path); c != 0 {
		t.Fatalf("config --config: exit %d: %s", c, h2.stderr)
	}
	again := h2.stdout.String()
	if stripComments(again) != stripComments(out) {
		t.Errorf("rendering changed after a round trip:\n%s\n---\n%s", out, again)
	}
	if !strings.Contains(again, "own_relay: ws://127.0.0.1:1 # file\n") {
		t.Errorf("source of own_relay not the file:\n%s", again)
	}
	got, err := config.Parse(strings.NewReader(again))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("configuration changed: %+v vs %+v", got, want)
	}
	if want.Sync.PageSize != 321 || len(want.BootstrapRelays) != 2 || want.GitDir != "/srv/git" {
		t.Errorf("the flags did not reach the printed configuration: %+v", want)
	}
}

func TestConfigCommandRedactsKey(t *testing.T) {
	key := strings.Repeat("3", 64)
	t.Setenv(config.EnvAuthKey, key)
	h := newHarness(t)
	if c := h.run("config", "--own-relay", "ws://127.0.0.1:1"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	out := h.stdout.String()
	if strings.Contains(out, key) {
		t.Fatal("the secret key is printed")
	}
	if !strings.Contains(out, "# auth key: loaded from "+config.EnvAuthKey+" (redacted") {
		t.Errorf("the key's source is not said:\n%s", out)
	}
}

// The debug line with the configuration reads like `grasp-sync config`:
// YAML keys and durations with units, not Go field names and nanoseconds.
func TestRunLogsConfigurationWithUnits(t *testing.T) {
	key := strings.Repeat("3", 64)
	t.Setenv(config.EnvAuthKey, key)
	h := newHarness(t)
	h.engine.runErr = errors.New("stop here")
	if c := h.run("--own-relay", "ws://x", "--listen", "127.0.0.1:0", "--log.level", "debug"); c != 1 {
		t.Errorf("exit code %d", c)
	}
	var line string
	for _, l := range strings.Split(h.stderr.String(), "\n") {
		if strings.Contains(l, `"msg":"configuration"`) {
			line = l
		}
	}
	for _, want := range []string{`"shutdown_grace":"10s"`, `"backoff_base":"5s"`, `"own_relay":"ws://x"`, `"key":"[redacted]"`} {
		if !strings.Contains(line, want) {
			t.Errorf("configuration line lacks %s:\n%s", want, line)
		}
	}
	if strings.Contains(line, "10000000000") || strings.Contains(line, "ShutdownGrace") || strings.Contains(line, key) {
		t.Errorf("configuration line in Go's terms or with the key:\n%s", line)
	}
}
