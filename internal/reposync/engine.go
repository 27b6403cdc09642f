package reposync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/discovery"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/ownset"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/internal/sweepcursor"
	"github.com/grasp-sync/grasp-sync/internal/syncmetrics"
	"github.com/grasp-sync/grasp-sync/internal/trusted"
	"github.com/grasp-sync/grasp-sync/internal/twinfilter"
)

// Config holds the engine's settings; every duration is configurable so
// tests can shrink them. The user settings are Settings (the
// configuration's sync section), Bounds (its part of the limits section),
// Negentropy's and Trusted's; the other fields are given by the caller
// from other sections (the own, bootstrap and trusted relays, the health
// tick, the connect timeout, the progress log interval).
type Config struct {
	Settings
	repoindex.Bounds

	OwnRelay      string
	ServiceDomain string
	Bootstrap     []string

	// HistoricRetryJitter is the jitter of the historic retries' backoff
	// (backoff.Policy.Jitter, shortening only).
	HistoricRetryJitter float64
	// Tick drives reconnects, deferred work and timers.
	Tick time.Duration
	// ConnectTimeout bounds one dial (the health tracker may ask for less).
	ConnectTimeout time.Duration
	// ProgressLogInterval paces the "historic sync in progress" line of a
	// relay that syncs (0: not logged).
	ProgressLogInterval time.Duration

	Negentropy historic.NegConfig
	Trusted    trusted.Config
}

// DefaultConfig returns the defaults (docs/ARCHITECTURE.md): each part's
// own. The tick is the health tracker's and the connect timeout the relay
// package's; the progress line is not logged.
func DefaultConfig() Config {
	return Config{
		Settings:            DefaultSettings(),
		Bounds:              repoindex.DefaultBounds(),
		HistoricRetryJitter: 0.2,
		Tick:                health.DefaultConfig().Tick,
		ConnectTimeout:      relay.DefaultConnectTimeout,
		Negentropy:          historic.DefaultNegConfig(),
		Trusted:             trusted.Config{Settings: trusted.DefaultSettings()},
	}
}

// historicRetry is the backoff of a failed historic batch's retries.
func (c Config) historicRetry() backoff.Policy {
	return backoff.Policy{Base: c.HistoricRetryBase, Max: c.HistoricRetryMax, Jitter: c.HistoricRetryJitter, Shorten: true}
}

// validate checks the settings (Settings.Validate: they have no
// meaningful zero value, and no code path falls back for them) and the
// tick; each comes from the caller (DefaultConfig, or the sidecar's
// wiring of the configuration).
func (c Config) validate() error {
	if c.Tick <= 0 {
		return fmt.Errorf("reposync: Tick must be positive, got %s", c.Tick)
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("reposync: %w", err)
	}
	return nil
}

// DialFunc opens a connection to a relay.
type DialFunc func(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error)

// LimitsFunc fetches a relay's NIP-11 limits (best effort).
type LimitsFunc func(ctx context.Context, url string) (relay.Limits, error)

// Deps are the engine's collaborators.
type Deps struct {
	Log      *zap.Logger
	Registry prometheus.Registerer
	Clock    clock.Clock
	Health   *health.Tracker
	// Pacer, when set, is each remote relay's request budget and refusal
	// backoff: every REQ, NEG-OPEN, AUTH and dial waits for it.
	Pacer *health.Pacer
	// Dial connects to remote relays (with the outbound address policy);
	// DialOwn connects to the own relay.
	Dial    DialFunc
	DialOwn DialFunc
	// AllowRelay, when set, screens relay URLs discovered in announcements
	// (the outbound address policy): a refused URL is never tracked.
	AllowRelay func(url string) error
	// RelayOptions are the base options of every connection.
	RelayOptions relay.Options
	// Ingest takes every event received from a relay, and every event
	// seen on the own relay; the caller runs it alongside the engine.
	Ingest *ingest.Handler
	// Historic, when nil, is REQ paging.
	Historic historic.HistoricSyncer
	// Limits, when set, is asked for each relay's NIP-11 limits on connect.
	Limits LimitsFunc
	// LocalIndex, when set, enables NIP-77 historic sync: it is our side
	// of every reconciliation, filled from the own relay before remote relays connect and
	// kept current by the ingest handler. ExtraLocal adds items we hold
	// elsewhere (purgatory); the RejectedIndex's ids are always added.
	LocalIndex *localindex.Index
	ExtraLocal []localindex.Source
	// LocalRestored says LocalIndex was loaded from the state store: the
	// first fill reconciles it against the own relay with NIP-77 instead of
	// reading every event back (CatchUp), falling back to the read-back.
	LocalRestored bool
	// KeepHeads keeps the current announcements and states with their
	// bodies for the state store (RepoState), so a restart need not page
	// them all again.
	KeepHeads bool
	// Unapplied are the roots the own relay stored that discovery's index
	// may not hold yet; the wiring hands the same set to the ingest
	// handler (ingest.Deps.Stored), which notes them.
	Unapplied *discovery.UnappliedRoots
	// Sign, when set, signs NIP-42 AUTH events for remote relays that
	// require authentication to read (the configured secret key).
	Sign func(*nostr.Event) error
}

