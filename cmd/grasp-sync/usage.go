package main

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/grasp-sync/grasp-sync/internal/config"
)

// usageErrors makes every command answer a flag or environment error with
// one line and a hint instead of urfave/cli's help dump.
func usageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		name := c.Name
		flags := c.Flags
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return &exitError{code: 1, err: fmt.Errorf("%s; see grasp-sync %s --help", explainUsage(err, flags), name)}
		}
	}
}

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)
	reInvalid   = regexp.MustCompile(`^invalid value "(.*)" for flag -+(\S+): (.*)$`)
	reEnv       = regexp.MustCompile(`^could not parse "(.*)" as (\S+) value from (?:env var|environment variable) "(\S+)" for flag (\S+): (.*)$`)
)

// explainUsage rewrites urfave/cli's (Go flag package's) parse errors in the
// terms of this command line: --flag names, the value given, what is wanted.
func explainUsage(err error, flags []cli.Flag) string {
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		s := "unknown flag --" + m[1]
		if sug := cli.SuggestFlag(flags, m[1], false); sug != "" {
			s += " (did you mean " + sug + "?)"
		}
		return s
	}
	if m := reInvalid.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s: invalid value %q%s", m[2], m[1], wants(flags, m[2], m[3]))
	}
	if m := reEnv.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s: invalid value %q for --%s%s", m[3], m[1], m[4], wants(flags, m[4], m[5]))
	}
	return msg
}

// wants says what the flag takes, from the setting's kind or the flag's type.
func wants(flags []cli.Flag, flag, detail string) string {
	kind := config.Kind("")
	for _, s := range config.Settings() {
		if s.Flag == flag {
			kind = s.Kind
		}
	}
	for _, f := range flags {
		if _, ok := f.(*cli.DurationFlag); ok && kind == "" && f.Names()[0] == flag {
			kind = config.KindDuration
		}
	}
	switch kind {
	case config.KindDuration, config.KindDurations:
		return " (a duration needs a unit: 500ms, 5s, 2m, 1h)"
	case config.KindInt, config.KindInts:
		return " (a whole number)"
	case config.KindFloat:
		return " (a number)"
	case config.KindBool:
		return " (true or false)"
	}
	if strings.Contains(detail, "duration") {
		return " (a duration needs a unit: 500ms, 5s, 2m, 1h)"
	}
	return ": " + detail
}

// knownEnv lists every GRASP_SYNC_* variable some command reads.
func knownEnv(cmds []*cli.Command) map[string]bool {
	known := map[string]bool{config.EnvAuthKey: true, config.EnvConfig: true}
	for _, c := range cmds {
		for _, f := range c.Flags {
			if ef, ok := f.(interface{ GetEnvVars() []string }); ok {
				for _, v := range ef.GetEnvVars() {
					known[v] = true
				}
			}
		}
	}
	return known
}

// unknownEnv returns the GRASP_SYNC_* variables in environ that no command
// reads (misspellings are otherwise silently ignored), sorted.
func unknownEnv(environ []string, known map[string]bool) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, config.EnvPrefix) && !known[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// environ is the process environment, or the test's.
func (e *env) environ() []string {
	if e.environment != nil {
		return e.environment
	}
	return os.Environ()
}

// suggestEnv returns the known variable closest to name (at most 3 edits
// away), or "".
func suggestEnv(name string, known map[string]bool) string {
	best, bestD := "", 4
	for k := range known {
		if d := editDistance(name, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
