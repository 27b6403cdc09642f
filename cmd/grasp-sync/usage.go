package main

import (
	"errors"
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
		// No command takes arguments: a word after the flags is a flag's
		// value without its flag (`grasp-sync run ws://…`), never ignored.
		c.Before = func(ctx *cli.Context) error {
			if ctx.Args().Present() {
				return &exitError{code: 1, err: fmt.Errorf("unexpected argument %q (settings are flags: --own-relay ws://…); see grasp-sync %s --help", ctx.Args().First(), name)}
			}
			return nil
		}
	}
}

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(\S+)$`)
	reNoValue   = regexp.MustCompile(`^flag needs an argument: -+(\S+)$`)
	reInvalid   = regexp.MustCompile(`^invalid value "(.*)" for flag -+(\S+): (.*)$`)
	reEnv       = regexp.MustCompile(`^could not parse "(.*)" as (\S+) value from (?:env var|environment variable) "(\S+)" for flag (\S+): (.*)$`)
)

// explainUsage rewrites urfave/cli's (Go flag package's) parse errors in the
// terms of this command line: --flag names, the value given, what is wanted.
func explainUsage(err error, flags []cli.Flag) string {
	msg := err.Error()
	if m := reUndefined.FindStringSubmatch(msg); m != nil {
		s := "unknown flag --" + m[1]
		if sug := suggestFlag(flags, m[1]); sug != "" {
			s += " (did you mean " + sug + "?)"
		}
		return s
	}
	if m := reNoValue.FindStringSubmatch(msg); m != nil {
		return "--" + m[1] + " needs a value"
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

// envTypo is a GRASP_SYNC_* variable no command reads (a misspelling is
// otherwise silently ignored) and the known name closest to it ("" when
// none is close).
type envTypo struct{ name, suggestion string }

func (t envTypo) String() string {
	s := "unknown environment variable " + t.name + " ignored"
	if t.suggestion != "" {
		s += " (did you mean " + t.suggestion + "?)"
	}
	return s
}

// envTypos lists the GRASP_SYNC_* variables of the environment that none of
// cmds reads, sorted.
func (e *env) envTypos(cmds []*cli.Command) []envTypo {
	known := knownEnv(cmds)
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	var out []envTypo
	for _, kv := range e.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, config.EnvPrefix) && !known[name] {
			out = append(out, envTypo{name: name, suggestion: closest(name, names)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// environ is the process environment, or the test's.
func (e *env) environ() []string {
	if e.environment != nil {
		return e.environment
	}
	return os.Environ()
}

// closest returns the candidate nearest to name, or "" when even the
// nearest is more than a third of name's length (at most 3) edits away:
// a suggestion for a typo, not for any word at all.
func closest(name string, candidates []string) string {
	best, bestD := "", min(3, max(1, len(name)/3))+1
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// suggestFlag returns the flag of flags closest to the misspelled name, as
// it is written (--name, -n), or "".
func suggestFlag(flags []cli.Flag, name string) string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	names = append(names, "help")
	switch s := closest(name, names); {
	case s == "":
		return ""
	case len(s) == 1:
		return "-" + s
	default:
		return "--" + s
	}
}

// unknownCommand answers a first word that is no command (urfave/cli would
// say "No help topic").
func unknownCommand(c *cli.Context) error {
	word := c.Args().First()
	var names []string
	for _, cmd := range c.App.Commands {
		names = append(names, cmd.Names()...)
	}
	msg := fmt.Sprintf("unknown command %q", word)
	if s := closest(word, names); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	return &exitError{code: 1, err: errors.New(msg + "; see grasp-sync --help")}
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
