package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// A missing own relay is reported with its YAML key, flag and variable.
func TestDetailMissingOwnRelayNamesFlagAndEnvironment(t *testing.T) {
	err := Default().Validate()
	want := `own_relay (--own-relay, GRASP_SYNC_OWN_RELAY): is required, got ""`
	if got := Detail(err); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "own_relay" || ve.Flag != "own-relay" || ve.Env != "GRASP_SYNC_OWN_RELAY" {
		t.Fatalf("errors.As: %+v", ve)
	}
}

// A bad nested value, set through the environment, names the variable
// that set it, the flag and the YAML key.
func TestDetailNestedValueFromEnvironment(t *testing.T) {
	t.Setenv("GRASP_SYNC_OWN_RELAY", "ws://relay:7777")
	t.Setenv("GRASP_SYNC_SYNC_PAGE_SIZE", "0")
	_, err := Load("")
	want := `sync.page_size (--sync.page-size, GRASP_SYNC_SYNC_PAGE_SIZE): must be > 0, got "0"`
	if got := Detail(err); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// The flag Detail names is the one the command line accepts.
func TestDetailNestedValueFromFlag(t *testing.T) {
	var err error
	app := &cli.App{Flags: Flags(), Action: func(c *cli.Context) error {
		_, err = FromCLI(c)
		return nil
	}}
	if runErr := app.Run([]string{"x", "--own-relay", "ws://relay:7777", "--sync.page-size", "0", "--publisher.ok-timeout", "-1s"}); runErr != nil {
		t.Fatal(runErr)
	}
	want := `sync.page_size (--sync.page-size, GRASP_SYNC_SYNC_PAGE_SIZE): must be > 0, got "0"` + "\n" +
		`publisher.ok_timeout (--publisher.ok-timeout, GRASP_SYNC_PUBLISHER_OK_TIMEOUT): must be > 0, got "-1s"`
	if got := Detail(err); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// Every validation problem of the invalid test files names a flag and a
// variable that exist, indexed list items (bootstrap_relays[1]) their
// list's.
func TestDetailEveryValidationErrorNamed(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, f := range Flags() {
		for _, n := range f.Names() {
			flags[n] = true
		}
	}
	envs := map[string]bool{}
	for _, s := range Settings() {
		envs[s.Env] = true
	}
	n := 0
	for _, path := range files {
		cfg, err := LoadFile(path)
		if err != nil {
			continue // not a validation error
		}
		err = cfg.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: %v is no ValidationError", path, err)
		}
		n++
		if !flags[ve.Flag] || !envs[ve.Env] {
			t.Errorf("%s: flag %q, variable %q: not those of a setting", path, ve.Flag, ve.Env)
		}
		d := Detail(err)
		if !strings.HasPrefix(d, ve.Field+" (--"+ve.Flag+", "+ve.Env+"): ") {
			t.Errorf("%s: %s", path, d)
		}
	}
	if n < 15 {
		t.Fatalf("only %d validation errors checked", n)
	}
}

func TestDetailKeyFileAndEnvironmentKey(t *testing.T) {
	c := validDefault()
	c.Auth.KeyFile = "/k"
	err := c.ResolveKey(func(k string) (string, bool) { return "nsec1x", k == EnvAuthKey })
	if got := Detail(err); !strings.HasPrefix(got, "auth.key_file (--auth.key-file, GRASP_SYNC_AUTH_KEY_FILE): must be empty when GRASP_SYNC_AUTH_KEY is set") {
		t.Fatalf("got %s", got)
	}
}
