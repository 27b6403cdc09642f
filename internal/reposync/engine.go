package reposync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

// Config holds the engine's settings; every duration is configurable so
// tests can shrink them.
type Config struct {
	OwnRelay      string
	ServiceDomain string
	Bootstrap     []string

	SelfKinds              []int
	BatchWindow            time.Duration
	QuickReconnectWindow   time.Duration
	SinceBuffer            time.Duration
	ValuesPerFilter        int
	ConsolidationThreshold int
	ConsolidationWait      time.Duration
	FullResyncMin          time.Duration
	FullResyncMax          time.Duration
	EmptyRelayCheck        time.Duration
	PageSize               int
	EOSETimeout            time.Duration
	// Tick drives reconnects, deferred work and timers.
	Tick time.Duration
	// ConnectTimeout bounds one dial (the health tracker may ask for less).
	ConnectTimeout time.Duration
	// OwnReconnectMax caps the own relay's reconnect backoff.
	OwnReconnectMax time.Duration

	MaxRelaysPerAnnouncement int
	MaxTrackedRelays         int
	MaxRepositories          int

	Negentropy NegConfig
	Trusted    TrustedConfig
}

// DefaultConfig returns the design's defaults (DESIGN.md §4).
func DefaultConfig() Config {
	return Config{
		SelfKinds:                []int{30617, 30618, 1617, 1618, 1619, 1621},
		BatchWindow:              5 * time.Second,
		QuickReconnectWindow:     15 * time.Minute,
		SinceBuffer:              15 * time.Minute,
		ValuesPerFilter:          100,
		ConsolidationThreshold:   70,
		ConsolidationWait:        30 * time.Second,
		FullResyncMin:            23 * time.Hour,
		FullResyncMax:            25 * time.Hour,
		EmptyRelayCheck:          60 * time.Second,
		PageSize:                 500,
		EOSETimeout:              60 * time.Second,
		Tick:                     2 * time.Second,
		ConnectTimeout:           5 * time.Second,
		OwnReconnectMax:          30 * time.Second,
		MaxRelaysPerAnnouncement: 20,
		MaxTrackedRelays:         500,
		MaxRepositories:          50000,
		Negentropy:               NegConfig{Enabled: true, Options: neg.DefaultOptions(), FetchBatch: 500, SupportTTL: 24 * time.Hour},
		Trusted:                  TrustedConfig{Interval: 10 * time.Minute, Lookback: 7 * 24 * time.Hour, MaxEventsPerCycle: 50000},
	}
}

// progressLogInterval is how often a relay's ongoing historic sync is logged.
const progressLogInterval = 10 * time.Second

// DialFunc opens a connection to a relay.
type DialFunc func(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error)

// LimitsFunc fetches a relay's NIP-11 limits (best effort).
type LimitsFunc func(ctx context.Context, url string) (relay.Limits, error)

// Deps are the engine's collaborators.
type Deps struct {
	Log      *zap.Logger
	Registry prometheus.Registerer
	Clock    health.Clock
	Health   *health.Tracker
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
	Historic HistoricSyncer
	// Limits, when set, is asked for each relay's NIP-11 limits on connect.
	Limits LimitsFunc
	// LocalIndex, when set, enables NIP-77 historic sync: it is our side
	// of every reconciliation, filled from the own relay (Phase 0) and
	// kept current by the ingest handler. ExtraLocal adds items we hold
	// elsewhere (purgatory); the RejectedIndex's ids are always added.
	LocalIndex *localindex.Index
	ExtraLocal []localindex.Source
}

// Engine is the GRASP-02 sync engine. One goroutine (Run) owns the three
// indexes and receives every input as a message, so decisions never race.
type Engine struct {
	cfg   Config
	d     Deps
	log   *zap.Logger
	m     *metrics
	clock health.Clock
	h     *ingest.Handler

	inbox chan func()
	ctx   context.Context
	wg    sync.WaitGroup

	// Owned by the Run goroutine.
	repos RepoSyncIndex
	// orphans holds root events seen on the own relay before their
	// repository's announcement (the self-subscription streams newest
	// first, so a batch can end between a root and its announcement),
	// by repository reference; attached when the announcement arrives.
	orphans     map[string]set
	orphanCount int
	relays      map[string]*remote
	pending     map[string][]*PendingBatch
	nextBatch   uint64
	nextGen     uint64
	lastEmpty   time.Time

	running     atomic.Bool
	ready       atomic.Bool
	pager       *Pager
	neg         *NegSyncer
	local       *OwnLocalSet
	ownUp       atomic.Bool
	snapMu      sync.Mutex
	snap        status.Snapshot
	startedAt   time.Time
	bootstrapOK map[string]bool
}

// remote is the engine's record of one remote relay.
type remote struct {
	RelayState
	gen     uint64
	conn    *relay.Conn
	cancel  context.CancelFunc
	cmds    chan func(*relay.Conn)
	live    map[string]int // live subscription id → filter count
	liveSeq int
	// Historic jobs waiting for a subscription slot, and running.
	jobs    []*job
	running int
	// Consolidation waiting for pending batches to finish.
	consolidateBy time.Time
	// rebuildLive: live subscriptions were closed by the relay and must be
	// rebuilt once the relay allows it.
	rebuildLive  bool
	deferred     bool // compute_actions must run again for this relay
	fullResyncAt time.Time
	// progressLogged is when historic progress was last logged.
	progressLogged time.Time
	// baseline is the filter count right after the last consolidation:
	// the fewest filters the relay's items fit in.
	baseline  int
	lastError string
	received  atomic.Uint64
	failures  int
	// rateLimitedAt is when the relay last signalled a rate limit; historic
	// jobs running then that failed are re-queued, not given up.
	rateLimitedAt time.Time
}

