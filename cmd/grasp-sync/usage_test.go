package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
			select {
			case <-h.engine.started:
				t.Error("engine started")
			default:
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
	if c := h.run("config", "--own-relay", "ws://127.0.0.1:1", "--purgatory.backoff", "1m,2h"); c != 0 {
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
