// Package setting is what an engine package needs to declare its user
// settings beside the code that reads them: a field error that names the
// setting by its YAML key, and the checks every settings type uses.
//
// A settings type is a struct whose fields carry their YAML key and help
// text as tags (`yaml:"backoff_base" help:"..."`); fields that are not
// user settings are tagged `yaml:"-"`. Its package gives the defaults
// (DefaultConfig) and a Validate method built on Checks. The configuration
// loader embeds the type in its section and qualifies the errors with the
// section's path (Within), so a problem reads the same from the engine and
// from the configuration: `<key>: <problem>, got "<value>"`.
//
// This package imports nothing of the project.
package setting

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("invalid configuration")

// Error names a setting (its YAML path), what is wrong with it and the
// offending value.
type Error struct {
	Field   string
	Problem string
	Value   string
	// Flag (without dashes) and Env are the setting's command-line flag
	// and environment variable, when known: the configuration loader,
	// which derives them from the YAML path, sets them. Detail shows them.
	Flag, Env string

	// kind, when set, is matched by errors.Is too (an engine's own
	// invalid-configuration sentinel).
	kind error
	// peer is the setting Problem compares the field with (relative to
	// the same settings type), op the comparison and peerValue its value:
	// Within qualifies the peer's key along with Field.
	peer, op, peerValue string
}

// Error renders `field: problem, got "value"`.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s, got %q", e.Field, e.Problem, e.Value)
}

// Detail renders `field (--flag, ENV): problem, got "value"`: the
// setting as the YAML key, the flag and the environment variable name it.
// Without Flag and Env it is Error.
func (e *Error) Detail() string {
	var names []string
	if e.Flag != "" {
		names = append(names, "--"+e.Flag)
	}
	if e.Env != "" {
		names = append(names, e.Env)
	}
	if len(names) == 0 {
		return e.Error()
	}
	return fmt.Sprintf("%s (%s): %s, got %q", e.Field, strings.Join(names, ", "), e.Problem, e.Value)
}

// Detail renders err one problem a line: each *Error by its Detail (its
// YAML key, flag and environment variable), any other error as it is. A
// nil err is "".
func Detail(err error) string {
	list := flatten(err)
	lines := make([]string, 0, len(list))
	for _, e := range list {
		if se, ok := e.(*Error); ok {
			lines = append(lines, se.Detail())
		} else {
			lines = append(lines, e.Error())
		}
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true, and errors.Is(err, kind) for
// the sentinel the Checks were given.
func (e *Error) Is(target error) bool {
	return target == ErrInvalid || (e.kind != nil && target == e.kind)
}

// Checks collects the problems of one settings type. The zero value is
// ready; Kind, when set, is matched by errors.Is on every error.
type Checks struct {
	Kind error
	errs []error
}

// Fail records that field's value is wrong.
func (c *Checks) Fail(field, problem string, value any) {
	c.errs = append(c.errs, &Error{Field: field, Problem: problem, Value: Format(value), kind: c.Kind})
}

// Positive requires d > 0.
func (c *Checks) Positive(field string, d time.Duration) {
	if d <= 0 {
		c.Fail(field, "must be > 0", d)
	}
}

// NonNegative requires d >= 0.
func (c *Checks) NonNegative(field string, d time.Duration) {
	if d < 0 {
		c.Fail(field, "must be >= 0", d)
	}
}

// PositiveInt requires n > 0.
func (c *Checks) PositiveInt(field string, n int) {
	if n <= 0 {
		c.Fail(field, "must be > 0", n)
	}
}

// NonNegativeInt requires n >= 0.
func (c *Checks) NonNegativeInt(field string, n int) {
	if n < 0 {
		c.Fail(field, "must be >= 0", n)
	}
}

// Compare records that field (value v) must be op ("<", "<=", ">=", ">")
// the setting peer (value pv) of the same settings type; it reports
// whether the comparison holds. The problem reads
// `must be >= peer (pv)`, with peer qualified by Within.
func (c *Checks) Compare(field string, v any, op, peer string, pv any) bool {
	var ok bool
	switch a, b := number(v), number(pv); op {
	case "<":
		ok = a < b
	case "<=":
		ok = a <= b
	case ">=":
		ok = a >= b
	case ">":
		ok = a > b
	default:
		panic("setting: unknown comparison " + op)
	}
	if !ok {
		e := &Error{Field: field, Value: Format(v), kind: c.Kind, peer: peer, op: op, peerValue: Format(pv)}
		e.Problem = e.compareProblem("")
		c.errs = append(c.errs, e)
	}
	return ok
}

func (e *Error) compareProblem(prefix string) string {
	return "must be " + e.op + " " + prefix + e.peer + " (" + e.peerValue + ")"
}

func number(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	case time.Duration:
		return float64(x)
	}
	panic(fmt.Sprintf("setting: cannot compare %T", v))
}

// Add records the problems in err (nil is ignored; a joined error adds
// each of its errors): a check of a nested settings type, already
// qualified (Within).
func (c *Checks) Add(err error) {
	c.errs = append(c.errs, flatten(err)...)
}

// flatten lists the errors of an errors.Join tree, nil for nil.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// Err returns every problem recorded, joined, or nil.
func (c *Checks) Err() error { return errors.Join(c.errs...) }

// Within qualifies every *Error in err (a single error or an errors.Join
// tree of them, which it flattens) with the section's YAML path: "jitter" becomes "health.jitter",
// and so does a compared peer's key. Other errors are kept as they are.
// A nil err stays nil.
func Within(section string, err error) error {
	list := flatten(err)
	if list == nil {
		return nil
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		se, ok := e.(*Error)
		if !ok {
			out = append(out, e)
			continue
		}
		q := *se
		q.Field = section + "." + se.Field
		if se.peer != "" {
			q.peer = section + "." + se.peer
			q.Problem = q.compareProblem("")
		}
		out = append(out, &q)
	}
	return errors.Join(out...)
}

// Format renders a setting's value the way a user writes it on the
// command line or in the environment.
func Format(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []string:
		return strings.Join(x, ",")
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case []int:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.Itoa(n)
		}
		return strings.Join(parts, ",")
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		return FormatDuration(x)
	case []time.Duration:
		parts := make([]string, len(x))
		for i, d := range x {
			parts[i] = FormatDuration(d)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// FormatDuration prints d without zero trailing units ("1h", "15m",
// "500ms"), in a form time.ParseDuration reads back.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