// Engine is the GRASP-02 sync engine. One goroutine (Run) owns the
// indexes (discovery's repository index, the relays' states and pending
// batches) and receives every input as a message, so decisions never race.
type Engine struct {
	cfg   Config
	d     Deps
	log   *zap.Logger
	m     *syncmetrics.Metrics
	clock clock.Clock
	h     *ingest.Handler

	inbox chan func()
	ctx   context.Context
	wg    sync.WaitGroup

	// Owned by the Run goroutine (disc's index too: Discovery.Repos).
	disc   *discovery.Discovery
	relays map[string]*remote
	// historicJobs are the historic jobs running over all relays
	// (Config.HistoricMaxJobs).
	historicJobs int
	pending      map[string][]*repoindex.PendingBatch
	nextBatch    uint64
	nextGen      uint64
	lastEmpty    time.Time

	// startingAll is set while startWaitingJobs runs (a relay that leaves
	// a place to others starts their jobs through it, once).
	startingAll bool

	// subs manages the live subscriptions, sched the historic jobs: the
	// engine's own state seen from those two sides, owned by the same Run
	// goroutine. lim are the limits learned of remote relays.
	subs  liveSubs
	sched jobScheduler
	lim   health.Learned

	running atomic.Bool
	pager   *historic.Pager
	// catchup pages catch-up batches (since a disconnect): the REQ pager.
	catchup     historic.HistoricSyncer
	neg         *historic.NegSyncer
	local       *ownset.OwnLocalSet
	snapMu      sync.Mutex
	snap        status.Snapshot
	startedAt   time.Time
	bootstrapOK map[string]bool
	// trustedOK are the trusted relays (normalized): their health stays
	// tracked when the engine stops syncing them; trusted reconciles them.
	trustedOK map[string]bool
	trusted   *trusted.Syncer
	// restored are relay states of the previous run not yet applied;
	// relaySnap is the last persistable snapshot (under snapMu).
	restored       map[string]PersistedRelay
	relaySnap      []PersistedRelay
	confirmedLists repoindex.ConfirmedLists
	// rootsCounted is the root events of repos counted at reposGen
	// rootsCountedGen−1 (updateIndexMetrics, at every tick).
	rootsCounted, rootsCountedGen uint64
}

// liveSubs is the engine seen from its live subscriptions: opening,
// reading, consolidating and closing them, and the since subscriptions of
// catch-up batches (livesubs.go, livekindsub.go, sincesubs.go). Its methods run
// on the Run goroutine, like the engine's, unless they say otherwise.
type liveSubs struct{ e *Engine }

// jobScheduler is the engine seen from its historic jobs: batches, their
// jobs' queue and places (Config.HistoricMaxJobs, each relay's slots),
// retries and outcomes (historicjobs.go, jobqueue.go, slotlending.go). Its
// methods run on the Run goroutine; the jobs themselves on their own.
type jobScheduler struct{ e *Engine }