type job struct {
	batch   *PendingBatch
	filters []nostr.Filter
}

// New builds an engine.
func New(cfg Config, d Deps) (*Engine, error) {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Clock == nil {
		d.Clock = health.RealClock{}
	}
	if d.Health == nil || d.Dial == nil || d.DialOwn == nil || d.Ingest == nil || d.Registry == nil {
		return nil, errors.New("reposync: Health, Dial, DialOwn, Ingest and Registry are required")
	}
	m, err := newMetrics(d.Registry)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, d: d, log: d.Log.Named("sync"), m: m, clock: d.Clock, h: d.Ingest,
		inbox:       make(chan func(), 1024),
		repos:       RepoSyncIndex{},
		orphans:     map[string]set{},
		relays:      map[string]*remote{},
		pending:     map[string][]*PendingBatch{},
		bootstrapOK: map[string]bool{},
		startedAt:   d.Clock.Now(),
	}
	pager := &Pager{
		PageSize: cfg.PageSize, EOSETimeout: cfg.EOSETimeout,
		MaxLimit: func(url string) int { return d.Health.Limits(url).MaxLimit },
	}
	e.pager = pager
	if d.LocalIndex != nil {
		extra := append([]localindex.Source{localindex.SourceFunc(e.h.AppendRejected)}, d.ExtraLocal...)
		e.local = NewOwnLocalSet(d.LocalIndex, func(ctx context.Context) (*relay.Conn, error) {
			return d.DialOwn(ctx, cfg.OwnRelay, d.RelayOptions)
		}, cfg.PageSize, cfg.EOSETimeout, e.h.MarkPresent, e.log.Named("local"), extra...)
		ns, err := NewNegSyncer(cfg.Negentropy, pager, e.local, d.Registry, e.log.Named("negentropy"), d.Clock.Now)
		if err != nil {
			return nil, err
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
	return e, nil
}

// Ready tells whether the own relay is connected and the
// self-subscription's first EOSE was processed.
func (e *Engine) Ready() bool { return e.ready.Load() && e.ownUp.Load() }

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
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.runSelfSubscriber(ctx) }()
	for _, url := range e.cfg.Trusted.Relays {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.runTrusted(ctx, url) }()
	}
	for url := range e.bootstrapOK {
		e.track(url, true)
	}
	e.lastEmpty = e.clock.Now()
	tick := time.NewTicker(e.cfg.Tick)
	defer tick.Stop()
	e.connectDue()
	e.refreshSnapshot()
	for {
		select {
		case <-ctx.Done():
			for url := range e.relays {
				e.dropConnection(url)
			}
			e.wg.Wait()
			if e.local != nil {
				e.local.Close()
			}
			return nil
		case fn := <-e.inbox:
			fn()
		case <-tick.C:
			e.onTick()
		}
	}
}

// --- discovery ---------------------------------------------------------

// applySelfBatch updates the RepoSyncIndex from events seen on the own
// relay and starts whatever sync they call for.
func (e *Engine) applySelfBatch(evs []*nostr.Event) {
	isOwn := e.isOwn
	if allow := e.d.AllowRelay; allow != nil {
		// Refused URLs are left out before the per-announcement limit.
		isOwn = func(norm string) bool { return e.isOwn(norm) || allow(norm) != nil }
	}
	// Announcements first, so roots in the same batch find their repos.
	slices.SortStableFunc(evs, func(a, b *nostr.Event) int { return publishRank(a.Kind) - publishRank(b.Kind) })
	// delta collects, per relay, only what this batch adds to its target:
	// everything older was decided by earlier batches, so compute_actions
	// needs to look at the new items only (the cost of a batch is its own
	// size, not the size of the whole index).
	delta := map[string]Items{}
	add := func(url string) Items {
		it, ok := delta[url]
		if !ok {
			it = newItems()
			delta[url] = it
		}
		return it
	}
	boot := e.bootstrapList()
	for _, ev := range evs {
		switch ev.Kind {
		case nip34.KindRepoAnnouncement:
			a, err := ParseAnnouncement(ev, isOwn, e.cfg.MaxRelaysPerAnnouncement)
			if err != nil {
				continue
			}
			if a.Dropped > 0 && len(a.Relays) >= e.cfg.MaxRelaysPerAnnouncement {
				e.h.LimitHit("relays_per_announcement")
			}
			needs := e.repos[a.Ref]
			if needs == nil {
				if e.cfg.MaxRepositories > 0 && len(e.repos) >= e.cfg.MaxRepositories {
					e.h.LimitHit("repositories")
					continue
				}
				needs = &RepoNeeds{Relays: set{}, Roots: set{}}
				e.repos[a.Ref] = needs
				if o := e.orphans[a.Ref]; o != nil {
					needs.Roots.addAll(o)
					e.orphanCount -= len(o)
					delete(e.orphans, a.Ref)
				}
				for _, url := range boot {
					add(url).Repos.add(a.Ref)
					add(url).Roots.addAll(needs.Roots)
				}
			}
			if a.CreatedAt >= needs.AnnouncedAt {
				needs.AnnouncedAt = a.CreatedAt
				relays := setOf(a.Relays...)
				for url := range relays {
					if !needs.Relays.has(url) {
						it := add(url)
						it.Repos.add(a.Ref)
						it.Roots.addAll(needs.Roots)
					}
				}
				needs.Relays = relays
			}
		default:
			refs, ok := nip34.RootRefs(ev)
			if !ok {
				continue
			}
			for _, ref := range refs {
				needs := e.repos[ref]
				if needs == nil {
					e.addOrphan(ref, ev.ID)
					continue
				}
				if needs.Roots.has(ev.ID) {
					continue
				}
				needs.Roots.add(ev.ID)
				for url := range needs.Relays {
					add(url).Roots.add(ev.ID)
				}
				for _, url := range boot {
					add(url).Roots.add(ev.ID)
				}
			}
		}
	}
	e.applyDelta(delta)
}

