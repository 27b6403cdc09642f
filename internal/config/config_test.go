package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite ../CONFIGURATION.md's generated part and ../grasp-sync.example.yml")

func validDefault() *Config {
	c := Default()
	c.OwnRelay = "ws://relay:7777"
	return c
}

func TestDefaultIsValidOnceOwnRelayIsSet(t *testing.T) {
	if err := validDefault().Validate(); err != nil {
		t.Fatalf("defaults with own_relay: %v", err)
	}
	err := Default().Validate()
	if got, want := fmt.Sprint(err), `own_relay: is required, got ""`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) = false", err)
	}
}

func TestInvalidFiles(t *testing.T) {
	want := map[string]string{
		"invalid-unknown-key.yml":             `testdata/invalid-unknown-key.yml: config file: line 3: field batch_windw not found in type config.Sync`,
		"invalid-unknown-top-key.yml":         `testdata/invalid-unknown-top-key.yml: config file: line 2: field listen_addr not found in type config.Config`,
		"invalid-batch-window-zero.yml":       `sync.batch_window: must be > 0, got "0s"`,
		"invalid-duration-without-unit.yml":   "testdata/invalid-duration-without-unit.yml: config file: line 3: health.tick (--health.tick, GRASP_SYNC_HEALTH_TICK): cannot unmarshal !!int `2` into time.Duration",
		"invalid-missing-own-relay.yml":       `own_relay: is required, got ""`,
		"invalid-own-relay-scheme.yml":        `own_relay: must be a ws:// or wss:// URL, got "https://relay.example.com"`,
		"invalid-bootstrap-relay-scheme.yml":  `bootstrap_relays[1]: must be a ws:// or wss:// URL, got "relay.nostr.band"`,
		"invalid-log-level.yml":               `log.level: must be one of debug, info, warn, error, got "verbose"`,
		"invalid-log-format.yml":              `log.format: must be json or console, got "text"`,
		"invalid-max-message-bytes.yml":       `relay.max_message_bytes: must be >= 1048576, got "65536"`,
		"invalid-pong-timeout.yml":            `relay.pong_timeout: must be > relay.ping_interval (30s), got "20s"`,
		"invalid-read-pause.yml":              `relay.read_pause: must be <= 100ms, got "2s"`,
		"invalid-jitter.yml":                  `health.jitter: must be in [0, 1), got "1.5"`,
		"invalid-full-resync-order.yml":       `sync.full_resync_max: must be >= sync.full_resync_min (25h), got "23h"`,
		"invalid-purgatory-backoff-empty.yml": `purgatory.backoff: must not be empty, got ""`,
		"invalid-dial-allow.yml":              `dial.allow[1]: must be a CIDR, an IP address or a host name, got "not a host!"`,
		"invalid-service-domain.yml":          `service_domain: must be HOST or HOST:PORT (no scheme, no path), got "https://git.example.com/"`,
		"invalid-listen.yml":                  `listen: must be HOST:PORT or :PORT, got "9090"`,
		"invalid-verify-workers.yml":          `sync.verify_workers: must be >= 0 (0 means GOMAXPROCS), got "-1"`,
		"invalid-relay-queue-bytes.yml":       `limits.relay_queue_bytes: must be >= 0, got "-1"`,
		"invalid-cpu-max-procs.yml":           `cpu.max_procs: must be in -1..1024 (-1: the Go runtime's choice, 0: automatic), got "-2"`,
		"invalid-self-kinds.yml":              `sync.self_kinds[1]: must be in 0..65535, got "70000"`,
		"invalid-wrong-type.yml":              "testdata/invalid-wrong-type.yml: config file: line 3: publisher.window (--publisher.window, GRASP_SYNC_PUBLISHER_WINDOW): cannot unmarshal !!str `lots` into int",
		"invalid-syntax.yml":                  `testdata/invalid-syntax.yml: config file: line 1: did not find expected ',' or ']'`,
		"invalid-two-documents.yml":           `testdata/invalid-two-documents.yml: config file: more than one YAML document`,
	}
	files, err := filepath.Glob("testdata/invalid-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("%d testdata files, %d expectations: keep them in step", len(files), len(want))
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expected error for %s", name)
			}
			cfg, err := LoadFile(path)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil {
				t.Fatalf("no error, want %q", w)
			}
			if got := err.Error(); got != w {
				t.Errorf("got  %q\nwant %q", got, w)
			}
		})
	}
}