// remote is the engine's record of one remote relay.
type remote struct {
	repoindex.RelayState
	gen     uint64
	conn    *relay.Conn
	cancel  context.CancelFunc
	cmds    chan func(*relay.Conn)
	live    map[string]int // live subscription id → filter count
	liveSeq int
	growing *growingSub // the newest live subscription items are added to
	// replaces: live subscription id → the one it replaces, closed at
	// id's EOSE (replaceLive).
	replaces map[string]string
	// since are the live subscriptions opened with since whose EOSE has
	// not come yet: their stored events are a catch-up batch's.
	since map[string]*sinceSub
	// catchup is a quick reconnect's catch-up batch while it is pending,
	// catchupFrom the disconnection it catches up from: a connection lost
	// (or a sidecar stopped) before it completed catches up from there
	// again, not from the later disconnection.
	catchup     *repoindex.PendingBatch
	catchupFrom time.Time
	// window is a NIP-77 relay's quick-reconnect reconciliation of the
	// since_buffer before windowFrom, its disconnection, while pending: a
	// connection lost before it completed catches up from there again.
	window     *repoindex.PendingBatch
	windowFrom time.Time
	// Historic jobs waiting for a subscription slot, and running.
	jobs    []*job
	running int
	// lend lends the slots no job holds to running jobs' id fetches.
	lend *historic.SlotLender
	// Consolidation waiting for pending batches to finish.
	consolidateBy time.Time
	// liveDeferredAt is when the earliest item was added whose live
	// per-root subscriptions wait for the consolidation at the end of the
	// relay's pending batches (Config.LiveDeferMax); zero: none wait.
	liveDeferredAt time.Time
	// refs are the items the kind subscription (kindSub) hands events on
	// for, on the current connection.
	refs *repoindex.Refs
	// rebuildLive: live subscriptions were closed by the relay and must be
	// rebuilt once the relay allows it.
	rebuildLive  bool
	rebuild      backoff.Streak // refused rebuilds in a row (liveSubs.refusedRebuild)
	deferred     bool           // compute_actions must run again for this relay
	fullResyncAt time.Time
	// progressLogged is when historic progress was last logged.
	progressLogged time.Time
	// baseline is the filter count right after the last consolidation:
	// the fewest filters the relay's items fit in.
	baseline  int
	lastError string
	received  atomic.Uint64
	// historicGot counts the events historic jobs received that were new,
	// gotAtConnect its value when the connection came: a drop after more
	// came resumes after health.resume_wait (onDisconnected).
	historicGot  atomic.Uint64
	gotAtConnect uint64
	failures     int
	// rateLimitedAt is when the relay last signalled a rate limit; historic
	// jobs running then that failed are re-queued, not given up.
	rateLimitedAt time.Time
	// failed are historic jobs that failed, retried with backoff; they
	// survive a quick reconnect and are dropped by a fresh sync.
	failed []*repoindex.RetryJob
	// resumeSync: the connection dropped during the first historic sync;
	// a quick reconnect resumes it (needsFreshSync), asking the items of
	// the batches it left pending again batch by batch (parked).
	resumeSync bool
	parked     []repoindex.Items

	// pendingRepos and pendingRoots total the items of the relay's pending
	// batches (PendingBatch.repos, roots), kept as they come and go: the
	// status is refreshed every tick, and a relay can have thousands.
	pendingRepos, pendingRoots int
}

type job struct {
	batch   *repoindex.PendingBatch
	filters []nostr.Filter
	// packed is the filter of a queued job, in handles (unpack).
	packed *repoindex.PackedFilter
	// run is shared by the jobs of one batch: its filters run as
	// concurrent jobs, and the batch is done when the last one is.
	run *batchRun
	// merged is how many queued jobs of the batch this one took on
	// (mergeQueued): it counts for 1+merged jobs of its batch.
	merged int
}