// maxOrphanRoots bounds the root events kept while their announcement is
// not known yet (each costs a reference of at most maxRefLen bytes and an
// id).
const (
	maxOrphanRoots = 200_000
	maxRefLen      = 6 + 64 + 1 + 256
)

// addOrphan keeps a root whose repository is not known yet, up to
// maxOrphanRoots in all, when ref is a well-formed repository reference.
// Orphans whose announcement is not on the own relay are dropped once its
// history has been read (dropOrphans).
func (e *Engine) addOrphan(ref, id string) {
	o := e.orphans[ref]
	if o.has(id) {
		return
	}
	if !validRepoRef(ref) {
		return
	}
	if e.orphanCount >= maxOrphanRoots {
		e.h.LimitHit("orphan_roots")
		return
	}
	if o == nil {
		o = set{}
		e.orphans[ref] = o
	}
	o.add(id)
	e.orphanCount++
}

// dropOrphans forgets the roots whose announcement did not come: called
// once the own relay's history has been read, when any announcement it
// holds has been applied.
func (e *Engine) dropOrphans() {
	if e.orphanCount > 0 {
		e.log.Info("root events without an announcement on the own relay ignored",
			zap.Int("roots", e.orphanCount), zap.Int("repositories", len(e.orphans)))
	}
	clear(e.orphans)
	e.orphanCount = 0
}

