package config

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Source says where a setting's effective value came from.
type Source string

// Sources of a setting's value, lowest precedence first.
const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// AnnotatedYAML renders c as a YAML document that --config reads back to
// the same configuration, each setting followed by a comment naming where
// its value came from (source(s), e.g. "flag --own-relay"). Durations are
// written with units (5s); the secret key is never written: header lines
// (comments) may say where it came from.
func (c *Config) AnnotatedYAML(source func(Setting) string, header []string) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(c); err != nil {
		return nil, err
	}
	annotate(&doc, "", source)
	var buf bytes.Buffer
	for _, h := range header {
		fmt.Fprintf(&buf, "# %s\n", h)
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Values is the configuration as its YAML keys and values, the way
// AnnotatedYAML writes them (durations with units, the secret key
// redacted), for a structured log line.
func (c *Config) Values() (map[string]any, error) {
	var doc yaml.Node
	if err := doc.Encode(c); err != nil {
		return nil, err
	}
	annotate(&doc, "", func(Setting) string { return "" })
	var m map[string]any
	if err := doc.Decode(&m); err != nil {
		return nil, err
	}
	if auth, ok := m["auth"].(map[string]any); ok && !c.Auth.Key.IsZero() {
		auth["key"] = Redacted // loaded (file or environment), never shown
	}
	return m, nil
}

// annotate walks a mapping node and sets the line comment of each setting's
// key (the value of a sequence can span lines, the key cannot).
func annotate(n *yaml.Node, prefix string, source func(Setting) string) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if prefix != "" {
			key = prefix + "." + key
		}
		if v.Kind == yaml.MappingNode {
			annotate(v, key, source)
			continue
		}
		s, ok := Lookup(key)
		if !ok {
			continue
		}
		if s.Kind == KindDuration || s.Kind == KindDurations {
			shortDurations(v)
		}
		comment := "# " + source(s)
		if v.Kind == yaml.SequenceNode && len(v.Content) > 0 {
			k.LineComment = comment
		} else {
			v.LineComment = comment
		}
	}
}

// shortDurations rewrites Go's 15m0s and 1h0m0s as 15m and 1h (both parse
// back to the same value).
func shortDurations(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode {
		for _, c := range n.Content {
			shortDurations(c)
		}
		return
	}
	d, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil {
		return
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	n.Value = s
}

// SourceOf returns where s's value in the effective configuration came
// from: a flag on the command line (args), its environment variable
// (lookup), the file's value (differs from the default), or the default.
func SourceOf(s Setting, args []string, lookup func(string) (string, bool), file *Config) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == s.Flag {
			return string(SourceFlag) + " --" + s.Flag
		}
	}
	if v, ok := lookup(s.Env); ok && v != "" {
		return string(SourceEnv) + " " + s.Env
	}
	if file != nil && s.Format(file) != s.Format(Default()) {
		return string(SourceFile)
	}
	return string(SourceDefault)
}
