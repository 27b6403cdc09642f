package purgatory

import (
	"errors"
	"fmt"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid purgatory config")

// Config holds every timer and limit of the purgatory. Start from
// DefaultConfig; a zero value is not valid.
type Config struct {
	// GitDir is the GRASP git directory (<GitDir>/<npub>/<identifier>.git).
	// Empty disables the purgatory: Needs reports false for everything.
	GitDir string
	// OwnDomain is host[:port] of this GRASP service. Clone URLs on it are
	// never used as fetch sources (and so never throttled).
	OwnDomain string
	// HostAll holds events of every repository whose announcement the own
	// relay accepted, also those not listing OwnDomain (an archive of
	// everything). Default false: GRASP-01's rule applies.
	HostAll bool
	// CreateMissingRepos creates a missing bare repository for an accepted
	// announcement when its identifier needs git data. Default false.
	CreateMissingRepos bool
	// AllowPrivateAddresses lets clone URLs reach loopback, private and
	// link-local addresses. Default false; tests on 127.0.0.1 set it.
	AllowPrivateAddresses bool

	// Loop is the longest pause between two passes over the sync queue
	// (a pass also runs when the earliest entry becomes due). Default 1s.
	Loop time.Duration
	// SyncedDelay is the delay before syncing an identifier after an event
	// came from a remote relay (batches bursts). Default 500ms.
	SyncedDelay time.Duration
	// OwnRelayDelay is the delay for an event first seen on the own relay:
	// the author's git push may still be on its way. Default 3m.
	OwnRelayDelay time.Duration
	// Backoff is the wait after the 1st, 2nd, … unsuccessful attempt; the
	// last value repeats. Default 20s, 40s, 80s, 120s.
	Backoff []time.Duration
	// Expiry drops an event held this long without its git data (GRASP-01).
	// Default 30m.
	Expiry time.Duration

	// DomainConcurrency is the most git requests in flight per domain. Default 5.
	DomainConcurrency int
	// DomainRequestsPerWindow is the most git requests per domain within
	// DomainWindow. Default 30.
	DomainRequestsPerWindow int
	// DomainWindow is the sliding window of DomainRequestsPerWindow. Default 1m.
	DomainWindow time.Duration

	// FailureLogInterval is the least time between two WARN lines about
	// failed fetches (or releases) of one identifier; the failures between
	// are counted in the next line. Default 5m.
	FailureLogInterval time.Duration

	// GitCommandTimeout bounds every git command. Default 2m.
	GitCommandTimeout time.Duration
	// GitOutputCap bounds captured stdout/stderr of a git command. Default 16 MiB.
	GitOutputCap int

	// MaxEntries bounds the events held (states, PRs, PR updates). Default 10000.
	MaxEntries int
	// MaxAnnouncements bounds the announcements kept. Default 50000.
	MaxAnnouncements int
	// MaxCloneURLs bounds the clone URLs tried per identifier. Default 32.
	MaxCloneURLs int
	// MaxDomainLabels bounds distinct domain label values on metrics; the
	// rest are reported as "other". Default 50.
	MaxDomainLabels int
}

// DefaultConfig returns the documented defaults (GitDir empty: off).
func DefaultConfig() Config {
	return Config{
		Loop:                    time.Second,
		SyncedDelay:             500 * time.Millisecond,
		OwnRelayDelay:           3 * time.Minute,
		Backoff:                 []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 120 * time.Second},
		Expiry:                  30 * time.Minute,
		DomainConcurrency:       5,
		DomainRequestsPerWindow: 30,
		DomainWindow:            time.Minute,
		FailureLogInterval:      5 * time.Minute,
		GitCommandTimeout:       gitx.DefaultTimeout,
		GitOutputCap:            gitx.DefaultOutputCap,
		MaxEntries:              10000,
		MaxAnnouncements:        50000,
		MaxCloneURLs:            32,
		MaxDomainLabels:         50,
	}
}

// Validate checks every field and names the first bad one with its value.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("%w: purgatory.%s: %s, got %v", ErrInvalidConfig, field, why, v)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"loop", c.Loop}, {"expiry", c.Expiry}, {"domain_window", c.DomainWindow}, {"git_timeout", c.GitCommandTimeout},
		{"failure_log_interval", c.FailureLogInterval},
	} {
		if d.v <= 0 {
			return bad(d.name, fmt.Sprintf("%q", d.v), "must be > 0")
		}
	}
	// The delays may be 0 (sync at the next pass), not negative.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"synced_delay", c.SyncedDelay}, {"own_relay_delay", c.OwnRelayDelay}} {
		if d.v < 0 {
			return bad(d.name, fmt.Sprintf("%q", d.v), "must be >= 0")
		}
	}
	if len(c.Backoff) == 0 {
		return bad("backoff", "[]", "must have at least one value")
	}
	for i, b := range c.Backoff {
		if b <= 0 {
			return bad(fmt.Sprintf("backoff[%d]", i), fmt.Sprintf("%q", b), "must be > 0")
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"domain_concurrency", c.DomainConcurrency}, {"domain_requests_per_window", c.DomainRequestsPerWindow},
		{"git_output_cap", c.GitOutputCap}, {"max_entries", c.MaxEntries}, {"max_announcements", c.MaxAnnouncements},
		{"max_clone_urls", c.MaxCloneURLs}, {"max_domain_labels", c.MaxDomainLabels},
	} {
		if n.v <= 0 {
			return bad(n.name, n.v, "must be > 0")
		}
	}
	return nil
}

// backoff returns the wait after the n-th (1-based) failed attempt.
func (c Config) backoff(n int) time.Duration {
	return backoff.Schedule(c.Backoff).Delay(n)
}