// validRepoRef reports whether ref is 30617:<64 hex pubkey>:<d> with a
// non-empty d of bounded length.
func validRepoRef(ref string) bool {
	const prefix = "30617:"
	if len(ref) > maxRefLen || !strings.HasPrefix(ref, prefix) {
		return false
	}
	rest := ref[len(prefix):]
	if len(rest) < 66 || rest[64] != ':' {
		return false
	}
	for i := 0; i < 64; i++ {
		if c := rest[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isOwn tells whether a normalized relay URL is the own relay or on the
// service domain.
func (e *Engine) isOwn(norm string) bool {
	if own, err := relay.NormalizeURL(e.cfg.OwnRelay); err == nil && own == norm {
		return true
	}
	if e.cfg.ServiceDomain != "" {
		host := relayHost(norm)
		if host == e.cfg.ServiceDomain || hostOnly(host) == e.cfg.ServiceDomain {
			return true
		}
	}
	return false
}

func hostOnly(hostport string) string {
	for i := len(hostport) - 1; i >= 0; i-- {
		if hostport[i] == ':' {
			return hostport[:i]
		}
		if hostport[i] == ']' {
			break
		}
	}
	return hostport
}

// applyDelta makes sure every relay a batch added items for is tracked,
// runs compute_actions over those items and connects what is due. Relays
// that are not up get their whole target on connect (recomputeRelay).
func (e *Engine) applyDelta(delta map[string]Items) {
	urls := make([]string, 0, len(delta))
	for url := range delta {
		urls = append(urls, url)
	}
	slices.Sort(urls)
	for _, url := range urls {
		if e.relays[url] == nil {
			if e.cfg.MaxTrackedRelays > 0 && len(e.relays) >= e.cfg.MaxTrackedRelays {
				e.h.LimitHit("tracked_relays")
				delete(delta, url)
				continue
			}
			e.track(url, false)
		}
	}
	e.runActions(delta)
	e.connectDue()
	e.updateIndexMetrics()
}

func (e *Engine) bootstrapList() []string {
	out := make([]string, 0, len(e.bootstrapOK))
	for url := range e.bootstrapOK {
		out = append(out, url)
	}
	slices.Sort(out)
	return out
}

func (e *Engine) track(url string, bootstrap bool) {
	if e.relays[url] != nil {
		return
	}
	e.relays[url] = &remote{RelayState: RelayState{URL: url, Bootstrap: bootstrap, Confirmed: newItems()}}
	e.d.Health.Track(url)
	e.m.relayConnected.WithLabelValues(url).Set(float64(Disconnected))
}

// runActions is the decision point: compute_actions over all relays and
// AddFilters for each result.
func (e *Engine) runActions(targets map[string]Target) {
	rs := make(map[string]*RelayState, len(e.relays))
	for url, r := range e.relays {
		rs[url] = &r.RelayState
	}
	for _, a := range computeActions(targets, e.pending, rs) {
		e.addFilters(a)
	}
}

// recomputeRelay runs compute_actions for one relay.
func (e *Engine) recomputeRelay(url string) {
	t, ok := deriveRelayTarget(e.repos, url, e.bootstrapOK[url])
	if !ok {
		return
	}
	e.runActions(map[string]Target{url: t})
}

// --- connection lifecycle -------------------------------------------------

// connectDue starts a dial for every tracked, disconnected relay whose
// backoff has elapsed.
func (e *Engine) connectDue() {
	if !e.ready.Load() {
		// Remote relays wait until the own relay's history has been read
		// and the local set filled: publishing meanwhile would put events
		// with old created_at into the range being paged, and a relay
		// delivering them live inside a page (khatru does) would make the
		// pager step over stored events.
		return
	}
	for _, url := range e.d.Health.Due() {
		r := e.relays[url]
		if r == nil || r.Status != Disconnected {
			continue
		}
		e.dial(r)
	}
}

func (e *Engine) dial(r *remote) {
	e.nextGen++
	gen := e.nextGen
	r.gen = gen
	r.Status = Connecting
	e.m.relayConnected.WithLabelValues(r.URL).Set(float64(Connecting))
	e.d.Health.AttemptStarted(r.URL)
	timeout := min(e.d.Health.ConnectTimeout(r.URL), e.cfg.ConnectTimeout)
	if timeout <= 0 {
		timeout = e.cfg.ConnectTimeout
	}
	url := r.URL
	opts := e.d.RelayOptions
	opts.OnNotice = func(text string) { e.onNotice(url, text) }
	opts.BeforeRequest = func(ctx context.Context) error { return e.waitCooldown(ctx, url) }
	opts.OnClosed = func(_, reason string) { e.onClosed(url, reason) }
	opts.Logger = e.log
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(e.ctx, timeout)
		conn, err := e.d.Dial(ctx, url, opts)
		cancel()
		if err == nil && e.d.Limits != nil {
			lctx, lcancel := context.WithTimeout(e.ctx, timeout)
			if l, lerr := e.d.Limits(lctx, url); lerr == nil {
				e.d.Health.SetLimits(url, l)
			}
			lcancel()
		}
		e.post(func() { e.onDialed(url, gen, conn, err) })
		if err == nil && e.ctx.Err() != nil {
			conn.Close()
		}
	}()
}

func (e *Engine) onDialed(url string, gen uint64, conn *relay.Conn, err error) {
	r := e.relays[url]
	if r == nil || r.gen != gen || r.Status != Connecting {
		if conn != nil {
			conn.Close()
		}
		return
	}
	if err != nil {
		r.Status = Disconnected
		r.failures++
		r.lastError = err.Error()
		if r.DisconnectedAt.IsZero() {
			r.DisconnectedAt = e.clock.Now()
		}
		e.d.Health.Failed(url, err)
		e.m.connectionAttempts.WithLabelValues(url, "failure").Inc()
		e.m.relayConnected.WithLabelValues(url).Set(float64(Disconnected))
		if r.failures == 1 || r.failures%10 == 0 {
			e.log.Info("relay connection failed", zap.String("relay", url), zap.Int("failures", r.failures), zap.Error(err))
		}
		return
	}
	e.m.connectionAttempts.WithLabelValues(url, "success").Inc()
	e.d.Health.Connected(url)
	ctx, cancel := context.WithCancel(e.ctx)
	r.conn, r.cancel = conn, cancel
	cmds := make(chan func(*relay.Conn), 1024)
	r.cmds = cmds
	r.live = map[string]int{}
	r.jobs, r.running = nil, 0
	e.wg.Add(2)
	go func() { // writer: runs subscribe/close commands in order
		defer e.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case fn := <-cmds:
				fn(conn)
			}
		}
	}()
	go func() { // watcher
		defer e.wg.Done()
		select {
		case <-conn.Done():
			err := conn.Err()
			e.post(func() { e.onDisconnected(url, gen, err) })
		case <-ctx.Done():
		}
	}()
	e.connectOrReconnect(r)
}

