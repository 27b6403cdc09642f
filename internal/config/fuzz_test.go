package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and whatever it accepts survives a
// YAML → Parse round trip unchanged.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yml")
	files = append(files, "../../grasp-sync.example.yml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	f.Add("sync: {batch_window: 1h30m, self_kinds: [1, 2]}\nhealth: {jitter: 0.5}\n")
	f.Add("purgatory:\n  backoff: [1s, 2s]\n  enabled: false\n")
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := Parse(strings.NewReader(doc))
		if err != nil {
			return
		}
		_ = cfg.Validate()
		b, err := cfg.YAML()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := Parse(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("re-parse of\n%s\nfailed: %v", b, err)
		}
		if !reflect.DeepEqual(normalise(back), normalise(cfg)) {
			t.Fatalf("round trip changed the configuration:\n%s", b)
		}
	})
}

// normalise maps nil and empty slices to one form: YAML cannot tell them
// apart and the configuration treats them alike.
func normalise(c *Config) *Config {
	n := *c
	for _, s := range settings {
		f := s.field(&n)
		if f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		}
	}
	return &n
}
