// Package config holds grasp-sync's configuration: its defaults, the YAML
// file format, the environment and command-line overlays, and validation.
//
// Settings are applied in this order, each layer overriding the previous one
// only for the values it actually sets: Default → YAML file (unknown keys are
// refused) → environment (GRASP_SYNC_*) → command-line flags → Validate.
// A zero value given explicitly is a value, never "unset".
//
// Every setting is declared once: its field, YAML key, help text, default
// and check sit together in the package that reads it. An engine package
// owns a settings type (health.Config, publish.Config, relay.Settings, …)
// whose fields carry the yaml and help tags, a DefaultConfig (or
// DefaultSettings) and a Validate method reporting setting.Errors keyed by
// those YAML keys. Config embeds these types as its sections, inline
// (`yaml:",inline"`) where one section's keys come from several packages;
// the flag table, the environment names, CONFIGURATION.md and the
// reference grasp-sync.example.yml are all derived from the tags (see
// Settings). Default assembles the packages' defaults, and Validate
// qualifies their errors with the section's path and adds the checks that
// span sections. Only settings no engine reads (the HTTP surface,
// shutdown, logging, the dial allow list, whether purgatory runs) are
// declared in this package. No engine package may import config.
package config

import (
	"time"

	"github.com/grasp-sync/grasp-sync/internal/gitserve"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/memlimit"
	"github.com/grasp-sync/grasp-sync/internal/procs"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/internal/strfrypolicy"
	"github.com/grasp-sync/grasp-sync/internal/trusted"
)

// Config is the whole configuration of a grasp-sync process.
//
// Struct tags: `yaml` names the key, `help` documents it, `flag` overrides the
// derived flag name (default: the dotted YAML path with '_' replaced by '-'),
// `env` overrides the derived environment name (default: GRASP_SYNC_ plus
// the flag name upper-cased with '.' and '-' replaced by '_'). The tags are
// read on each section's type wherever it is declared; a field tagged
// `yaml:",inline"` adds its struct's keys to the enclosing section.
type Config struct {
	OwnRelay        string        `yaml:"own_relay" help:"WebSocket URL (ws:// or wss://) of the operator's own relay. Required."`
	BootstrapRelays []string      `yaml:"bootstrap_relays" flag:"bootstrap-relay" help:"Relays always connected for discovery: asked for every announcement and state (layer 1); for a repository's other events only when it lists them, or with sync.bootstrap_all_layers (ws:// or wss://)."`
	TrustedRelays   []string      `yaml:"trusted_relays" flag:"trusted-relay" help:"Archive relays reconciled periodically with NIP-77 over the trusted lookback window (ws:// or wss://)."`
	GitDir          string        `yaml:"git_dir" help:"Shared git directory of the GRASP service (<git_dir>/<npub>/<identifier>.git). Empty disables purgatory: state and PR events are published as they come."`
	ServiceDomain   string        `yaml:"service_domain" help:"HOST[:PORT] this GRASP service is reached at; clone and relay URLs on this host are ours and are never fetched from."`
	Listen          string        `yaml:"listen" help:"Address of the HTTP surface (/metrics, /healthz, /readyz, /status)."`
	ShutdownGrace   time.Duration `yaml:"shutdown_grace" help:"On SIGTERM/SIGINT, time allowed to flush the publisher and wait for git commands before giving up."`

	Log        Log                   `yaml:"log" help:"Logging."`
	Auth       Auth                  `yaml:"auth" help:"NIP-42 authentication to the own relay."`
	Dial       Dial                  `yaml:"dial" help:"Outbound connection policy for URLs learnt from announcements."`
	Relay      relay.Settings        `yaml:"relay" help:"WebSocket connections to every relay (own and remote)."`
	Sync       Sync                  `yaml:"sync" help:"GRASP-02 proactive sync."`
	Health     health.Config         `yaml:"health" help:"Per-relay health: backoff, dead relays, rate limits."`
	Publisher  Publisher             `yaml:"publisher" help:"Publishing events into the own relay."`
	Purgatory  Purgatory             `yaml:"purgatory" help:"Holding state and PR events until their git objects exist locally."`
	GitHTTP    gitserve.Config       `yaml:"git_http" help:"Read-only git server of git_dir's repositories (smart HTTP: clone and fetch, never a push), off unless git_http.listen is set."`
	Negentropy historic.NegSettings  `yaml:"negentropy" help:"NIP-77 negentropy reconciliation."`
	Trusted    trusted.Settings      `yaml:"trusted" help:"Periodic reconciliation against trusted_relays."`
	Rejected   ingest.RejectedConfig `yaml:"rejected" help:"RejectedIndex: events the own relay refused."`
	Limits     Limits                `yaml:"limits" help:"Bounds that keep one relay or announcement from exhausting memory."`
	State      statestore.Config     `yaml:"state" help:"Persistent sync state: with a directory, a restart resumes instead of redoing the work."`
	Memory     memlimit.Config       `yaml:"memory" help:"The Go runtime's memory use."`
	CPU        procs.Config          `yaml:"cpu" help:"The Go runtime's use of the CPUs."`

	StrfryPolicy strfrypolicy.Settings `yaml:"strfry_policy" help:"grasp-sync strfry-policy, strfry's write-policy plugin (it reads own_relay, service_domain and sync.host_all too)."`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level" help:"Log level: debug, info, warn or error."`
	Format string `yaml:"format" help:"Log format: json (for machines) or console (for humans)."`
	// ProgressInterval paces the sidecar's "sync progress" lines.
	ProgressInterval time.Duration `yaml:"progress_interval" help:"Interval of the info line logged while relays sync or events flow (relays done/total, events received and published, rates), and of each syncing relay's progress line; 0 turns them off."`
}