// connectOrReconnect is the unified handler of the seed: fresh sync for a
// first connection or after a long absence, catch-up with since for a quick
// reconnect; then compute_actions for new items.
func (e *Engine) connectOrReconnect(r *remote) {
	now := e.clock.Now()
	fresh := r.LastConnected.IsZero() || now.Sub(r.DisconnectedAt) > e.cfg.QuickReconnectWindow
	lastConnected := r.LastConnected
	if fresh {
		r.ClearConfirmed()
	}
	r.Status = Syncing
	r.HistoricFailed = false
	r.LastConnected = now
	r.DisconnectedAt = time.Time{}
	r.lastError = ""
	r.failures = 0
	if r.fullResyncAt.IsZero() || fresh {
		r.fullResyncAt = now.Add(e.fullResyncInterval())
	}
	if fresh {
		e.log.Info("relay connected: fresh sync", zap.String("relay", r.URL))
		e.subscribeLayer1(r)
		e.startBatch(r, newItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	} else {
		// Catch-up and live in one: subscriptions with since return what
		// was stored meanwhile, then stay open. No pending batch: the
		// items are confirmed already.
		since := nostr.Timestamp(lastConnected.Add(-e.cfg.SinceBuffer).Unix())
		e.log.Info("relay reconnected: catching up", zap.String("relay", r.URL), zap.Time("since", since.Time()))
		e.subscribeCatchup(r, r.Confirmed, since)
	}
	e.recomputeRelay(r.URL)
	e.updateRelayState(r)
}

func (e *Engine) fullResyncInterval() time.Duration {
	span := e.cfg.FullResyncMax - e.cfg.FullResyncMin
	if span <= 0 {
		return e.cfg.FullResyncMin
	}
	return e.cfg.FullResyncMin + time.Duration(rand.Int64N(int64(span)))
}

// onDisconnected: pending batches are cleared, disconnected_at set, the
// health tracker told.
func (e *Engine) onDisconnected(url string, gen uint64, err error) {
	r := e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	e.teardown(r)
	r.Status = Disconnected
	r.DisconnectedAt = e.clock.Now()
	if err != nil {
		r.lastError = err.Error()
	}
	e.d.Health.Failed(url, err)
	e.m.relayConnected.WithLabelValues(url).Set(float64(Disconnected))
	e.log.Info("relay disconnected", zap.String("relay", url), zap.Error(err))
}

// teardown stops a relay's connection goroutines and clears its pending
// batches and live subscriptions.
func (e *Engine) teardown(r *remote) {
	if r.cancel != nil {
		r.cancel()
	}
	if r.conn != nil {
		conn := r.conn
		go conn.Close()
	}
	r.conn, r.cancel, r.cmds = nil, nil, nil
	r.live, r.jobs, r.running, r.baseline = nil, nil, 0, 0
	r.consolidateBy = time.Time{}
	r.rebuildLive, r.deferred = false, false
	delete(e.pending, r.URL)
	e.m.pendingBatches.WithLabelValues(r.URL).Set(0)
	e.m.filtersOpen.WithLabelValues(r.URL).Set(0)
}

// dropConnection closes a relay's connection on purpose.
func (e *Engine) dropConnection(url string) {
	r := e.relays[url]
	if r == nil {
		return
	}
	e.teardown(r)
	r.Status = Disconnected
}

// forget disconnects a relay and stops tracking it.
func (e *Engine) forget(url string) {
	e.dropConnection(url)
	delete(e.relays, url)
	e.d.Health.Forget(url)
	e.m.forgetRelay(url)
	e.log.Info("relay dropped: nothing to sync", zap.String("relay", url))
}

// --- subscriptions --------------------------------------------------------

// exec queues a command for the relay's writer goroutine. A relay whose
// command queue is full is not reading: it is disconnected.
func (e *Engine) exec(r *remote, fn func(*relay.Conn)) {
	if r.cmds == nil {
		return
	}
	select {
	case r.cmds <- fn:
	default:
		e.log.Warn("relay command queue full; disconnecting", zap.String("relay", r.URL))
		e.onDisconnected(r.URL, r.gen, errors.New("command queue full"))
	}
}

func (e *Engine) subscribeLayer1(r *remote) {
	e.openLive(r, "l1", nip34.Live([]nostr.Filter{nip34.Layer1(nil)}))
}

// subscribeLive opens live subscriptions (limit 0) for fs, split into REQs
// of at most the relay's max_filters.
func (e *Engine) subscribeLive(r *remote, fs []nostr.Filter) {
	if len(fs) == 0 {
		return
	}
	e.openChunked(r, nip34.Live(fs))
}

// maxReqBytes bounds the filters of one REQ message: relays drop the
// connection on larger messages (strfry's default maxWebsocketPayloadSize is
// 131072 bytes, khatru's MaxMessageSize 512000), and 100 Layer 3 filters of
// 100 event ids take about 680 kB.
const maxReqBytes = 120_000

// openChunked opens fs as subscriptions of at most the relay's max_filters
// filters and maxReqBytes of filter JSON each.
func (e *Engine) openChunked(r *remote, fs []nostr.Filter) {
	per := e.d.Health.Limits(r.URL).MaxFilters
	if per <= 0 || per > 100 {
		per = 100
	}
	for start := 0; start < len(fs); {
		end, size := start, 0
		for end < len(fs) && end-start < per {
			n := filterBytes(fs[end])
			if end > start && size+n > maxReqBytes {
				break
			}
			size += n
			end++
		}
		r.liveSeq++
		e.openLive(r, fmt.Sprintf("l%d", r.liveSeq+1), fs[start:end])
		start = end
	}
}

// filterBytes is the size of f's JSON.
func filterBytes(f nostr.Filter) int {
	b, err := f.MarshalJSON()
	if err != nil {
		return maxReqBytes
	}
	return len(b) + 1
}

func (e *Engine) openLive(r *remote, id string, fs []nostr.Filter) {
	if _, open := r.live[id]; open {
		e.closeLive(r, id)
	}
	r.live[id] = len(fs)
	e.m.filtersOpen.WithLabelValues(r.URL).Set(float64(e.filtersOpen(r)))
	url, gen, ctx, count := r.URL, r.gen, e.ctx, &r.received
	e.exec(r, func(c *relay.Conn) {
		sub, err := c.Subscribe(ctx, id, nostr.Filters(fs))
		if err != nil {
			return // the watcher reports the broken connection
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.readLive(ctx, url, gen, sub, count)
		}()
	})
}

func (e *Engine) closeLive(r *remote, id string) {
	delete(r.live, id)
	e.m.filtersOpen.WithLabelValues(r.URL).Set(float64(e.filtersOpen(r)))
	e.exec(r, func(c *relay.Conn) { c.Unsubscribe(id) })
}

// readLive forwards a live subscription's events to the handler.
func (e *Engine) readLive(ctx context.Context, url string, gen uint64, sub *relay.Subscription, count *atomic.Uint64) {
	recv := e.m.eventsReceived.WithLabelValues(url)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Done():
			// Closed by us, or the connection ended; drain what is left
			// of a CLOSED below.
			select {
			case m, ok := <-sub.Messages():
				if ok && m.Type == relay.MsgClosed {
					reason := m.Reason
					e.post(func() { e.onLiveClosed(url, gen, sub.ID, reason) })
				}
			default:
			}
			return
		case m, ok := <-sub.Messages():
			if !ok {
				return
			}
			switch m.Type {
			case relay.MsgEvent:
				recv.Inc()
				count.Add(1)
				if !sub.Filters.Match(m.Event) {
					// Answers we did not ask for are dropped before they
					// cost a queue slot or a signature check.
					e.h.Invalid("no_match")
					continue
				}
				if err := e.h.Handle(ctx, ingest.Incoming{Event: m.Event, Size: m.Size, Relay: url}); err != nil {
					return
				}
			case relay.MsgClosed:
				reason := m.Reason
				e.post(func() { e.onLiveClosed(url, gen, sub.ID, reason) })
				return
			}
		}
	}
}