// A value of the wrong type in the file is named by its setting: YAML
// path, flag and environment variable; a line with several keys (flow
// style) by the path they share.
func TestWrongTypeNamesTheSetting(t *testing.T) {
	doc := "own_relay: ws://relay:7777\n" +
		"sync:\n  page_size: many\n" +
		"purgatory: {backoff: [soon]}\n" +
		"limits: {relay_queue_bytes: x, max_repositories: y}\n" +
		"publisher: {window: [1s, x]}\n" +
		"bootstrap_relays: 5\n" +
		"health: 3\n"
	_, err := Parse(strings.NewReader(doc))
	want := "config file: " +
		"line 3: sync.page_size (--sync.page-size, GRASP_SYNC_SYNC_PAGE_SIZE): cannot unmarshal !!str `many` into int; " +
		"line 4: purgatory.backoff[0] (--purgatory.backoff, GRASP_SYNC_PURGATORY_BACKOFF): cannot unmarshal !!str `soon` into time.Duration; " +
		"line 5: limits: cannot unmarshal !!str `x` into int; " +
		"line 5: limits: cannot unmarshal !!str `y` into int; " +
		"line 6: publisher.window (--publisher.window, GRASP_SYNC_PUBLISHER_WINDOW): cannot unmarshal !!seq into int; " +
		"line 7: bootstrap_relays (--bootstrap-relay, GRASP_SYNC_BOOTSTRAP_RELAY): cannot unmarshal !!int `5` into []string; " +
		"line 8: health: cannot unmarshal !!int `3` into health.Config"
	if got := fmt.Sprint(err); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if !errors.Is(err, ErrConfigFile) {
		t.Errorf("errors.Is(%v, ErrConfigFile) = false", err)
	}
}