// Auth configures NIP-42 authentication.
type Auth struct {
	KeyFile string `yaml:"key_file" help:"File holding the secret key used for NIP-42 AUTH (nsec1… or 64 hex characters). The key may instead be given in the environment variable GRASP_SYNC_AUTH_KEY. It is never logged."`
	// Key is the loaded secret key, filled by Load/ResolveKey from KeyFile or
	// GRASP_SYNC_AUTH_KEY. It is never serialised.
	Key SecretKey `yaml:"-"`
}

// Dial configures which destinations announcements may make us connect to.
type Dial struct {
	Allow []string `yaml:"allow" help:"CIDRs or host names that discovered relay and clone URLs (and NIP-05 domains of nostr:// clone URLs) may reach even though they are loopback, private, link-local or metadata addresses."`
}

// Sync configures GRASP-02 proactive sync: the sync engine's settings,
// then the shared event handler's signature verification.
type Sync struct {
	reposync.Settings   `yaml:",inline"`
	ingest.VerifyConfig `yaml:",inline"`
}

// Publisher configures publishing into the own relay: the publisher's
// settings, then the one of the shared event handler about events the own
// relay holds in its purgatory.
type Publisher struct {
	publish.Config       `yaml:",inline"`
	ingest.OwnHeldConfig `yaml:",inline"`
}

// Purgatory configures the git-data purgatory: whether it runs, then the
// purgatory's own settings.
type Purgatory struct {
	Enabled          bool `yaml:"enabled" help:"Hold state (30618) and PR (1618/1619) events until their git objects exist. Effective only with git_dir."`
	purgatory.Config `yaml:",inline"`
}

// Limits bounds inputs: one event's size and tags (the shared event
// handler's), the sync engine's bounds on relays and repositories, and
// what one relay may send (the handler's).
type Limits struct {
	ingest.EventLimits `yaml:",inline"`
	repoindex.Bounds   `yaml:",inline"`
	ingest.RelayLimits `yaml:",inline"`
	localindex.Config  `yaml:",inline"`
}

// Default returns the configuration with every default filled in. OwnRelay
// is empty and must be set before Validate succeeds.
//
// Each engine package owns the defaults of the settings it reads (its
// DefaultConfig, DefaultSettings or the like); Default assembles them.
// Only settings no engine reads (the HTTP surface, shutdown, logging, the
// dial allow list, whether purgatory runs) are defined here.
func Default() *Config {
	in := ingest.DefaultConfig()
	return &Config{
		BootstrapRelays: []string{},
		TrustedRelays:   []string{},
		Listen:          ":9090",
		ShutdownGrace:   10 * time.Second,
		Log:             Log{Level: "info", Format: "json", ProgressInterval: 10 * time.Second},
		Dial:            Dial{Allow: []string{}},
		Relay:           relay.DefaultSettings(),
		Sync:            Sync{Settings: reposync.DefaultSettings(), VerifyConfig: in.VerifyConfig},
		Health:          health.DefaultConfig(),
		Publisher:       Publisher{Config: publish.DefaultConfig(), OwnHeldConfig: in.OwnHeldConfig},
		Purgatory:       Purgatory{Enabled: true, Config: purgatory.DefaultConfig()},
		GitHTTP:         gitserve.DefaultConfig(),
		Negentropy:      historic.DefaultNegSettings(),
		Trusted:         trusted.DefaultSettings(),
		Rejected:        in.Rejected,
		Limits:          Limits{EventLimits: in.EventLimits, Bounds: repoindex.DefaultBounds(), RelayLimits: in.RelayLimits, Config: localindex.DefaultConfig()},
		State:           statestore.DefaultConfig(),
		Memory:          memlimit.DefaultConfig(),
		CPU:             procs.DefaultConfig(),
		StrfryPolicy:    strfrypolicy.DefaultSettings(),
	}
}

// PurgatoryActive reports whether purgatory runs: it must be enabled and a
// git directory configured.
func (c *Config) PurgatoryActive() bool {
	return c.Purgatory.Enabled && c.GitDir != ""
}