// onLiveClosed: the relay closed a live subscription. It is rebuilt once
// the relay allows new REQs.
func (e *Engine) onLiveClosed(url string, gen uint64, id, reason string) {
	r := e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	if _, ok := r.live[id]; !ok {
		return
	}
	delete(r.live, id) // the health tracker heard the reason in onClosed
	r.lastError = "CLOSED: " + reason
	r.rebuildLive = true
	e.log.Info("relay closed a live subscription", zap.String("relay", url), zap.String("reason", reason))
}

// onClosed hears every CLOSED of a remote relay, live or historic, from
// its reader before the subscription does, so that a rate limit starts the
// cooldown before anyone retries.
func (e *Engine) onClosed(url, reason string) {
	if e.d.Health.Observe(url, health.SourceClosed, reason) == health.SignalRateLimited {
		at := e.clock.Now()
		e.post(func() {
			if r := e.relays[url]; r != nil {
				r.rateLimitedAt = at
			}
		})
	}
}

func (e *Engine) onNotice(url, text string) {
	sig := e.d.Health.Observe(url, health.SourceNotice, text)
	switch sig {
	case health.SignalTooManySubscriptions, health.SignalRateLimited:
		// A NOTICE names no subscription: whatever REQ it refused, rebuild
		// the live ones once the relay allows it.
		at := e.clock.Now()
		e.post(func() {
			if r := e.relays[url]; r != nil && r.Status.IsUp() {
				r.rebuildLive = true
				if sig == health.SignalRateLimited {
					r.rateLimitedAt = at
				}
			}
		})
	}
}

// waitCooldown blocks until url's rate-limit cooldown is over: the relay
// connection calls it before every REQ and NEG-OPEN.
func (e *Engine) waitCooldown(ctx context.Context, url string) error {
	for {
		d := e.d.Health.CooldownRemaining(url)
		if d <= 0 {
			return nil
		}
		if err := e.sleep(ctx, d); err != nil {
			return err
		}
	}
}

// sleep waits d on the engine's clock (a test clock's After when it has
// one), or until ctx is done.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	var wake <-chan time.Time
	if c, ok := e.clock.(interface {
		After(time.Duration) <-chan time.Time
	}); ok {
		wake = c.After(d)
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		wake = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
		return nil
	}
}

func (e *Engine) filtersOpen(r *remote) int {
	n := 0
	for _, c := range r.live {
		n += c
	}
	return n
}

// allowed tells whether new REQs may go to the relay now.
func (e *Engine) allowed(r *remote) bool {
	return r.Status.IsUp() && e.d.Health.CooldownRemaining(r.URL) <= 0
}

// addFilters starts syncing new items from a relay: live subscriptions and
// a historic batch, consolidating first when the relay would carry too
// many filters or subscriptions.
func (e *Engine) addFilters(a AddFilters) {
	r := e.relays[a.Relay]
	if r == nil || !r.Status.IsUp() {
		return
	}
	if !e.allowed(r) || !r.consolidateBy.IsZero() {
		r.deferred = true
		return
	}
	repos, roots := a.Items.Repos.sorted(), a.Items.Roots.sorted()
	newFilters := nip34.Count23(len(repos), len(roots), e.cfg.ValuesPerFilter)
	budget := e.d.Health.SubscriptionBudget(r.URL)
	// Consolidate when the relay would carry more filters than the
	// threshold (or, when even its consolidated set exceeds that, half a
	// threshold more than that set), or would use its last subscription:
	// historic jobs running now hold subscriptions too.
	limit := max(e.cfg.ConsolidationThreshold, r.baseline+e.cfg.ConsolidationThreshold/2)
	if e.filtersOpen(r)+newFilters > limit || len(r.live)+r.running+1 >= budget {
		if len(e.pending[r.URL]) > 0 {
			r.consolidateBy = e.clock.Now().Add(e.cfg.ConsolidationWait)
			r.deferred = true
			return
		}
		e.consolidate(r)
	}
	e.subscribeLive(r, nip34.Layers23(repos, roots, e.cfg.ValuesPerFilter, nil))
	e.startBatch(r, a.Items, nip34.Layers23(repos, roots, e.cfg.ValuesPerFilter, nil), false)
	e.updateRelayState(r)
}

