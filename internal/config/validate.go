package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// ErrInvalid is matched (errors.Is) by every ValidationError.
var ErrInvalid = setting.ErrInvalid

// ValidationError names a field (its YAML path), what is wrong with it and
// the offending value; it renders `field: problem, got "value"`. Engine
// packages report theirs with the same type (setting.Error), keyed by the
// settings type's own YAML keys; Validate qualifies them with the section
// and names each setting's flag and environment variable (Flag, Env), which
// Detail shows: `field (--flag, ENV): problem, got "value"`.
type ValidationError = setting.Error

// Detail renders err (Validate's, or any error of the loader) one problem
// a line, each ValidationError naming its setting by YAML key, flag and
// environment variable: `own_relay (--own-relay, GRASP_SYNC_OWN_RELAY): is
// required, got ""`.
func Detail(err error) string { return setting.Detail(err) }

// named returns err with every ValidationError given its setting's flag
// and environment variable (an indexed field, bootstrap_relays[1], is its
// list's setting). Errors of no known setting are kept as they are.
func named(err error) error {
	if err == nil {
		return nil
	}
	list := []error{err}
	j, joined := err.(interface{ Unwrap() []error })
	if joined {
		list = j.Unwrap()
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		ve, ok := e.(*ValidationError)
		if !ok {
			out = append(out, e)
			continue
		}
		key, _, _ := strings.Cut(ve.Field, "[")
		if s, ok := Lookup(key); ok {
			q := *ve
			q.Flag, q.Env = s.Flag, s.Env
			ve = &q
		}
		out = append(out, ve)
	}
	if !joined {
		return out[0]
	}
	return errors.Join(out...)
}

type validator struct{ setting.Checks }

func (v *validator) fail(field, problem string, value any) { v.Fail(field, problem, value) }

func (v *validator) positive(field string, d time.Duration) { v.Positive(field, d) }

func (v *validator) nonNegative(field string, d time.Duration) { v.NonNegative(field, d) }

// section adds the problems an engine's settings type reported, qualified
// with the section's YAML path.
func (v *validator) section(path string, err error) { v.Add(setting.Within(path, err)) }

var hostnameRE = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$`)

// ValidRelayURL reports whether s is an absolute ws:// or wss:// URL with a
// host and nothing but an optional path.
func ValidRelayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("must be a ws:// or wss:// URL")
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return errors.New("must be a ws:// or wss:// URL")
	}
	if u.Hostname() == "" {
		return errors.New("must have a host")
	}
	if u.User != nil || u.Fragment != "" {
		return errors.New("must not carry credentials or a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("must have a valid port")
		}
	}
	return nil
}

func validHostPort(s string) bool {
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Contains(s, ":") && net.ParseIP(s) == nil {
		return false
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	return net.ParseIP(host) != nil || hostnameRE.MatchString(host)
}

// Validate checks every field and returns all problems joined; each is a
// *ValidationError (errors.Is(err, ErrInvalid) holds). A section served by
// an engine's settings type is checked by its Validate, whose errors are
// qualified with the section's path; the checks that span sections, and
// those of the settings declared here, are made here.
func (c *Config) Validate() error {
	v := &validator{}

	if c.OwnRelay == "" {
		v.fail("own_relay", "is required", c.OwnRelay)
	} else if err := ValidRelayURL(c.OwnRelay); err != nil {
		v.fail("own_relay", err.Error(), c.OwnRelay)
	}
	for i, u := range c.BootstrapRelays {
		if err := ValidRelayURL(u); err != nil {
			v.fail(fmt.Sprintf("bootstrap_relays[%d]", i), err.Error(), u)
		}
	}
	for i, u := range c.TrustedRelays {
		if err := ValidRelayURL(u); err != nil {
			v.fail(fmt.Sprintf("trusted_relays[%d]", i), err.Error(), u)
		}
	}
	if c.ServiceDomain != "" && !validHostPort(c.ServiceDomain) {
		v.fail("service_domain", "must be HOST or HOST:PORT (no scheme, no path)", c.ServiceDomain)
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		v.fail("listen", "must be HOST:PORT or :PORT", c.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail("listen", "must have a numeric port", c.Listen)
	}
	v.positive("shutdown_grace", c.ShutdownGrace)
	v.section("state", c.State.Validate())

	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.fail("log.level", "must be one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "console":
	default:
		v.fail("log.format", "must be json or console", c.Log.Format)
	}
	v.nonNegative("log.progress_interval", c.Log.ProgressInterval)
	for i, a := range c.Dial.Allow {
		if _, _, err := net.ParseCIDR(a); err == nil {
			continue
		}
		if net.ParseIP(a) != nil || hostnameRE.MatchString(a) {
			continue
		}
		v.fail(fmt.Sprintf("dial.allow[%d]", i), "must be a CIDR, an IP address or a host name", a)
	}

	r := c.Relay
	v.section("relay", r.Validate())

	v.section("sync", c.Sync.Settings.Validate())
	v.section("sync", c.Sync.VerifyConfig.Validate())

	v.section("health", c.Health.Validate())

	v.section("publisher", c.Publisher.Config.Validate())
	v.section("publisher", c.Publisher.OwnHeldConfig.Validate())
	v.section("purgatory", c.Purgatory.Config.Validate())
	v.section("git_http", c.GitHTTP.Validate())
	if c.GitHTTP.Enabled() {
		// Spans sections: what is served, and where.
		if c.GitDir == "" {
			v.fail("git_http.listen", "needs git_dir (the repositories it serves)", c.GitHTTP.Listen)
		}
		if c.GitHTTP.Listen == c.Listen && !strings.HasSuffix(c.Listen, ":0") { // port 0: each its own
			v.fail("git_http.listen", "must differ from listen ("+c.Listen+")", c.GitHTTP.Listen)
		}
	}

	v.section("negentropy", c.Negentropy.Validate())
	v.section("trusted", c.Trusted.Validate())

	v.section("rejected", c.Rejected.Validate())

	l := c.Limits
	v.section("limits", l.EventLimits.Validate())
	// Spans two sections: an event must fit in a message.
	if l.MaxEventBytes > r.MaxMessageBytes && r.MaxMessageBytes >= relay.MinMessageBytes {
		v.fail("limits.max_event_bytes", "must be <= relay.max_message_bytes ("+strconv.Itoa(r.MaxMessageBytes)+")", l.MaxEventBytes)
	}
	v.section("limits", l.Bounds.Validate())
	v.section("limits", l.RelayLimits.Validate())
	v.section("limits", l.Config.Validate())
	v.section("memory", c.Memory.Validate())
	v.section("cpu", c.CPU.Validate())
	v.section("strfry_policy", c.StrfryPolicy.Validate())

	return named(v.Err())
}

// ValidateStrfryPolicy adds what grasp-sync strfry-policy needs beyond
// Validate: a service_domain to decide by (GRASP-01), unless sync.host_all
// accepts every announcement.
func (c *Config) ValidateStrfryPolicy() error {
	if c.ServiceDomain == "" && !c.Sync.HostAll {
		return named(&ValidationError{Field: "service_domain",
			Problem: "is required by strfry-policy: it accepts the announcements that list it in clone and relays (GRASP-01); sync.host_all accepts every announcement instead",
			Value:   c.ServiceDomain})
	}
	return nil
}
