package purgatory

import (
	"errors"
	"fmt"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/nostrurl"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid purgatory config")

// Config holds every timer and limit of the purgatory. Start from
// DefaultConfig; a zero value is not valid.
//
// It also serves the configuration's purgatory section: each user setting
// carries its YAML key and help text (flag, environment variable and
// documentation are derived from them); fields tagged yaml:"-" are not
// user settings: the sidecar sets them from other sections or they keep
// their defaults.
type Config struct {
	// GitDir is the GRASP git directory (<GitDir>/<npub>/<identifier>.git).
	// Empty disables the purgatory: Needs reports false for everything.
	GitDir string `yaml:"-"`
	// OwnDomain is host[:port] of this GRASP service. Clone URLs on it are
	// never used as fetch sources (and so never throttled).
	OwnDomain string `yaml:"-"`
	// HostAll holds events of every repository whose announcement the own
	// relay accepted, also those not listing OwnDomain (an archive of
	// everything). Default false: GRASP-01's rule applies.
	HostAll bool `yaml:"-"`
	// AllowPrivateAddresses lets clone URLs reach loopback, private and
	// link-local addresses. Default false; tests on 127.0.0.1 set it.
	AllowPrivateAddresses bool `yaml:"-"`

	// Loop is the longest pause between two passes over the sync queue
	// (a pass also runs when the earliest entry becomes due). Default 1s.
	Loop time.Duration `yaml:"loop" help:"Interval of the purgatory worker loop."`
	// SyncedDelay is the delay before syncing an identifier after an event
	// came from a remote relay (batches bursts). Default 500ms.
	SyncedDelay time.Duration `yaml:"synced_delay" help:"Delay before the first git attempt for events obtained by sync."`
	// OwnRelayDelay is the delay for an event first seen on the own relay:
	// the author's git push may still be on its way. Default 3m.
	OwnRelayDelay time.Duration `yaml:"own_relay_delay" help:"Delay before the first git attempt for events first seen on the own relay (gives the pusher time)."`
	// Backoff is the wait after the 1st, 2nd, … unsuccessful attempt; the
	// last value repeats. Default 20s, 40s, 80s, 120s.
	Backoff []time.Duration `yaml:"backoff" help:"Delays between git attempts; the last one repeats."`
	// Expiry drops an event held this long without its git data (GRASP-01).
	// Default 30m.
	Expiry time.Duration `yaml:"expiry" help:"Events without git data after this long are dropped (GRASP-01)."`

	// DomainConcurrency is the most git requests in flight per domain. Default 5.
	DomainConcurrency int `yaml:"domain_concurrency" help:"Concurrent git fetches per clone domain."`
	// DomainRequestsPerWindow is the most git requests per domain within
	// DomainWindow. Default 30.
	DomainRequestsPerWindow int `yaml:"domain_requests_per_window" help:"Git requests per clone domain per domain_window."`
	// DomainWindow is the sliding window of DomainRequestsPerWindow. Default 1m.
	DomainWindow time.Duration `yaml:"domain_window" help:"Window of the per-domain request limit."`

	// GitTimeout bounds every git command. Default 2m.
	GitTimeout time.Duration `yaml:"git_timeout" help:"Timeout of one git command."`

	// FailureLogInterval is the least time between two WARN lines about
	// failed fetches (or releases) of one identifier; the failures between
	// are counted in the next line. Default 5m.
	FailureLogInterval time.Duration `yaml:"failure_log_interval" help:"Least time between two warnings about failed git fetches (or releases) of one identifier; the failures in between are counted in the next warning."`

	// SummaryInterval is how often the purgatory logs its counts (events
	// released, repositories created, git fetches and failed attempts at
	// INFO; events expired or refused at WARN); each event and fetch is a
	// DEBUG line. Default SummaryInterval (1m).
	SummaryInterval time.Duration `yaml:"summary_interval" help:"Interval of the purgatory's summary log lines: events released, repositories created, git fetches and failed attempts (info), events expired or refused (warn, with their count); each event and fetch is logged at debug."`

	// CreateMissingRepos creates a missing bare repository for an accepted
	// announcement when its identifier needs git data. Default false.
	CreateMissingRepos bool `yaml:"create_missing_repos" help:"Create a bare repository under git_dir when an accepted announcement has none."`

	// MaxEntries bounds the events held (states, PRs, PR updates). Default 10000.
	MaxEntries int `yaml:"max_entries" help:"Events held in purgatory at most."`

	// NostrURLCacheTTL is how long a nostr:// clone URL's resolution is
	// remembered (NostrResolver.TTL, NIP05Lookup.TTL). Default
	// nostrurl.DefaultNostrResolveTTL.
	NostrURLCacheTTL time.Duration `yaml:"nostr_url_cache_ttl" help:"How long a nostr:// clone URL's resolution (the named owner's announcement and GRASP list, read from relays) is remembered."`
	// NIP05Timeout bounds one NIP-05 document request (NIP05Lookup).
	// Default nostrurl.DefaultNIP05Timeout.
	NIP05Timeout time.Duration `yaml:"nip05_timeout" help:"Timeout of the HTTPS request for a NIP-05 owner's /.well-known/nostr.json (nostr://name@domain/... clone URLs; the domain is dialled under the outbound address policy, redirects are refused)."`

	// GitOutputCap bounds captured stdout/stderr of a git command. Default 16 MiB.
	GitOutputCap int `yaml:"-"`
	// MaxAnnouncements bounds the announcements kept. Default 50000.
	MaxAnnouncements int `yaml:"-"`
	// MaxCloneURLs bounds the clone URLs tried per identifier. Default 32.
	MaxCloneURLs int `yaml:"-"`
	// MaxDomainLabels bounds distinct domain label values on metrics; the
	// rest are reported as "other". Default 50.
	MaxDomainLabels int `yaml:"-"`
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
		SummaryInterval:         SummaryInterval,
		GitTimeout:              gitx.DefaultTimeout,
		GitOutputCap:            gitx.DefaultOutputCap,
		MaxEntries:              10000,
		NostrURLCacheTTL:        nostrurl.DefaultNostrResolveTTL,
		NIP05Timeout:            nostrurl.DefaultNIP05Timeout,
		MaxAnnouncements:        50000,
		MaxCloneURLs:            32,
		MaxDomainLabels:         50,
	}
}