// consolidate closes every live subscription of the relay and re-opens
// Layer 1 and Layers 2/3 for everything confirmed or pending in as few
// filters as possible, with a catch-up batch since now − since_buffer.
func (e *Engine) consolidate(r *remote) {
	e.log.Info("consolidating subscriptions", zap.String("relay", r.URL), zap.Int("filters", e.filtersOpen(r)), zap.Int("subscriptions", len(r.live)))
	for id := range r.live {
		e.closeLive(r, id)
	}
	r.consolidateBy = time.Time{}
	r.rebuildLive = false
	items := newItems()
	items.Repos.addAll(r.Confirmed.Repos)
	items.Roots.addAll(r.Confirmed.Roots)
	for _, b := range e.pending[r.URL] {
		items.Repos.addAll(b.Items.Repos)
		items.Roots.addAll(b.Items.Roots)
	}
	since := nostr.Timestamp(e.clock.Now().Add(-e.cfg.SinceBuffer).Unix())
	e.subscribeCatchup(r, items, since)
	r.baseline = e.filtersOpen(r)
}

// subscribeCatchup opens Layer 1 and Layers 2/3 for items as subscriptions
// with since: stored events since then, then live.
func (e *Engine) subscribeCatchup(r *remote, items Items, since nostr.Timestamp) {
	e.openLive(r, "l1", []nostr.Filter{nip34.Layer1(&since)})
	fs := nip34.Layers23(items.Repos.sorted(), items.Roots.sorted(), e.cfg.ValuesPerFilter, &since)
	e.openChunked(r, fs)
}

// --- historic batches -----------------------------------------------------

func (e *Engine) startBatch(r *remote, items Items, fs []nostr.Filter, catchup bool) {
	e.nextBatch++
	b := &PendingBatch{ID: e.nextBatch, Items: items, Catchup: catchup}
	e.pending[r.URL] = append(e.pending[r.URL], b)
	e.m.pendingBatches.WithLabelValues(r.URL).Set(float64(len(e.pending[r.URL])))
	r.jobs = append(r.jobs, &job{batch: b, filters: fs})
	e.startJobs(r)
}

// jobSlots is how many historic subscriptions may run beside the live ones.
func (e *Engine) jobSlots(r *remote) int {
	return max(1, e.d.Health.SubscriptionBudget(r.URL)-len(r.live))
}

func (e *Engine) startJobs(r *remote) {
	if !e.allowed(r) {
		return
	}
	for len(r.jobs) > 0 && r.running < e.jobSlots(r) {
		j := r.jobs[0]
		r.jobs = r.jobs[1:]
		r.running++
		url, gen, conn, count := r.URL, r.gen, r.conn, &r.received
		started := e.clock.Now()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			asked := nostr.Filters(j.filters)
			err := e.d.Historic.Sync(e.ctx, conn, j.filters, 1, func(ctx context.Context, in ingest.Incoming) error {
				e.m.eventsReceived.WithLabelValues(url).Inc()
				count.Add(1)
				if in.Event == nil || !asked.Match(in.Event) {
					e.h.Invalid("no_match")
					return nil
				}
				return e.h.Handle(ctx, in)
			})
			e.post(func() {
				if err != nil && e.requeueRateLimited(url, gen, j, started) {
					return
				}
				e.onBatchDone(url, gen, j.batch, err)
			})
		}()
	}
}

// requeueRateLimited puts a failed historic job back in the queue when the
// relay signalled a rate limit since it started or is cooling down now:
// the failure is likely a refused REQ (a rate-limit NOTICE names none; a
// CLOSED's cooldown is visible before rateLimitedAt is), and the job runs again
// once the cooldown is over instead of leaving its history to the full
// resync.
func (e *Engine) requeueRateLimited(url string, gen uint64, j *job, started time.Time) bool {
	r := e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return false
	}
	if r.rateLimitedAt.Before(started) && e.d.Health.CooldownRemaining(url) <= 0 {
		return false
	}
	r.running--
	r.jobs = append([]*job{j}, r.jobs...)
	e.log.Info("historic sync batch hit a rate limit; retrying after the cooldown",
		zap.String("relay", url), zap.Uint64("batch", j.batch.ID), zap.Duration("cooldown", e.d.Health.CooldownRemaining(url)))
	e.startJobs(r)
	return true
}

