package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// EnvPrefix prefixes every environment variable.
const EnvPrefix = "GRASP_SYNC_"

// EnvConfig names the environment twin of --config.
const EnvConfig = EnvPrefix + "CONFIG"

// EnvAuthKey names the environment variable holding the NIP-42 secret key
// itself (alternative to auth.key_file).
const EnvAuthKey = EnvPrefix + "AUTH_KEY"

// Kind is the value type of a setting.
type Kind string

// Setting kinds.
const (
	KindString    Kind = "string"
	KindStrings   Kind = "strings"
	KindInt       Kind = "int"
	KindInts      Kind = "ints"
	KindFloat     Kind = "float"
	KindBool      Kind = "bool"
	KindDuration  Kind = "duration"
	KindDurations Kind = "durations"
)

// Setting describes one configurable value: its YAML key, flag, environment
// variable, help text and default.
type Setting struct {
	// Key is the dotted YAML path, e.g. "sync.batch_window".
	Key string
	// Flag is the flag name without dashes, e.g. "sync.batch-window".
	Flag string
	// Env is the environment variable, e.g. "GRASP_SYNC_SYNC_BATCH_WINDOW".
	Env string
	// Help is the documentation.
	Help string
	// Kind is the value type.
	Kind Kind
	// Group is the YAML path of the enclosing section ("" at top level).
	Group string

	index []int
}

// Section describes a nested group of settings.
type Section struct {
	Key  string
	Help string
}

var (
	durationType  = reflect.TypeOf(time.Duration(0))
	durationsType = reflect.TypeOf([]time.Duration(nil))
	secretType    = reflect.TypeOf(SecretKey{})
)

var settings, sections = buildSettings()

// Settings lists every setting in declaration order.
func Settings() []Setting { return append([]Setting(nil), settings...) }

// Sections lists the nested groups in declaration order.
func Sections() []Section { return append([]Section(nil), sections...) }

// Lookup returns the setting with the given YAML key.
func Lookup(key string) (Setting, bool) {
	for _, s := range settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

func buildSettings() ([]Setting, []Section) {
	var out []Setting
	var secs []Section
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			idx := append(append([]int(nil), index...), i)
			if name == "" && opts == "inline" {
				// Keys of an inline struct belong to the enclosing
				// section: one section may be served by several packages.
				walk(f.Type, prefix, idx)
				continue
			}
			if name == "-" || name == "" {
				continue
			}
			key := name
			if prefix != "" {
				key = prefix + "." + name
			}
			if f.Type.Kind() == reflect.Struct && f.Type != secretType {
				secs = append(secs, Section{Key: key, Help: f.Tag.Get("help")})
				walk(f.Type, key, idx)
				continue
			}
			flag := f.Tag.Get("flag")
			if flag == "" {
				flag = strings.ReplaceAll(key, "_", "-")
			}
			env := f.Tag.Get("env")
			if env == "" {
				env = EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(flag))
			}
			help := f.Tag.Get("help")
			if help == "" {
				panic("config: setting " + key + " has no help tag")
			}
			out = append(out, Setting{
				Key: key, Flag: flag, Env: env, Help: help,
				Kind: kindOf(f.Type), Group: prefix, index: idx,
			})
		}
	}
	walk(reflect.TypeOf(Config{}), "", nil)
	return out, secs
}

func kindOf(t reflect.Type) Kind {
	switch {
	case t == durationType:
		return KindDuration
	case t == durationsType:
		return KindDurations
	}
	switch t.Kind() {
	case reflect.String:
		return KindString
	case reflect.Int:
		return KindInt
	case reflect.Float64:
		return KindFloat
	case reflect.Bool:
		return KindBool
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.String:
			return KindStrings
		case reflect.Int:
			return KindInts
		}
	}
	panic("config: unsupported setting type " + t.String())
}

// field returns the addressable field of cfg that s describes.
func (s Setting) field(cfg *Config) reflect.Value {
	return reflect.ValueOf(cfg).Elem().FieldByIndex(s.index)
}

// Get returns the setting's current value in cfg.
func (s Setting) Get(cfg *Config) any { return s.field(cfg).Interface() }

// Set stores v, which must have the setting's Go type, into cfg.
func (s Setting) Set(cfg *Config, v any) error {
	f := s.field(cfg)
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Type() != f.Type() {
		return fmt.Errorf("%s: cannot assign %T to %s", s.Key, v, f.Type())
	}
	f.Set(rv)
	return nil
}

// SetString parses text as the setting's type and stores it in cfg. Lists
// are comma-separated; blanks around items are ignored; an empty string
// is an empty list.
func (s Setting) SetString(cfg *Config, text string) error {
	v, err := s.parse(text)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Key, err)
	}
	s.field(cfg).Set(reflect.ValueOf(v))
	return nil
}

func splitList(text string) []string {
	out := []string{}
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s Setting) parse(text string) (any, error) {
	switch s.Kind {
	case KindString:
		return text, nil
	case KindStrings:
		return splitList(text), nil
	case KindInt:
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("invalid integer %q", text)
		}
		return n, nil
	case KindInts:
		out := []int{}
		for _, p := range splitList(text) {
			n, err := strconv.Atoi(p)
			if err != nil {
				return nil, fmt.Errorf("invalid integer %q", p)
			}
			out = append(out, n)
		}
		return out, nil
	case KindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return nil, fmt.Errorf("invalid number %q", text)
		}
		return f, nil
	case KindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("invalid boolean %q", text)
		}
		return b, nil
	case KindDuration:
		d, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q (use units, e.g. 5s, 2m, 1h)", text)
		}
		return d, nil
	case KindDurations:
		out := []time.Duration{}
		for _, p := range splitList(text) {
			d, err := time.ParseDuration(p)
			if err != nil {
				return nil, fmt.Errorf("invalid duration %q (use units, e.g. 5s, 2m, 1h)", p)
			}
			out = append(out, d)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported kind %s", s.Kind)
}

// Format renders the setting's value in cfg the way a user would write it
// on the command line or in the environment.
func (s Setting) Format(cfg *Config) string {
	return formatValue(s.Get(cfg))
}

func formatValue(v any) string { return setting.Format(v) }

// FormatDuration prints d without zero trailing units ("1h", "15m",
// "500ms"), in a form time.ParseDuration reads back.
func FormatDuration(d time.Duration) string { return setting.FormatDuration(d) }

// ApplyEnv overlays every setting whose environment variable lookup reports
// as present (even when empty). lookup is usually os.LookupEnv.
func ApplyEnv(cfg *Config, lookup func(string) (string, bool)) error {
	for _, s := range settings {
		v, ok := lookup(s.Env)
		if !ok {
			continue
		}
		if err := s.SetString(cfg, v); err != nil {
			return fmt.Errorf("%s: %w", s.Env, err)
		}
	}
	return nil
}