// New builds an engine.
func New(cfg Config, d Deps) (*Engine, error) {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Health == nil || d.Dial == nil || d.DialOwn == nil || d.Ingest == nil || d.Registry == nil {
		return nil, errors.New("reposync: Health, Dial, DialOwn, Ingest and Registry are required")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := syncmetrics.New(d.Registry)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, d: d, log: d.Log.Named("sync"), m: m, clock: d.Clock, h: d.Ingest,
		inbox:       make(chan func(), 1024),
		relays:      map[string]*remote{},
		pending:     map[string][]*repoindex.PendingBatch{},
		bootstrapOK: map[string]bool{},
		trustedOK:   map[string]bool{},
		startedAt:   d.Clock.Now(),
	}
	e.subs, e.sched = liveSubs{e}, jobScheduler{e}
	e.lim = health.Learned{Tracker: d.Health, PerFilter: cfg.ValuesPerFilter}
	pager := &historic.Pager{
		PageSize: cfg.PageSize, EOSETimeout: cfg.EOSETimeout,
		MaxLimit:   func(url string) int { return d.Health.Limits(url).MaxLimit },
		Truncation: historic.NewTruncation(m.Truncation, e.log.Named("truncation")),
		Auth:       historic.NewReadAuth(d.Sign, cfg.EOSETimeout, m.ReadAuth, e.log.Named("auth")),
		Budget:     historic.NewEventBudget(cfg.HistoricMaxEvents, int64(cfg.HistoricMaxBytes)),
		Clock:      d.Clock,
		Resume:     sweepcursor.New(0, cfg.SinceBuffer), // remote relays' jobs (startJobs)
		Covered:    twinfilter.New(cfg.EOSETimeout, d.Clock).Covered,
	}
	e.pager, e.catchup = pager, pager
	if d.LocalIndex != nil {
		extra := append([]localindex.Source{localindex.SourceFunc(e.h.AppendRejected)}, d.ExtraLocal...)
		e.local = ownset.NewOwnLocalSet(d.LocalIndex, func(ctx context.Context) (*relay.Conn, error) {
			return d.DialOwn(ctx, cfg.OwnRelay, d.RelayOptions)
		}, cfg.ValuesPerFilter, cfg.PageSize, cfg.EOSETimeout, e.h.MarkPresent, e.log.Named("local"), extra...)
		e.local.Forget = e.h.ForgetPresent
		if d.Unapplied != nil {
			e.local.Note = d.Unapplied.Note
		}
		e.local.Pager.Clock, e.local.Pager.Resume = d.Clock, sweepcursor.New(0, cfg.SinceBuffer) // fills cut short resume
		ns, err := historic.NewNegSyncer(cfg.Negentropy, pager, e.local, d.Registry, e.log.Named("negentropy"), d.Clock)
		if err != nil {
			return nil, err
		}
		ns.Limits = d.Health.Limits
		if opts := cfg.Negentropy.SessionOptions(); cfg.Negentropy.Enabled { // tied seconds by NIP-77, the own relay's too
			opts.Clock = d.Clock
			pager.Ties = &historic.TieNeg{Options: opts, Support: ns.Support, SetSupport: ns.SetSupport}
		}
		e.local.Pager.Ties, e.local.Pager.Truncation, e.local.Pager.MaxLimit = pager.Ties, pager.Truncation, pager.MaxLimit
		if e.h != nil {
			ns.IDState = e.h.IDState
		}
		e.neg = ns
	}
	if e.d.Historic == nil {
		if e.neg != nil {
			e.d.Historic = e.neg
		} else {
			e.d.Historic = pager
		}
	}
	for _, b := range cfg.Bootstrap {
		norm, err := relay.NormalizeURL(b)
		if err != nil {
			return nil, fmt.Errorf("bootstrap relay %q: %w", b, err)
		}
		e.bootstrapOK[norm] = true
	}
	e.trusted = trusted.New(cfg.Trusted, trusted.Deps{
		Log: e.log.Named("trusted"), Clock: d.Clock, Health: d.Health, Pacer: d.Pacer, Neg: e.neg, Ingest: e.h,
		Dial: d.Dial, Options: e.remoteOptions,
		Received: func(url string) prometheus.Counter { return m.EventsReceived.WithLabelValues(url) },
		Ready:    e.Ready, Hosted: e.hostedItems,
		Tick: cfg.Tick, ConnectTimeout: cfg.ConnectTimeout, ValuesPerFilter: cfg.ValuesPerFilter,
	})
	disc, err := discovery.New(discovery.Settings{
		OwnRelay: cfg.OwnRelay, ServiceDomain: cfg.ServiceDomain, HostAll: cfg.HostAll,
		Bootstrap23: e.bootstrap23(), SelfKinds: cfg.SelfKinds,
		BatchWindow: cfg.BatchWindow, BatchQuiet: cfg.BatchQuiet, BatchMax: cfg.BatchMax, RootWait: cfg.RootWait, SinceBuffer: cfg.SinceBuffer,
		ConnectTimeout: cfg.ConnectTimeout, OwnReconnectBase: cfg.OwnReconnectBase, OwnReconnectMax: cfg.OwnReconnectMax, QuickReconnectWindow: cfg.QuickReconnectWindow,
		MaxRelaysPerAnnouncement: cfg.MaxRelaysPerAnnouncement, MaxRepositories: cfg.MaxRepositories,
		Negentropy: cfg.Negentropy,
	}, discovery.Deps{
		Log: e.log, Clock: d.Clock, Ingest: e.h, Pager: pager, Local: e.local,
		DialOwn: d.DialOwn, RelayOptions: d.RelayOptions, AllowRelay: d.AllowRelay,
		KeepHeads: d.KeepHeads, Unapplied: d.Unapplied, LocalRestored: d.LocalRestored,
		Post:            e.post,
		Applied:         e.applyDelta,
		Ready:           e.connectDue,
		ForgetConfirmed: e.forgetConfirmed,
		Refresh:         func() { e.onRunGoroutine(e.refreshSnapshot) },
	})
	if err != nil {
		return nil, err
	}
	e.disc = disc
	if e.local != nil {
		e.local.Fetched = disc.NoteFetched
	}
	return e, nil
}