// onBatchDone confirms a batch's items; when no batch is pending the
// relay's historic sync is complete.
func (e *Engine) onBatchDone(url string, gen uint64, b *PendingBatch, err error) {
	r := e.relays[url]
	if r == nil || r.gen != gen || !r.Status.IsUp() {
		return
	}
	r.running--
	batches := e.pending[url]
	for i, x := range batches {
		if x == b {
			e.pending[url] = append(batches[:i:i], batches[i+1:]...)
			break
		}
	}
	e.m.pendingBatches.WithLabelValues(url).Set(float64(len(e.pending[url])))
	if err != nil {
		r.HistoricFailed = true
		r.lastError = "historic sync: " + err.Error()
		e.m.historicBatches.WithLabelValues("failed").Inc()
		e.log.Warn("historic sync batch failed", zap.String("relay", url), zap.Uint64("batch", b.ID), zap.Error(err))
	} else {
		e.m.historicBatches.WithLabelValues("ok").Inc()
	}
	// Items are confirmed even when the batch failed: their live
	// subscriptions are open, and the full resync retries the history.
	r.Confirmed.Repos.addAll(b.Items.Repos)
	r.Confirmed.Roots.addAll(b.Items.Roots)
	if len(e.pending[url]) == 0 && !r.consolidateBy.IsZero() {
		e.consolidate(r)
	}
	e.startJobs(r)
	if r.deferred {
		r.deferred = false
		e.recomputeRelay(url)
	}
	e.updateRelayState(r)
}

// updateRelayState derives Syncing / Connected / ConnectedHistoricSyncFailures.
func (e *Engine) updateRelayState(r *remote) {
	if !r.Status.IsUp() {
		return
	}
	prev := r.Status
	switch {
	case len(e.pending[r.URL]) > 0:
		r.Status = Syncing
	case r.HistoricFailed:
		r.Status = ConnectedHistoricSyncFailures
	default:
		r.Status = Connected
	}
	if prev == Syncing && r.Status != Syncing {
		e.log.Info("historic sync complete", zap.String("relay", r.URL), zap.Stringer("state", r.Status),
			zap.Int("repos", len(r.Confirmed.Repos)), zap.Int("roots", len(r.Confirmed.Roots)), zap.Uint64("events", r.received.Load()))
	}
	e.m.relayConnected.WithLabelValues(r.URL).Set(float64(r.Status))
}

// --- timers ---------------------------------------------------------------

func (e *Engine) onTick() {
	now := e.clock.Now()
	for _, r := range e.relays {
		if !r.Status.IsUp() {
			continue
		}
		if !r.consolidateBy.IsZero() && !now.Before(r.consolidateBy) {
			e.consolidate(r)
			r.deferred = true
		}
		if r.rebuildLive && e.allowed(r) && len(e.pending[r.URL]) == 0 {
			e.consolidate(r)
		}
		if !r.fullResyncAt.IsZero() && !now.Before(r.fullResyncAt) {
			e.fullResync(r)
		}
		e.startJobs(r)
		if r.Status == Syncing && now.Sub(r.progressLogged) >= progressLogInterval {
			if !r.progressLogged.IsZero() {
				e.log.Info("historic sync in progress", zap.String("relay", r.URL),
					zap.Int("pending_batches", len(e.pending[r.URL])), zap.Int("repos_confirmed", len(r.Confirmed.Repos)),
					zap.Int("roots_confirmed", len(r.Confirmed.Roots)), zap.Uint64("events_received", r.received.Load()))
			}
			r.progressLogged = now
		}
		if r.deferred && e.allowed(r) && r.consolidateBy.IsZero() {
			r.deferred = false
			e.recomputeRelay(r.URL)
		}
		e.updateRelayState(r)
	}
	if now.Sub(e.lastEmpty) >= e.cfg.EmptyRelayCheck {
		e.lastEmpty = now
		e.dropEmptyRelays()
	}
	e.h.Rejected().Expire()
	e.connectDue()
	e.updateIndexMetrics()
	e.refreshSnapshot()
}

// fullResync clears a relay's confirmed state and syncs its whole history
// again (the 23–25 h timer).
func (e *Engine) fullResync(r *remote) {
	e.log.Info("full resync", zap.String("relay", r.URL))
	for id := range r.live {
		e.closeLive(r, id)
	}
	r.jobs = nil
	delete(e.pending, r.URL)
	r.ClearConfirmed()
	r.HistoricFailed = false
	r.consolidateBy = time.Time{}
	r.baseline = 0
	r.fullResyncAt = e.clock.Now().Add(e.fullResyncInterval())
	e.subscribeLayer1(r)
	e.startBatch(r, newItems(), []nostr.Filter{nip34.Layer1(nil)}, true)
	e.recomputeRelay(r.URL)
}

// dropEmptyRelays disconnects relays nothing points at any more.
func (e *Engine) dropEmptyRelays() {
	targets := deriveRelayTargets(e.repos, e.bootstrapList())
	for url, r := range e.relays {
		if r.Bootstrap || len(e.pending[url]) > 0 {
			continue
		}
		if _, wanted := targets[url]; !wanted {
			e.forget(url)
		}
	}
}

func (e *Engine) updateIndexMetrics() {
	roots := 0
	for _, n := range e.repos {
		roots += len(n.Roots)
	}
	connected := 0
	for _, r := range e.relays {
		if r.Status.IsUp() {
			connected++
		}
	}
	e.m.repositories.Set(float64(len(e.repos)))
	e.m.rootEvents.Set(float64(roots))
	e.m.relaysTracked.Set(float64(len(e.relays)))
	e.m.relaysConnected.Set(float64(connected))
}
