package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Markers delimiting the generated part of CONFIGURATION.md.
const (
	MarkdownBegin = "<!-- BEGIN GENERATED SETTINGS: go test ./config -update -->"
	MarkdownEnd   = "<!-- END GENERATED SETTINGS -->"
)

// ExampleOwnRelay is the own_relay value of the reference configuration.
const ExampleOwnRelay = "ws://relay:7777"

// Markdown renders the reference tables of every setting (YAML key, flag,
// environment variable, default, description), grouped by section. It is
// the generated part of CONFIGURATION.md.
func Markdown() string {
	def := Default()
	var b strings.Builder
	b.WriteString(MarkdownBegin + "\n")
	groups := append([]Section{{Key: "", Help: "Top-level settings."}}, sections...)
	for _, g := range groups {
		title := g.Key
		if title == "" {
			title = "top level"
		}
		fmt.Fprintf(&b, "\n### %s\n\n%s\n\n", title, g.Help)
		b.WriteString("| YAML key | Flag | Environment | Default | Description |\n")
		b.WriteString("|---|---|---|---|---|\n")
		for _, s := range settings {
			if s.Group != g.Key {
				continue
			}
			d := "*empty*"
			if v := s.Format(def); v != "" {
				d = "`" + v + "`"
			}
			help := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s.Help + kindNote(s.Kind))
			fmt.Fprintf(&b, "| `%s` | `--%s` | `%s` | %s | %s |\n", s.Key, s.Flag, s.Env, d, help)
		}
	}
	b.WriteString("\n" + MarkdownEnd + "\n")
	return b.String()
}

func kindNote(k Kind) string {
	switch k {
	case KindDuration:
		return " *(duration)*"
	case KindDurations:
		return " *(list of durations)*"
	case KindStrings, KindInts:
		return " *(list)*"
	}
	return ""
}

// ExampleYAML renders the fully commented reference configuration
// (grasp-sync.example.yml): every key with its default, except own_relay,
// which is set to ExampleOwnRelay.
func ExampleYAML() string {
	def := Default()
	def.OwnRelay = ExampleOwnRelay
	var b strings.Builder
	b.WriteString(`# grasp-sync reference configuration.
#
# Every key is shown with its default value (own_relay excepted: it is
# required and has no default). Keys you leave out keep their defaults;
# unknown keys are an error. Environment variables (GRASP_SYNC_*) override
# this file and command-line flags override both; see CONFIGURATION.md.
#
# Durations take a unit: 500ms, 5s, 2m, 1h (no days: write 168h for a week).
#
# The NIP-42 secret key is never written here: point auth.key_file at a file
# holding it, or set GRASP_SYNC_AUTH_KEY.
#
# Generated from the config package (go test ./config -update); edit the
# help tags in config/config.go, not this file.
`)
	indent := ""
	group := ""
	for _, s := range settings {
		if s.Group != group {
			group = s.Group
			for _, sec := range sections {
				if sec.Key == group {
					fmt.Fprintf(&b, "\n# --- %s ---\n# %s\n%s:\n", sec.Key, sec.Help, lastKey(group))
				}
			}
			indent = strings.Repeat("  ", strings.Count(group, ".")+1)
		} else {
			b.WriteString("\n")
		}
		for _, line := range wrap(s.Help, 76-len(indent)) {
			fmt.Fprintf(&b, "%s# %s\n", indent, line)
		}
		fmt.Fprintf(&b, "%s%s: %s\n", indent, lastKey(s.Key), yamlValue(s.Get(def)))
	}
	return b.String()
}

func lastKey(k string) string {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[i+1:]
	}
	return k
}

func yamlValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case []int, []time.Duration:
		return "[" + strings.ReplaceAll(formatValue(x), ",", ", ") + "]"
	}
	return formatValue(v)
}

func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
