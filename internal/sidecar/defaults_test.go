package sidecar

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
)

// The engines own their settings types, which config embeds as they are,
// so their defaults are never copied. The sync engine's are, until it owns
// its settings type too: config.Default() copies reposync.DefaultConfig()
// into config's sync, negentropy, trusted and limits fields, and syncConfig
// maps them back. TestSyncDefaultsAgree maps config.Default() through
// syncConfig and requires the result to equal the engine's own default,
// field by field, so a setting copied into the wrong field, or mapped onto
// the wrong engine field, fails here. It goes away with that copy.
//
// Each exclusion names a field that is not a default, with the reason.
// An exclusion that names no field fails the test, so renaming a field
// cannot silently widen what is skipped.
func TestSyncDefaultsAgree(t *testing.T) {
	cfg := config.Default()
	cases := []struct {
		name    string
		mapped  any
		engine  any
		exclude map[string]string // field path → why it is not compared
	}{
		{
			name: "sync.Config", mapped: syncConfig(cfg), engine: reposync.DefaultConfig(),
			exclude: map[string]string{
				"OwnRelay":                         "site-specific URL, required, no default",
				"ServiceDomain":                    "site-specific host, no default",
				"Bootstrap":                        "site-specific relay URLs, no default",
				"Trusted.Relays":                   "site-specific relay URLs, no default",
				"Negentropy.Options.MaxInboundHex": "derived by the sidecar from relay.max_message_bytes (2×), no setting of its own",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			used := map[string]bool{}
			for _, diff := range diffFields(reflect.ValueOf(c.mapped), reflect.ValueOf(c.engine), "", c.exclude, used) {
				t.Errorf("%s.%s", c.name, diff)
			}
			var unused []string
			for path := range c.exclude {
				if !used[path] {
					unused = append(unused, path)
				}
			}
			sort.Strings(unused)
			for _, path := range unused {
				t.Errorf("%s: exclusion %q names no field", c.name, path)
			}
		})
	}
}

// diffFields compares two values of the same struct type field by field,
// descending into nested structs, and describes every field that differs
// as "<path>: config.Default() maps to X, engine default is Y". Paths in
// exclude are skipped and recorded in used.
func diffFields(mapped, engine reflect.Value, prefix string, exclude map[string]string, used map[string]bool) []string {
	var diffs []string
	typ := mapped.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		path := prefix + f.Name
		if _, ok := exclude[path]; ok {
			used[path] = true
			continue
		}
		if !f.IsExported() {
			continue
		}
		mv, ev := mapped.Field(i), engine.Field(i)
		if f.Type.Kind() == reflect.Struct {
			diffs = append(diffs, diffFields(mv, ev, path+".", exclude, used)...)
			continue
		}
		if !reflect.DeepEqual(mv.Interface(), ev.Interface()) {
			diffs = append(diffs, fmt.Sprintf("%s: config.Default() maps to %s, engine default is %s",
				path, show(mv), show(ev)))
		}
	}
	return diffs
}

func show(v reflect.Value) string {
	if v.Kind() == reflect.Func {
		if v.IsNil() {
			return "nil func"
		}
		return "a func"
	}
	s := fmt.Sprintf("%v", v.Interface())
	if v.Kind() == reflect.String {
		s = fmt.Sprintf("%q", s)
	}
	return strings.TrimSpace(s)
}
