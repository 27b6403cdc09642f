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
// settings type's own YAML keys; Validate qualifies them with the section.
type ValidationError = setting.Error

type validator struct{ setting.Checks }

func (v *validator) fail(field, problem string, value any) { v.Fail(field, problem, value) }

func (v *validator) positive(field string, d time.Duration) { v.Positive(field, d) }

func (v *validator) nonNegative(field string, d time.Duration) { v.NonNegative(field, d) }

func (v *validator) positiveInt(field string, n int) { v.PositiveInt(field, n) }

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

	// The sync engine's settings are still declared and checked here,
	// until it owns its settings type like the packages below.
	s := c.Sync
	if len(s.SelfKinds) == 0 {
		v.fail("sync.self_kinds", "must not be empty", s.SelfKinds)
	}
	for i, k := range s.SelfKinds {
		if k < 0 || k > 65535 {
			v.fail(fmt.Sprintf("sync.self_kinds[%d]", i), "must be in 0..65535", k)
		}
	}
	v.positive("sync.batch_window", s.BatchWindow)
	v.positive("sync.quick_reconnect_window", s.QuickReconnectWindow)
	v.nonNegative("sync.since_buffer", s.SinceBuffer)
	v.nonNegative("sync.batch_quiet", s.BatchQuiet)
	v.positive("sync.historic_retry_base", s.HistoricRetryBase)
	v.positive("sync.historic_retry_max", s.HistoricRetryMax)
	if s.HistoricRetryMax < s.HistoricRetryBase {
		v.fail("sync.historic_retry_max", "must be >= sync.historic_retry_base", s.HistoricRetryMax)
	}
	v.positiveInt("sync.values_per_filter", s.ValuesPerFilter)
	v.positiveInt("sync.historic_max_jobs", s.HistoricMaxJobs)
	v.positiveInt("sync.historic_fetch_slots", s.HistoricFetchSlots)
	v.positiveInt("sync.historic_max_events", s.HistoricMaxEvents)
	if s.HistoricMaxBytes < 0 {
		v.fail("sync.historic_max_bytes", "must be >= 0", s.HistoricMaxBytes)
	}
	v.positiveInt("sync.consolidation_threshold", s.ConsolidationThreshold)
	v.positive("sync.consolidation_wait", s.ConsolidationWait)
	v.nonNegative("sync.live_defer_max", s.LiveDeferMax)
	v.positive("sync.full_resync_min", s.FullResyncMin)
	v.positive("sync.full_resync_max", s.FullResyncMax)
	if s.FullResyncMax < s.FullResyncMin {
		v.fail("sync.full_resync_max", "must be >= sync.full_resync_min ("+FormatDuration(s.FullResyncMin)+")", s.FullResyncMax)
	}
	v.positive("sync.empty_relay_check", s.EmptyRelayCheck)
	v.positiveInt("sync.page_size", s.PageSize)
	v.positive("sync.eose_timeout", s.EOSETimeout)
	v.positive("sync.own_reconnect_base", s.OwnReconnectBase)
	v.positive("sync.own_reconnect_max", s.OwnReconnectMax)
	if s.OwnReconnectMax < s.OwnReconnectBase {
		v.fail("sync.own_reconnect_max", "must be >= sync.own_reconnect_base ("+FormatDuration(s.OwnReconnectBase)+")", s.OwnReconnectMax)
	}
	v.section("sync", s.VerifyConfig.Validate())

	v.section("health", c.Health.Validate())

	v.section("publisher", c.Publisher.Config.Validate())
	v.section("publisher", c.Publisher.OwnHeldConfig.Validate())
	v.section("purgatory", c.Purgatory.Config.Validate())

	n := c.Negentropy
	v.section("negentropy", n.Settings.Validate())
	v.positiveInt("negentropy.fetch_batch", n.FetchBatch)
	v.positive("negentropy.support_cache_ttl", n.SupportCacheTTL)
	v.positive("negentropy.claim_wait", n.ClaimWait)

	t := c.Trusted
	v.positive("trusted.interval", t.Interval)
	v.positive("trusted.lookback", t.Lookback)
	v.positiveInt("trusted.max_events_per_cycle", t.MaxEventsPerCycle)

	v.section("rejected", c.Rejected.Validate())

	l := c.Limits
	v.section("limits", l.EventLimits.Validate())
	// Spans two sections: an event must fit in a message.
	if l.MaxEventBytes > r.MaxMessageBytes && r.MaxMessageBytes >= relay.MinMessageBytes {
		v.fail("limits.max_event_bytes", "must be <= relay.max_message_bytes ("+strconv.Itoa(r.MaxMessageBytes)+")", l.MaxEventBytes)
	}
	v.positiveInt("limits.max_relays_per_announcement", l.MaxRelaysPerAnnouncement)
	v.positiveInt("limits.max_tracked_relays", l.MaxTrackedRelays)
	v.positiveInt("limits.max_repositories", l.MaxRepositories)
	v.section("limits", l.RelayLimits.Validate())
	v.section("memory", c.Memory.Validate())
	v.section("cpu", c.CPU.Validate())

	return v.Err()
}