// Validate reports every invalid field, each as a *setting.Error keyed by
// its YAML key; the errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	v := setting.Checks{Kind: ErrInvalidConfig}
	v.Positive("loop", c.Loop)
	// The delays may be 0 (sync at the next pass), not negative.
	v.NonNegative("synced_delay", c.SyncedDelay)
	v.NonNegative("own_relay_delay", c.OwnRelayDelay)
	if len(c.Backoff) == 0 {
		v.Fail("backoff", "must not be empty", c.Backoff)
	}
	for i, d := range c.Backoff {
		v.Positive(fmt.Sprintf("backoff[%d]", i), d)
	}
	v.Positive("expiry", c.Expiry)
	v.Positive("nostr_url_cache_ttl", c.NostrURLCacheTTL)
	v.Positive("nip05_timeout", c.NIP05Timeout)
	v.PositiveInt("domain_concurrency", c.DomainConcurrency)
	v.PositiveInt("domain_requests_per_window", c.DomainRequestsPerWindow)
	v.Positive("domain_window", c.DomainWindow)
	v.Positive("git_timeout", c.GitTimeout)
	v.Positive("failure_log_interval", c.FailureLogInterval)
	v.Positive("summary_interval", c.SummaryInterval)
	v.PositiveInt("max_entries", c.MaxEntries)
	// Not user settings: these keep their defaults outside tests.
	v.PositiveInt("git_output_cap", c.GitOutputCap)
	v.PositiveInt("max_announcements", c.MaxAnnouncements)
	v.PositiveInt("max_clone_urls", c.MaxCloneURLs)
	v.PositiveInt("max_domain_labels", c.MaxDomainLabels)
	return v.Err()
}

// backoff returns the wait after the n-th (1-based) failed attempt.
func (c Config) backoff(n int) time.Duration {
	return backoff.Schedule(c.Backoff).Delay(n)
}
