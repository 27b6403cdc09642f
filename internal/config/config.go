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
// declared in this package, and so are, until it owns them, the sync
// engine's (sync, parts of negentropy and limits, trusted). No engine
// package may import config.
package config

import (
	"slices"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/memlimit"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/procs"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
	"github.com/grasp-sync/grasp-sync/internal/statestore"
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
	Negentropy Negentropy            `yaml:"negentropy" help:"NIP-77 negentropy reconciliation."`
	Trusted    Trusted               `yaml:"trusted" help:"Periodic reconciliation against trusted_relays."`
	Rejected   ingest.RejectedConfig `yaml:"rejected" help:"RejectedIndex: events the own relay refused."`
	Limits     Limits                `yaml:"limits" help:"Bounds that keep one relay or announcement from exhausting memory."`
	State      statestore.Config     `yaml:"state" help:"Persistent sync state: with a directory, a restart resumes instead of redoing the work."`
	Memory     memlimit.Config       `yaml:"memory" help:"The Go runtime's memory use."`
	CPU        procs.Config          `yaml:"cpu" help:"The Go runtime's use of the CPUs."`
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

// Sync configures GRASP-02 proactive sync.
type Sync struct {
	SelfKinds              []int         `yaml:"self_kinds" help:"Event kinds the self-subscription on the own relay watches to discover repositories and root events."`
	BatchWindow            time.Duration `yaml:"batch_window" help:"Longest a self-subscriber batch collects events; the timer starts at the first event and is not reset."`
	BatchQuiet             time.Duration `yaml:"batch_quiet" help:"A self-subscriber batch is applied once no new event came for this long, before batch_window ends (0: only batch_window)."`
	QuickReconnectWindow   time.Duration `yaml:"quick_reconnect_window" help:"A relay that reconnects within this window resumes with since=disconnect−since_buffer instead of a full historic sync."`
	SinceBuffer            time.Duration `yaml:"since_buffer" help:"Overlap subtracted from since on quick reconnects (0 is allowed)."`
	ValuesPerFilter        int           `yaml:"values_per_filter" help:"Tag values per filter in layers 2 and 3."`
	ConsolidationThreshold int           `yaml:"consolidation_threshold" help:"Open filters per relay above which they are consolidated."`
	ConsolidationWait      time.Duration `yaml:"consolidation_wait" help:"How long consolidation waits for pending batches to finish."`
	FullResyncMin          time.Duration `yaml:"full_resync_min" help:"Lower bound of the random interval between full resyncs of a relay."`
	FullResyncMax          time.Duration `yaml:"full_resync_max" help:"Upper bound of the random interval between full resyncs of a relay."`
	EmptyRelayCheck        time.Duration `yaml:"empty_relay_check" help:"Interval of the check that disconnects non-bootstrap relays with nothing to sync."`
	PageSize               int           `yaml:"page_size" help:"Limit of one REQ page in historic sync without negentropy (strfry caps at 500)."`
	EOSETimeout            time.Duration `yaml:"eose_timeout" help:"How long to wait for EOSE of a historic REQ before treating it as failed."`
	OwnReconnectBase       time.Duration `yaml:"own_reconnect_base" help:"First wait before the self-subscription redials the own relay after losing it; doubles per failure up to own_reconnect_max."`
	OwnReconnectMax        time.Duration `yaml:"own_reconnect_max" help:"Longest wait between the self-subscription's redials of the own relay."`
	ingest.VerifyConfig    `yaml:",inline"`
	HostAll                bool          `yaml:"host_all" help:"Archive mode: sync (and hold in purgatory) every repository whose announcement the own relay accepted. Off: only announcements listing service_domain in both clone and relays count (GRASP-01), so an own relay that accepts everything does not turn the sidecar into a mirror of the network. Without service_domain every accepted announcement counts."`
	BootstrapAllLayers     bool          `yaml:"bootstrap_all_layers" help:"Ask bootstrap relays about every hosted repository (layers 2 and 3). Off: bootstrap relays serve discovery (layer 1) only, and layers 2 and 3 of the repositories whose announcement lists them."`
	HistoricRetryBase      time.Duration `yaml:"historic_retry_base" help:"First wait before a failed historic sync batch is tried again; doubles per failure (until it succeeds the relay is connected with historic sync failures)."`
	HistoricRetryMax       time.Duration `yaml:"historic_retry_max" help:"Longest wait between retries of a failed historic sync batch."`
	HistoricMaxJobs        int           `yaml:"historic_max_jobs" help:"Historic sync jobs (one filter's negentropy rounds or REQ pages, then its fetches by id) running at once over all relays; more let distant relays' round trips overlap; the events they hold at once are bounded by historic_max_events."`
	HistoricFetchSlots     int           `yaml:"historic_fetch_slots" help:"Fetch-by-id REQs one historic job may have open at once: its own subscription plus, while no other job of the relay waits, slots of the relay's subscription budget nobody uses (one is always kept for a new live subscription). 1: one fetch after another."`
	LiveDeferMax           time.Duration `yaml:"live_defer_max" help:"While a relay has pending historic batches (its first sync, a large batch), new items run their history without live per-root subscriptions, which would take the subscription budget from historic jobs; their live filters open in one consolidation when the batches are done, with since reaching back to when the first was added minus since_buffer, or after this long anyway. Layer 1 stays live. 0: open them at once."`
	HistoricMaxEvents      int           `yaml:"historic_max_events" help:"Events that historic sync REQs to remote relays may hold at once: a page or a fetch by id keeps its events until its EOSE and reserves as many as it may return before it is sent. Bounds memory however many historic jobs run."`
	HistoricMaxBytes       int           `yaml:"historic_max_bytes" help:"Bytes of the events (frames as they arrived) that historic sync REQs to remote relays may hold at once: a REQ is sent only while the others leave room for 32 events of the average size held so far (2 KiB at first); one already sent may take the bound over by what it receives. 0: no byte bound (historic_max_events still bounds them)."`
}

// Negentropy configures NIP-77 reconciliation: the sessions' settings are
// neg's; the others are the sync engine's (still declared here until it
// owns them).
type Negentropy struct {
	Enabled         bool `yaml:"enabled" help:"Use NIP-77 for historic sync when the relay supports it; otherwise REQ paging."`
	neg.Settings    `yaml:",inline"`
	FetchBatch      int           `yaml:"fetch_batch" help:"Event ids per REQ when fetching what reconciliation found missing."`
	SupportCacheTTL time.Duration `yaml:"support_cache_ttl" help:"How long a relay's NIP-77 support (or lack of it) is remembered."`
	ClaimWait       time.Duration `yaml:"claim_wait" help:"Each missing event is fetched from one relay at a time: how long a fetch waits for another relay's fetch of the same ids, after that fetch was last heard of (sent, receiving or handing on an event), before asking its own relay."`
}

// Trusted configures reconciliation against trusted archive relays.
type Trusted struct {
	Interval          time.Duration `yaml:"interval" help:"Interval between reconciliations with each trusted relay."`
	Lookback          time.Duration `yaml:"lookback" help:"Window reconciled: events created within this long before now."`
	MaxEventsPerCycle int           `yaml:"max_events_per_cycle" help:"Events fetched from one trusted relay per cycle at most."`
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

// Limits bounds inputs: one event's size and tags and what one relay may
// send (the shared event handler's), and the sync engine's bounds on
// relays and repositories.
type Limits struct {
	ingest.EventLimits       `yaml:",inline"`
	MaxRelaysPerAnnouncement int `yaml:"max_relays_per_announcement" help:"Relay URLs taken from one announcement at most."`
	MaxTrackedRelays         int `yaml:"max_tracked_relays" help:"Remote relays tracked at most."`
	MaxRepositories          int `yaml:"max_repositories" help:"Repositories tracked at most."`
	ingest.RelayLimits       `yaml:",inline"`
}

// Default returns the configuration with every default filled in. OwnRelay
// is empty and must be set before Validate succeeds.
//
// Each engine package owns the defaults of the settings it reads (its
// DefaultConfig or DefaultSettings); Default assembles them. Only settings
// no engine reads (the HTTP surface, shutdown, logging, the dial allow
// list, whether purgatory runs) are defined here, and, until the sync
// engine owns its settings type, the sync engine's, copied from
// reposync.DefaultConfig.
func Default() *Config {
	sync := reposync.DefaultConfig()
	in := ingest.DefaultConfig()
	return &Config{
		BootstrapRelays: []string{},
		TrustedRelays:   []string{},
		Listen:          ":9090",
		ShutdownGrace:   10 * time.Second,
		Log:             Log{Level: "info", Format: "json", ProgressInterval: 10 * time.Second},
		Dial:            Dial{Allow: []string{}},
		Relay:           relay.DefaultSettings(),
		Sync: Sync{
			SelfKinds:              slices.Clone(sync.SelfKinds),
			BatchWindow:            sync.BatchWindow,
			BatchQuiet:             sync.BatchQuiet,
			HistoricRetryBase:      sync.HistoricRetry.Base,
			HistoricRetryMax:       sync.HistoricRetry.Max,
			HistoricMaxJobs:        sync.HistoricMaxJobs,
			HistoricFetchSlots:     sync.HistoricFetchSlots,
			HistoricMaxEvents:      sync.HistoricMaxEvents,
			HistoricMaxBytes:       int(sync.HistoricMaxBytes),
			QuickReconnectWindow:   sync.QuickReconnectWindow,
			SinceBuffer:            sync.SinceBuffer,
			ValuesPerFilter:        sync.ValuesPerFilter,
			ConsolidationThreshold: sync.ConsolidationThreshold,
			ConsolidationWait:      sync.ConsolidationWait,
			LiveDeferMax:           sync.LiveDeferMax,
			FullResyncMin:          sync.FullResyncMin,
			FullResyncMax:          sync.FullResyncMax,
			EmptyRelayCheck:        sync.EmptyRelayCheck,
			PageSize:               sync.PageSize,
			EOSETimeout:            sync.EOSETimeout,
			OwnReconnectBase:       sync.OwnReconnectBase,
			OwnReconnectMax:        sync.OwnReconnectMax,
			VerifyConfig:           in.VerifyConfig,
		},
		Health:    health.DefaultConfig(),
		Publisher: Publisher{Config: publish.DefaultConfig(), OwnHeldConfig: in.OwnHeldConfig},
		Purgatory: Purgatory{Enabled: true, Config: purgatory.DefaultConfig()},
		Negentropy: Negentropy{
			Enabled:         sync.Negentropy.Enabled,
			Settings:        neg.DefaultSettings(),
			FetchBatch:      sync.Negentropy.FetchBatch,
			SupportCacheTTL: sync.Negentropy.SupportTTL,
			ClaimWait:       sync.Negentropy.ClaimWait,
		},
		Trusted: Trusted{
			Interval:          sync.Trusted.Interval,
			Lookback:          sync.Trusted.Lookback,
			MaxEventsPerCycle: sync.Trusted.MaxEventsPerCycle,
		},
		Rejected: in.Rejected,
		Limits: Limits{
			EventLimits:              in.EventLimits,
			MaxRelaysPerAnnouncement: sync.MaxRelaysPerAnnouncement,
			MaxTrackedRelays:         sync.MaxTrackedRelays,
			MaxRepositories:          sync.MaxRepositories,
			RelayLimits:              in.RelayLimits,
		},
		State:  statestore.DefaultConfig(),
		Memory: memlimit.DefaultConfig(),
		CPU:    procs.DefaultConfig(),
	}
}

// PurgatoryActive reports whether purgatory runs: it must be enabled and a
// git directory configured.
func (c *Config) PurgatoryActive() bool {
	return c.Purgatory.Enabled && c.GitDir != ""
}