// Ready tells whether the own relay is connected and the
// self-subscription's first EOSE was processed.
func (e *Engine) Ready() bool { return e.disc.Ready() && e.disc.OwnUp() }

// OwnConnected tells whether the self-subscription's connection to the own
// relay is up.
func (e *Engine) OwnConnected() bool { return e.disc.OwnUp() }

// post hands fn to the Run goroutine. It gives up when the engine stops.
func (e *Engine) post(fn func()) {
	select {
	case e.inbox <- fn:
	case <-e.ctx.Done():
	}
}

// Run drives the engine until ctx is done.
func (e *Engine) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e.ctx = ctx
	e.running.Store(true)
	defer e.running.Store(false)
	e.disc.Start(ctx)
	for _, url := range e.cfg.Trusted.Relays {
		if norm, err := relay.NormalizeURL(url); err == nil {
			url = norm // the health tracker's key, as for discovered relays
		}
		e.trustedOK[url] = true
	}
	for url := range e.trustedOK {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.trusted.Run(ctx, url) }()
	}
	for url := range e.bootstrapOK {
		e.track(url, true)
	}
	e.lastEmpty = e.clock.Now()
	tick := e.clock.NewTicker(e.cfg.Tick)
	defer tick.Stop()
	e.connectDue()
	e.refreshSnapshot()
	for {
		select {
		case <-ctx.Done():
			e.refreshSnapshot()
			e.storeRelaySnapshot() // the relays' last state, for the state store
			for url := range e.relays {
				e.dropConnection(url)
			}
			e.wg.Wait()
			e.disc.Wait()
			if e.local != nil {
				e.local.Close()
			}
			return nil
		case fn := <-e.inbox:
			fn()
		case <-tick.C():
			e.onTick()
		}
	}
}

// hostedItems are the hosted repositories and their roots (sorted), read
// on the Run goroutine for a trusted relay's cycle; false when ctx ended
// first.
func (e *Engine) hostedItems(ctx context.Context) (repos, roots []string, ok bool) {
	done := make(chan struct{})
	e.post(func() {
		all := repoindex.NewSet()
		for ref, n := range e.disc.Repos {
			repos = append(repos, ref)
			all.AddAll(n.Roots)
		}
		roots = all.Sorted()
		close(done)
	})
	select {
	case <-done:
		return repos, roots, true
	case <-ctx.Done():
		return nil, nil, false
	}
}

// sleep waits d on the engine's clock, or until ctx is done.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-e.clock.After(d):
		return nil
	}
}