func TestSharedPath(t *testing.T) {
	for _, tt := range [][3]string{
		{"sync", "sync.page_size", "sync"},
		{"sync.batch_window", "sync.page_size", "sync"},
		{"purgatory.backoff[0]", "purgatory.backoff[1]", "purgatory.backoff"},
		{"a.b", "a.bc", "a"},
		{"log", "limits", ""},
		{"own_relay", "own_relay", "own_relay"},
	} {
		if got := sharedPath(tt[0], tt[1]); got != tt[2] {
			t.Errorf("sharedPath(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := validDefault()
	c.Sync.PageSize = 0
	c.Publisher.OKTimeout = -time.Second
	err := c.Validate()
	want := `sync.page_size: must be > 0, got "0"` + "\n" + `publisher.ok_timeout: must be > 0, got "-1s"`
	if got := fmt.Sprint(err); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "sync.page_size" {
		t.Fatalf("errors.As: %v", ve)
	}
}

func TestEmptyFileYieldsDefaults(t *testing.T) {
	cfg, err := Parse(strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Fatal("empty document differs from Default()")
	}
}

// An explicit zero in any layer is a value, never "unset".
func TestZeroIsAValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yml")
	writeFile(t, path, "own_relay: ws://relay:7777\nsync:\n  since_buffer: 0s\n  verify_workers: 4\npurgatory:\n  enabled: true\n")
	t.Setenv("GRASP_SYNC_PURGATORY_ENABLED", "false")
	cfg := runCLI(t, "--config", path, "--sync.verify-workers", "0")
	if cfg.Sync.SinceBuffer != 0 {
		t.Errorf("since_buffer: got %v, want 0 from file", cfg.Sync.SinceBuffer)
	}
	if cfg.Sync.VerifyWorkers != 0 {
		t.Errorf("verify_workers: got %d, want 0 from flag", cfg.Sync.VerifyWorkers)
	}
	if cfg.Purgatory.Enabled {
		t.Errorf("purgatory.enabled: got true, want false from env")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// runCLI runs a one-command app with Flags and returns FromCLI's result.
func runCLI(t *testing.T, args ...string) *Config {
	t.Helper()
	cfg, err := tryCLI(args...)
	if err != nil {
		t.Fatalf("FromCLI: %v", err)
	}
	return cfg
}

func tryCLI(args ...string) (*Config, error) {
	var cfg *Config
	app := &cli.App{
		Name:   "t",
		Flags:  Flags(),
		Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{},
		Action: func(c *cli.Context) error {
			var err error
			cfg, err = FromCLI(c)
			return err
		},
	}
	if err := app.Run(append([]string{"t"}, args...)); err != nil {
		return nil, err
	}
	return cfg, nil
}

func TestPrecedenceDefaultsFileEnvFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yml")
	writeFile(t, path, `
own_relay: ws://file:1
listen: ":1111"
log:
  level: debug
sync:
  batch_window: 7s
  page_size: 100
bootstrap_relays: [ws://file-a, ws://file-b]
`)
	t.Setenv("GRASP_SYNC_CONFIG", path)
	t.Setenv("GRASP_SYNC_LISTEN", ":2222")
	t.Setenv("GRASP_SYNC_SYNC_BATCH_WINDOW", "8s")
	t.Setenv("GRASP_SYNC_BOOTSTRAP_RELAY", "ws://env-a, ws://env-b")
	cfg := runCLI(t, "--sync.batch-window", "9s", "--dial.allow", "10.0.0.0/8", "--dial.allow", "gitea.local")

	checks := []struct {
		name string
		got  any
		want any
	}{
		{"health.tick (default)", cfg.Health.Tick, 2 * time.Second},
		{"own_relay (file)", cfg.OwnRelay, "ws://file:1"},
		{"log.level (file)", cfg.Log.Level, "debug"},
		{"sync.page_size (file)", cfg.Sync.PageSize, 100},
		{"listen (env over file)", cfg.Listen, ":2222"},
		{"bootstrap_relays (env list over file)", cfg.BootstrapRelays, []string{"ws://env-a", "ws://env-b"}},
		{"sync.batch_window (flag over env over file)", cfg.Sync.BatchWindow, 9 * time.Second},
		{"dial.allow (repeated flag)", cfg.Dial.Allow, []string{"10.0.0.0/8", "gitea.local"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestLoadUsesEnvironment(t *testing.T) {
	t.Setenv("GRASP_SYNC_OWN_RELAY", "wss://own.example")
	t.Setenv("GRASP_SYNC_PURGATORY_BACKOFF", "1s, 2s")
	t.Setenv("GRASP_SYNC_SYNC_SELF_KINDS", "30617,1621")
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OwnRelay != "wss://own.example" {
		t.Errorf("own_relay: got %q", cfg.OwnRelay)
	}
	if got, want := cfg.Purgatory.Backoff, []time.Duration{time.Second, 2 * time.Second}; !reflect.DeepEqual(got, want) {
		t.Errorf("purgatory.backoff: got %v, want %v", got, want)
	}
	if got, want := cfg.Sync.SelfKinds, []int{30617, 1621}; !reflect.DeepEqual(got, want) {
		t.Errorf("sync.self_kinds: got %v, want %v", got, want)
	}
	t.Setenv("GRASP_SYNC_HEALTH_TICK", "2")
	_, err = Load("")
	if got, want := fmt.Sprint(err), `GRASP_SYNC_HEALTH_TICK: health.tick: invalid duration "2" (use units, e.g. 5s, 2m, 1h)`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// otherValue returns a value different from def for the setting's kind, as
// the typed value and as the text a user would type.
func otherValue(s Setting, def any) (any, string) {
	switch s.Kind {
	case KindString:
		return "x-" + s.Key, "x-" + s.Key
	case KindStrings:
		return []string{"a." + s.Flag, "b." + s.Flag}, "a." + s.Flag + ",b." + s.Flag
	case KindInt:
		n := def.(int) + 3
		return n, fmt.Sprint(n)
	case KindInts:
		return []int{7, 9}, "7,9"
	case KindFloat:
		return 0.625, "0.625"
	case KindBool:
		b := !def.(bool)
		return b, fmt.Sprint(b)
	case KindDuration:
		d := def.(time.Duration) + 1500*time.Millisecond
		return d, d.String()
	case KindDurations:
		return []time.Duration{3 * time.Second, 4 * time.Minute}, "3s,4m"
	}
	panic(s.Kind)
}

// Every setting has a working environment twin and a working flag.
func TestEverySettingHasEnvAndFlag(t *testing.T) {
	def := Default()
	for _, via := range []string{"env", "flag", "ApplyEnv"} {
		t.Run(via, func(t *testing.T) {
			var args []string
			for _, s := range Settings() {
				_, text := otherValue(s, s.Get(def))
				switch via {
				case "env", "ApplyEnv":
					t.Setenv(s.Env, text)
				case "flag":
					args = append(args, "--"+s.Flag+"="+text)
				}
			}
			cfg := Default()
			if via == "ApplyEnv" {
				if err := ApplyEnv(cfg, os.LookupEnv); err != nil {
					t.Fatal(err)
				}
			} else {
				app := &cli.App{Name: "t", Flags: Flags(), Writer: &bytes.Buffer{}, ErrWriter: &bytes.Buffer{},
					Action: func(c *cli.Context) error { return ApplyCLI(cfg, c) }}
				if err := app.Run(append([]string{"t"}, args...)); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range Settings() {
				want, _ := otherValue(s, s.Get(def))
				if got := s.Get(cfg); !reflect.DeepEqual(got, want) {
					t.Errorf("%s via %s: got %v, want %v", s.Key, via, got, want)
				}
			}
		})
	}
}

func TestSettingNamesFollowTheContract(t *testing.T) {
	wantFlags := map[string]string{
		"own_relay": "own-relay", "bootstrap_relays": "bootstrap-relay", "trusted_relays": "trusted-relay",
		"git_dir": "git-dir", "service_domain": "service-domain", "listen": "listen",
		"log.level": "log.level", "log.format": "log.format", "dial.allow": "dial.allow",
		"sync.batch_window": "sync.batch-window",
	}
	wantEnv := map[string]string{
		"own_relay": "GRASP_SYNC_OWN_RELAY", "log.level": "GRASP_SYNC_LOG_LEVEL",
		"dial.allow": "GRASP_SYNC_DIAL_ALLOW", "sync.batch_window": "GRASP_SYNC_SYNC_BATCH_WINDOW",
	}
	seenFlag, seenEnv := map[string]bool{}, map[string]bool{}
	for _, s := range Settings() {
		if w, ok := wantFlags[s.Key]; ok && s.Flag != w {
			t.Errorf("%s: flag %q, want %q", s.Key, s.Flag, w)
		}
		if w, ok := wantEnv[s.Key]; ok && s.Env != w {
			t.Errorf("%s: env %q, want %q", s.Key, s.Env, w)
		}
		if seenFlag[s.Flag] || seenEnv[s.Env] || s.Env == EnvAuthKey || s.Env == EnvConfig {
			t.Errorf("%s: flag %q or env %q collides", s.Key, s.Flag, s.Env)
		}
		seenFlag[s.Flag], seenEnv[s.Env] = true, true
	}
	for k := range wantFlags {
		if _, ok := Lookup(k); !ok {
			t.Errorf("no setting %s", k)
		}
	}
}

// The YAML rendering of a config reads back to the same config.
func TestMarshalRoundTrip(t *testing.T) {
	c := validDefault()
	c.Purgatory.Backoff = []time.Duration{time.Second}
	c.Health.Jitter = 0
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip differs:\n%s", b)
	}
}

func TestExampleConfig(t *testing.T) {
	const path = "../../grasp-sync.example.yml"
	gen := ExampleYAML()
	if *update {
		writeFile(t, path, gen)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != gen {
		t.Errorf("%s is stale: run go test ./internal/config -update", path)
	}
	cfg, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.OwnRelay = ExampleOwnRelay
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("example does not load to defaults + own_relay")
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("example invalid: %v", err)
	}
	// Every setting appears in the example under its own key.
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings() {
		node := any(tree)
		for _, part := range strings.Split(s.Key, ".") {
			m, _ := node.(map[string]any)
			node = m[part]
		}
		if node == nil && s.Kind != KindString {
			t.Errorf("%s missing from the example", s.Key)
		}
	}
}

func TestConfigurationMarkdown(t *testing.T) {
	const path = "../../CONFIGURATION.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	begin, end := strings.Index(doc, MarkdownBegin), strings.Index(doc, MarkdownEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the generated-section markers", path)
	}
	gen := Markdown()
	current := doc[begin : end+len(MarkdownEnd)+1]
	if *update && current != gen {
		doc = doc[:begin] + gen + doc[end+len(MarkdownEnd)+1:]
		writeFile(t, path, doc)
		current = gen
	}
	if current != gen {
		t.Errorf("%s is stale: run go test ./internal/config -update", path)
	}
	for _, s := range Settings() {
		for _, name := range []string{"`" + s.Key + "`", "`--" + s.Flag + "`", "`" + s.Env + "`"} {
			if !strings.Contains(doc, name) {
				t.Errorf("%s does not mention %s", path, name)
			}
		}
	}
	for _, name := range []string{EnvConfig, EnvAuthKey, "--" + FlagConfig} {
		if !strings.Contains(doc, name) {
			t.Errorf("%s does not mention %s", path, name)
		}
	}
}

func TestSectionsAreDocumented(t *testing.T) {
	var keys []string
	for _, s := range Sections() {
		if s.Help == "" {
			t.Errorf("section %s has no help", s.Key)
		}
		keys = append(keys, s.Key)
	}
	if want := []string{"log", "auth", "dial", "relay", "sync", "health", "publisher", "purgatory", "git_http", "negentropy", "trusted", "rejected", "limits", "state", "memory", "cpu", "strfry_policy"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("sections %v, want %v", keys, want)
	}
}

func TestPurgatoryActive(t *testing.T) {
	c := validDefault()
	if c.PurgatoryActive() {
		t.Error("active without git_dir")
	}
	c.GitDir = "/srv/git"
	if !c.PurgatoryActive() {
		t.Error("inactive with git_dir and enabled")
	}
	c.Purgatory.Enabled = false
	if c.PurgatoryActive() {
		t.Error("active while disabled")
	}
}

// The git server is off by default; on, it needs a git directory and an
// address of its own, and its flag and variable follow the section.
func TestGitHTTP(t *testing.T) {
	c := validDefault()
	if c.GitHTTP.Enabled() {
		t.Fatal("git server on by default")
	}
	s, ok := Lookup("git_http.listen")
	if !ok || s.Flag != "git-http.listen" || s.Env != "GRASP_SYNC_GIT_HTTP_LISTEN" {
		t.Fatalf("git_http.listen: %+v", s)
	}
	c.GitHTTP.Listen = c.Listen
	want := `git_http.listen: needs git_dir (the repositories it serves), got ":9090"` + "\n" +
		`git_http.listen: must differ from listen (:9090), got ":9090"`
	if got := fmt.Sprint(c.Validate()); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	c.GitDir, c.GitHTTP.Listen = "/srv/git", "127.0.0.1:8080"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Listen, c.GitHTTP.Listen = "127.0.0.1:0", "127.0.0.1:0" // two ports the system picks
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.GitHTTP.RequestTimeout = 0
	if got := Detail(c.Validate()); got != `git_http.request_timeout (--git-http.request-timeout, GRASP_SYNC_GIT_HTTP_REQUEST_TIMEOUT): must be > 0, got "0s"` {
		t.Fatalf("got %q", got)
	}
}

const (
	testNsec = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
	testHex  = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
)

func TestParseSecretKey(t *testing.T) {
	for _, in := range []string{testNsec, testHex, strings.ToUpper(testHex), "  " + testNsec + "\n"} {
		k, err := ParseSecretKey(in)
		if err != nil {
			t.Fatalf("%.8s…: %v", in, err)
		}
		if k.Hex() != testHex {
			t.Errorf("got %.8s…, want %.8s…", k.Hex(), testHex)
		}
	}
	bad := []string{
		"", "nsec1", testHex[:63], testHex + "00", strings.Repeat("0", 64), strings.Repeat("zz", 32),
		testNsec[:len(testNsec)-1] + "6",                                  // checksum
		"npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6", // wrong prefix
	}
	for _, in := range bad {
		_, err := ParseSecretKey(in)
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseSecretKey(%q): got %v, want ErrInvalidKey", in, err)
		}
		if len(in) >= 16 && strings.Contains(err.Error(), in) {
			t.Errorf("error repeats the input")
		}
	}
	k, _ := ParseSecretKey(testHex)
	pk, err := k.PublicKey()
	if err != nil || len(pk) != 64 {
		t.Fatalf("PublicKey: %q %v", pk, err)
	}
}

func TestResolveKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	writeFile(t, keyFile, testNsec+"\n")
	noEnv := func(string) (string, bool) { return "", false }
	env := func(k string) (string, bool) {
		if k == EnvAuthKey {
			return testHex, true
		}
		return "", false
	}

	c := validDefault()
	c.Auth.KeyFile = keyFile
	if err := c.ResolveKey(noEnv); err != nil || c.Auth.Key.Hex() != testHex {
		t.Fatalf("from file: %v", err)
	}

	c = validDefault()
	if err := c.ResolveKey(env); err != nil || c.Auth.Key.Hex() != testHex {
		t.Fatalf("from env: %v", err)
	}

	c = validDefault()
	c.Auth.KeyFile = keyFile
	err := c.ResolveKey(env)
	if got, want := fmt.Sprint(err), `auth.key_file: must be empty when GRASP_SYNC_AUTH_KEY is set, got "`+keyFile+`"`; got != want {
		t.Fatalf("both: got %q, want %q", got, want)
	}

	writeFile(t, keyFile, "not-a-key-but-secret-text")
	c = validDefault()
	c.Auth.KeyFile = keyFile
	err = c.ResolveKey(noEnv)
	if !errors.Is(err, ErrInvalidKey) || strings.Contains(err.Error(), "secret-text") {
		t.Fatalf("bad file: %v", err)
	}

	c = validDefault()
	c.Auth.KeyFile = filepath.Join(dir, "missing")
	if err := c.ResolveKey(noEnv); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// The secret key never appears in any rendering of the configuration.
func TestSecretKeyIsRedacted(t *testing.T) {
	c := validDefault()
	k, err := ParseSecretKey(testNsec)
	if err != nil {
		t.Fatal(err)
	}
	c.Auth.Key = k

	var logs bytes.Buffer
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	log := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&logs), zapcore.DebugLevel))
	log.Info("config", zap.Any("config", c), zap.Any("key", k), zap.Stringer("s", k), zap.Reflect("r", c))
	log = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel))
	log.Info("config", zap.Any("config", c), zap.Any("key", k))

	js, _ := json.Marshal(c)
	ym, _ := yaml.Marshal(c)
	own, _ := c.YAML()
	txt, _ := k.MarshalText()
	outputs := map[string]string{
		"zap":  logs.String(),
		"json": string(js),
		"yaml": string(ym) + string(own),
		"text": string(txt),
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		outputs["fmt "+verb] = fmt.Sprintf(verb, c) + fmt.Sprintf(verb, k) + fmt.Sprintf(verb, c.Auth) + fmt.Sprintf(verb, &c.Auth)
	}
	outputs["Sprint"] = fmt.Sprint(k, c.Auth, *c)
	for name, out := range outputs {
		for _, secret := range []string{testHex, testNsec, testHex[:16], strings.ToUpper(testHex[:16])} {
			if strings.Contains(out, secret) {
				t.Errorf("%s output contains the key", name)
			}
		}
	}
	if !strings.Contains(outputs["json"], Redacted) || !strings.Contains(outputs["fmt %+v"], Redacted) || !strings.Contains(outputs["zap"], Redacted) {
		t.Errorf("redaction marker missing: %s / %s", outputs["json"], outputs["fmt %+v"])
	}
	if k.Hex() != testHex {
		t.Error("Hex() must still return the key")
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 15 * time.Minute: "15m", 65 * time.Second: "1m5s", 500 * time.Millisecond: "500ms",
		168 * time.Hour: "168h", 0: "0s", 90 * time.Minute: "1h30m",
	} {
		got := FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("%q does not parse back to %v", got, d)
		}
	}
}
