package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ErrConfigFile wraps every failure to read or decode a configuration file.
var ErrConfigFile = errors.New("config file")

// Parse decodes YAML from r over the defaults. Unknown keys are refused.
// An empty document yields the defaults.
func Parse(r io.Reader) (*Config, error) {
	cfg := Default()
	if err := decodeInto(cfg, r); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeInto decodes one YAML document over cfg. A second document in the
// same file is refused.
func decodeInto(cfg *Config, r io.Reader) error {
	doc, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	err = dec.Decode(cfg)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil {
		var extra yaml.Node
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: more than one YAML document", ErrConfigFile)
		}
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		keys := keyLines(doc)
		problems := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			problems[i] = nameSetting(e, keys)
		}
		return fmt.Errorf("%w: %s", ErrConfigFile, strings.Join(problems, "; "))
	}
	return fmt.Errorf("%w: %s", ErrConfigFile, strings.TrimPrefix(err.Error(), "yaml: "))
}

// typeErrorRE parses one of yaml.TypeError's problems: "line 3: cannot
// unmarshal !!str `lots` into int".
var typeErrorRE = regexp.MustCompile(`^line (\d+): (cannot unmarshal .*)$`)

// nameSetting names the setting a value of the wrong type was given for,
// as Detail names a setting: "line 3: publisher.window (--publisher.window,
// GRASP_SYNC_PUBLISHER_WINDOW): cannot unmarshal !!str `lots` into int".
// keys maps lines to the YAML path of the key there (keyLines); a problem
// on no known line is kept as it is.
func nameSetting(problem string, keys map[int]string) string {
	m := typeErrorRE.FindStringSubmatch(problem)
	if m == nil {
		return problem
	}
	line, _ := strconv.Atoi(m[1])
	key, ok := keys[line]
	if !ok {
		return problem
	}
	name := key
	base, _, _ := strings.Cut(key, "[")
	if s, ok := Lookup(base); ok {
		name += " (--" + s.Flag + ", " + s.Env + ")"
	}
	return fmt.Sprintf("line %d: %s: %s", line, name, m[2])
}

// keyLines maps each line of the YAML document doc that holds a mapping
// key, or a list item, to its dotted YAML path (sync.batch_window,
// sync.self_kinds[1]). A line with several (flow style) gets the deepest
// (sync.batch_window for `sync: {batch_window: 2}`), or the path siblings
// share: sync for `sync: {batch_window: 2, page_size: x}`,
// purgatory.backoff for `backoff: [1s, lots]`. A document that does not
// parse yields nil.
func keyLines(doc []byte) map[int]string {
	var root yaml.Node
	if yaml.Unmarshal(doc, &root) != nil {
		return nil
	}
	out := map[int]string{}
	add := func(line int, path string) {
		if prev, ok := out[line]; ok {
			if shared := sharedPath(prev, path); shared != prev {
				path = shared // siblings
			}
		}
		out[line] = path
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				add(k.Line, p)
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				add(c.Line, p)
				walk(c, p)
			}
		}
	}
	walk(&root, "")
	return out
}

// sharedPath is the longest YAML path both a and b are in: a itself when b
// is under a (sync, sync.page_size), their section when they are siblings
// (sync.batch_window, sync.page_size: sync), "" when they share nothing.
func sharedPath(a, b string) string {
	boundary := func(s string, i int) bool { return i == len(s) || s[i] == '.' || s[i] == '[' }
	n := 0
	for i := 0; i <= min(len(a), len(b)); i++ {
		if i > 0 && a[i-1] != b[i-1] {
			break
		}
		if boundary(a, i) && boundary(b, i) {
			n = i
		}
	}
	return a[:n]
}

// LoadFile returns the defaults overlaid with the YAML file at path (no
// environment, no validation). An empty path yields the defaults.
func LoadFile(path string) (*Config, error) {
	if path == "" {
		return Default(), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfigFile, err)
	}
	cfg, err := Parse(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Load builds a complete configuration without command-line flags:
// defaults, the YAML file at path (if not empty), the GRASP_SYNC_*
// environment, the secret key, then Validate.
func Load(path string) (*Config, error) {
	cfg, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	if err := ApplyEnv(cfg, os.LookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.ResolveKey(os.LookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ResolveKey loads Auth.Key from the environment variable GRASP_SYNC_AUTH_KEY
// or from Auth.KeyFile. Giving both is an error. Errors never contain the
// key material.
func (c *Config) ResolveKey(lookup func(string) (string, bool)) error {
	envKey, hasEnv := lookup(EnvAuthKey)
	hasEnv = hasEnv && strings.TrimSpace(envKey) != ""
	switch {
	case hasEnv && c.Auth.KeyFile != "":
		return named(&ValidationError{Field: "auth.key_file", Problem: "must be empty when " + EnvAuthKey + " is set", Value: c.Auth.KeyFile})
	case hasEnv:
		k, err := ParseSecretKey(envKey)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvAuthKey, err)
		}
		c.Auth.Key = k
	case c.Auth.KeyFile != "":
		b, err := os.ReadFile(c.Auth.KeyFile)
		if err != nil {
			return fmt.Errorf("auth.key_file: %w", err)
		}
		k, err := ParseSecretKey(string(b))
		if err != nil {
			return fmt.Errorf("auth.key_file: %s: %w", c.Auth.KeyFile, err)
		}
		c.Auth.Key = k
	}
	return nil
}

// YAML renders c as a YAML document that Parse reads back to the
// same value (the secret key is omitted).
func (c *Config) YAML() ([]byte, error) {
	return yaml.Marshal(c)
}
