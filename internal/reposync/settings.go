package reposync

import (
	"fmt"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// Settings are the engine's user settings: the configuration's sync
// section (which adds the handler's verify_workers). Each carries its
// YAML key and help text, which document it (flag, environment variable
// and CONFIGURATION.md are derived from them).
type Settings struct {
	SelfKinds              []int         `yaml:"self_kinds" help:"Event kinds the self-subscription on the own relay watches to discover repositories and root events."`
	BatchWindow            time.Duration `yaml:"batch_window" help:"Longest a self-subscriber batch collects events; the timer starts at the first event and is not reset."`
	BatchQuiet             time.Duration `yaml:"batch_quiet" help:"A self-subscriber batch is applied once no new event came for this long, before batch_window ends (0: only batch_window)."`
	BatchMax               int           `yaml:"batch_max" help:"A self-subscriber batch is applied once it holds this many events, before batch_window ends (0: no bound): during a first sync the own relay echoes roots faster than batch_quiet lets a batch end, and their discussions (Layer 3) would wait for batch_window."`
	RootWait               time.Duration `yaml:"root_wait" help:"A root event (patch, PR, issue) or repository announcement the own relay acknowledged storing that no self-subscriber batch applied within this long (the self-subscription was reconnecting when it was stored, or the relay does not serve it) is applied from the acknowledgement (roots: ngit_sync_own_roots_applied_late_total)."`
	QuickReconnectWindow   time.Duration `yaml:"quick_reconnect_window" help:"A relay that reconnects within this window resumes with since=disconnect−since_buffer instead of a full historic sync; the own relay's self-subscription reconnecting within it keeps the local set as filled instead of reading the own relay back."`
	SinceBuffer            time.Duration `yaml:"since_buffer" help:"Overlap subtracted from since on quick reconnects (0 is allowed). On a relay with NIP-77 the subscriptions ask from the disconnection less consolidation_overlap and this span before it is reconciled, so only what is missing is fetched."`
	ValuesPerFilter        int           `yaml:"values_per_filter" help:"Tag values per filter in layers 2 and 3."`
	ConsolidationThreshold int           `yaml:"consolidation_threshold" help:"Open filters per relay above which they are consolidated."`
	ConsolidationWait      time.Duration `yaml:"consolidation_wait" help:"How long consolidation waits for pending batches to finish."`
	ConsolidationOverlap   time.Duration `yaml:"consolidation_overlap" help:"Overlap subtracted from since when a relay's live subscriptions are closed and opened again merged (consolidated): they were live until then, so only events the relay stored in between with an older created_at need it. Live filters that were deferred catch up from their deferral minus since_buffer instead."`
	FullResyncMin          time.Duration `yaml:"full_resync_min" help:"Lower bound of the random interval between full resyncs of a relay."`
	FullResyncMax          time.Duration `yaml:"full_resync_max" help:"Upper bound of the random interval between full resyncs of a relay."`
	EmptyRelayCheck        time.Duration `yaml:"empty_relay_check" help:"Interval of the check that disconnects non-bootstrap relays with nothing to sync."`
	PageSize               int           `yaml:"page_size" help:"Limit of one REQ page in historic sync without negentropy (strfry caps at 500)."`
	EOSETimeout            time.Duration `yaml:"eose_timeout" help:"How long to wait for EOSE of a historic REQ before treating it as failed."`
	// OwnReconnectBase is the self-subscriber's first wait before
	// redialling the own relay; it doubles per failure up to
	// OwnReconnectMax, without jitter.
	OwnReconnectBase   time.Duration `yaml:"own_reconnect_base" help:"First wait before the self-subscription redials the own relay after losing it; doubles per failure up to own_reconnect_max."`
	OwnReconnectMax    time.Duration `yaml:"own_reconnect_max" help:"Longest wait between the self-subscription's redials of the own relay."`
	HostAll            bool          `yaml:"host_all" help:"Archive mode: sync (and hold in purgatory) every repository whose announcement the own relay accepted. Off: only announcements listing service_domain in both clone and relays count (GRASP-01), so an own relay that accepts everything does not turn the sidecar into a mirror of the network. Without service_domain every accepted announcement counts."`
	BootstrapAllLayers bool          `yaml:"bootstrap_all_layers" help:"Ask bootstrap relays about every hosted repository (layers 2 and 3). Off: bootstrap relays serve discovery (layer 1) only, and layers 2 and 3 of the repositories whose announcement lists them."`
	// HistoricRetryBase and HistoricRetryMax are the backoff of a failed
	// historic batch's retries (Config.historicRetry).
	HistoricRetryBase  time.Duration `yaml:"historic_retry_base" help:"First wait before a failed historic sync batch is tried again; doubles per failure (until it succeeds the relay is connected with historic sync failures)."`
	HistoricRetryMax   time.Duration `yaml:"historic_retry_max" help:"Longest wait between retries of a failed historic sync batch."`
	HistoricMaxJobs    int           `yaml:"historic_max_jobs" help:"Historic sync jobs (one filter's negentropy rounds or REQ pages, then its fetches by id) running at once over all relays; more let distant relays' round trips overlap; the events they hold at once are bounded by historic_max_events."`
	HistoricFetchSlots int           `yaml:"historic_fetch_slots" help:"Fetch-by-id REQs one historic job may have open at once: its own subscription plus, while no other job of the relay waits, slots of the relay's subscription budget nobody uses (one is always kept for a new live subscription). 1: one fetch after another."`
	LiveDeferMax       time.Duration `yaml:"live_defer_max" help:"While a relay's first historic sync has batches pending, new items run their history without live per-root subscriptions, which would take the subscription budget from historic jobs; their live filters open in one consolidation when the batches are done, with since reaching back to when the first was added minus since_buffer, or after this long anyway. Layer 1 stays live. 0: open them at once."`
	HistoricMaxEvents  int           `yaml:"historic_max_events" help:"Events that historic sync REQs to remote relays may hold at once: a page or a fetch by id keeps its events until its EOSE and reserves as many as it may return before it is sent. Bounds memory however many historic jobs run."`
	// HistoricMaxBytes bounds the bytes of those events (frames as they
	// arrived; historic.EventBudget), 0 none.
	HistoricMaxBytes int `yaml:"historic_max_bytes" help:"Bytes of the events (frames as they arrived) that historic sync REQs to remote relays may hold at once: a REQ is sent only while the others leave room for 32 events of the average size held so far (2 KiB at first); one already sent may take the bound over by what it receives. 0: no byte bound (historic_max_events still bounds them)."`
}

// DefaultSettings returns the defaults (docs/ARCHITECTURE.md).
func DefaultSettings() Settings {
	return Settings{
		SelfKinds:              []int{nip34.KindRepoAnnouncement, nip34.KindRepoState, nip34.KindPatch, nip34.KindPullRequest, nip34.KindPRUpdate, nip34.KindIssue},
		BatchWindow:            5 * time.Second,
		BatchQuiet:             250 * time.Millisecond,
		BatchMax:               2000,
		RootWait:               15 * time.Second,
		QuickReconnectWindow:   15 * time.Minute,
		SinceBuffer:            15 * time.Minute,
		ValuesPerFilter:        nip34.DefaultValuesPerFilter,
		ConsolidationThreshold: 70,
		ConsolidationWait:      30 * time.Second,
		ConsolidationOverlap:   2 * time.Second,
		FullResyncMin:          23 * time.Hour,
		FullResyncMax:          25 * time.Hour,
		EmptyRelayCheck:        60 * time.Second,
		PageSize:               500,
		EOSETimeout:            60 * time.Second,
		OwnReconnectBase:       250 * time.Millisecond,
		OwnReconnectMax:        30 * time.Second,
		HistoricRetryBase:      30 * time.Second,
		HistoricRetryMax:       30 * time.Minute,
		HistoricMaxJobs:        16,
		HistoricFetchSlots:     4,
		LiveDeferMax:           3 * time.Minute,
		HistoricMaxEvents:      32000,
		HistoricMaxBytes:       4 << 20,
	}
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (s Settings) Validate() error {
	v := setting.Checks{}
	if len(s.SelfKinds) == 0 {
		v.Fail("self_kinds", "must not be empty", s.SelfKinds)
	}
	for i, k := range s.SelfKinds {
		if k < 0 || k > 65535 {
			v.Fail(fmt.Sprintf("self_kinds[%d]", i), "must be in 0..65535", k)
		}
	}
	v.Positive("batch_window", s.BatchWindow)
	v.Positive("quick_reconnect_window", s.QuickReconnectWindow)
	v.NonNegative("since_buffer", s.SinceBuffer)
	v.NonNegative("batch_quiet", s.BatchQuiet)
	v.NonNegativeInt("batch_max", s.BatchMax)
	v.Positive("root_wait", s.RootWait)
	v.Positive("historic_retry_base", s.HistoricRetryBase)
	v.Positive("historic_retry_max", s.HistoricRetryMax)
	v.Compare("historic_retry_max", s.HistoricRetryMax, ">=", "historic_retry_base", s.HistoricRetryBase)
	v.PositiveInt("values_per_filter", s.ValuesPerFilter)
	v.PositiveInt("historic_max_jobs", s.HistoricMaxJobs)
	v.PositiveInt("historic_fetch_slots", s.HistoricFetchSlots)
	v.PositiveInt("historic_max_events", s.HistoricMaxEvents)
	v.NonNegativeInt("historic_max_bytes", s.HistoricMaxBytes)
	v.PositiveInt("consolidation_threshold", s.ConsolidationThreshold)
	v.Positive("consolidation_wait", s.ConsolidationWait)
	v.NonNegative("consolidation_overlap", s.ConsolidationOverlap)
	v.NonNegative("live_defer_max", s.LiveDeferMax)
	v.Positive("full_resync_min", s.FullResyncMin)
	v.Positive("full_resync_max", s.FullResyncMax)
	v.Compare("full_resync_max", s.FullResyncMax, ">=", "full_resync_min", s.FullResyncMin)
	v.Positive("empty_relay_check", s.EmptyRelayCheck)
	v.PositiveInt("page_size", s.PageSize)
	v.Positive("eose_timeout", s.EOSETimeout)
	v.Positive("own_reconnect_base", s.OwnReconnectBase)
	v.Positive("own_reconnect_max", s.OwnReconnectMax)
	v.Compare("own_reconnect_max", s.OwnReconnectMax, ">=", "own_reconnect_base", s.OwnReconnectBase)
	return v.Err()
}
