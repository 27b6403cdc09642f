// Package sidecar wires the configuration to the engine packages (relay
// connections, reposync, ingest, health, purgatory, publisher) and runs
// them as one process.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/discovery"
	"github.com/grasp-sync/grasp-sync/internal/event"
	"github.com/grasp-sync/grasp-sync/internal/gitserve"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/localindex"
	"github.com/grasp-sync/grasp-sync/internal/netpolicy"
	"github.com/grasp-sync/grasp-sync/internal/nostrurl"
	"github.com/grasp-sync/grasp-sync/internal/publish"
	"github.com/grasp-sync/grasp-sync/internal/purgatory"
	"github.com/grasp-sync/grasp-sync/internal/purgatory/gitx"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/reposync"
	"github.com/grasp-sync/grasp-sync/internal/statestore"
	"github.com/grasp-sync/grasp-sync/internal/status"
)

// Deps are what the caller provides besides the configuration.
type Deps struct {
	Log      *zap.Logger
	Registry prometheus.Registerer
	Version  string
	// Clock, when set, replaces the wall clock in time-based logic.
	Clock clock.Clock
	// HTTPClient, when set, is used for websocket handshakes and NIP-11 of
	// the configured relays (own, bootstrap, trusted). Relays discovered
	// in announcements always go through the outbound address policy.
	HTTPClient *http.Client
	// Resolver, when set, replaces the system resolver of the outbound
	// address policy (tests map names to addresses with it).
	Resolver netpolicy.Resolver
	// PolicyDial, when set, replaces the policy's final connect to an
	// already checked address (tests prove nothing else is dialled).
	PolicyDial netpolicy.DialFunc
	// Git, when set, runs git for the purgatory instead of the git binary;
	// the outbound address policy still guards every command.
	Git gitx.Runner
}

// Sidecar is one running grasp-sync.
type Sidecar struct {
	cfg    *config.Config
	d      Deps
	log    *zap.Logger
	health *health.Tracker
	pub    *publish.Publisher
	purg   *purgatory.Purgatory
	engine *reposync.Engine
	ingest *ingest.Handler
	local  *localindex.Index
	store  *statestore.Store
	// gitHTTP serves the git directory read-only; nil when off.
	gitHTTP *gitserve.Server
	// localRestored: the local index was loaded from the store.
	localRestored bool
	// unapplied are the roots the own relay stored that discovery may not
	// have applied yet.
	unapplied *discovery.UnappliedRoots
}

// New wires the components from cfg. Nothing runs until Run.
func New(cfg *config.Config, d Deps) (*Sidecar, error) {
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Registry == nil {
		d.Registry = prometheus.NewRegistry()
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	s := &Sidecar{cfg: cfg, d: d, log: d.Log}

	ht, err := health.New(cfg.Health, d.Clock, d.Registry, d.Log) // named "health" by New
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	s.health = ht
	pacer, err := health.NewPacer(cfg.Health, d.Clock, d.Registry, d.Log)
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}

	ropts := RelayOptions(cfg)
	ropts.HTTPClient = d.HTTPClient

	var signer publish.Signer
	if !cfg.Auth.Key.IsZero() {
		signer = cfg.Auth.Key.Sign
	}
	ownOpts := ropts
	ownOpts.Logger = d.Log.Named("publisher")
	ownOpts.CoalesceWrites = true // the publisher's bursts of EVENTs: one write each
	pcfg := cfg.Publisher.Config
	pcfg.DialTimeout = cfg.Relay.ConnectTimeout
	pub, err := publish.New(pcfg, func(ctx context.Context) (*relay.Conn, error) {
		return relay.Dial(ctx, cfg.OwnRelay, ownOpts)
	}, signer, d.Log.Named("publisher"), d.Registry, publish.WithClock(d.Clock))
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	s.pub = pub

	// Relay and clone URLs from announcements go through the outbound
	// address policy; the operator's configured relays do not.
	pol, err := netpolicy.New(netpolicy.Options{
		Allow: cfg.Dial.Allow, Resolver: d.Resolver, Dial: d.PolicyDial,
		DialTimeout: cfg.Relay.ConnectTimeout, Logger: d.Log.Named("netpolicy"), Registerer: d.Registry,
	})
	if err != nil {
		return nil, fmt.Errorf("dial policy: %w", err)
	}
	relays := pol.Relays(append(append([]string{cfg.OwnRelay}, cfg.BootstrapRelays...), cfg.TrustedRelays...), d.HTTPClient)

	var local *localindex.Index
	var present ingest.Present
	if cfg.Negentropy.Enabled {
		if local, err = localindex.New(cfg.Limits.Config.Options(), d.Registry); err != nil {
			return nil, fmt.Errorf("local index: %w", err)
		}
		s.local, present = local, local
	}
	if err := s.openState(local); err != nil {
		return nil, err
	}
	// Each stage is built once, with what it needs, in the direction events
	// flow: the purgatory first, with the queue it hands released events
	// back through; then the handler, which reads that queue and holds
	// events in the purgatory; then the sync engine, which feeds the
	// handler.
	var holder ingest.Holder
	var releases *event.Releases
	if cfg.PurgatoryActive() {
		releases = event.NewReleases()
		purg, err := newPurgatory(cfg, d, pol, relays, ropts, releases)
		if err != nil {
			return nil, err
		}
		s.purg, holder = purg, purg
		s.restorePurgatory()
	}
	if cfg.GitHTTP.Enabled() {
		gs, err := gitserve.New(cfg.GitHTTP, gitserve.Options{GitDir: cfg.GitDir, Log: d.Log.Named("gitserve"), Registry: d.Registry})
		if err != nil {
			return nil, fmt.Errorf("git server: %w", err)
		}
		s.gitHTTP = gs
	}
	// The roots the own relay stores are noted until discovery's index
	// holds them: those its self-subscription did not deliver in time are
	// applied from the note, and a stop in between loses none
	// (discovery/unappliedroots.go).
	unapplied := discovery.NewUnappliedRoots(cfg.Sync.SelfKinds, d.Clock, d.Log.Named("discovery"))
	s.unapplied = unapplied
	stored := []func(*nostr.Event){unapplied.Note}
	in, err := ingest.New(ingestConfig(cfg), ingest.Deps{
		Publisher: pub, Holder: holder, Released: releases, Present: present, Stored: stored,
		Clock: d.Clock, Log: d.Log.Named("ingest"), Registry: d.Registry,
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	s.ingest = in
	// A restored index needs no marking: the dedupe set asks the index,
	// and every entry it restores carries its dedupe mark.

	deps := reposync.Deps{
		Log: d.Log, Registry: d.Registry, Clock: d.Clock, Health: ht, Pacer: pacer,
		Dial: relays.Dial, AllowRelay: relays.Allow, Limits: relays.Limits,
		DialOwn:      dialOwnReader,
		RelayOptions: ropts,
		Ingest:       in,
		LocalIndex:   local,
	}
	if signer != nil {
		deps.Sign = signer
	}
	if s.purg != nil && local != nil {
		deps.ExtraLocal = append(deps.ExtraLocal, localindex.SourceFunc(s.purg.AppendHeld))
	}

	deps.LocalRestored = s.localRestored
	deps.KeepHeads = s.store != nil
	deps.Unapplied = unapplied
	eng, err := reposync.New(syncConfig(cfg), deps)
	if err != nil {
		return nil, fmt.Errorf("sync: %w", err)
	}
	s.engine = eng
	s.restoreRelays()
	if err := registerSidecarMetrics(d.Registry, s); err != nil {
		return nil, err
	}
	return s, nil
}

// newPurgatory builds the purgatory: git under the outbound address
// policy, nostr:// clone URLs and NIP-05 owners resolved through it, and
// released events handed back through releases (which ingest reads).
func newPurgatory(cfg *config.Config, d Deps, pol *netpolicy.Policy, relays *netpolicy.Relays, ropts relay.Options, releases *event.Releases) (*purgatory.Purgatory, error) {
	pc := cfg.Purgatory.Config
	pc.GitDir = cfg.GitDir
	pc.OwnDomain = cfg.ServiceDomain
	pc.HostAll = cfg.Sync.HostAll
	// The policy's git guard checks every remote against --dial.allow
	// (hosts and CIDRs), so purgatory's own all-or-nothing check is off.
	pc.AllowPrivateAddresses = true
	git := d.Git
	if git == nil {
		x := gitx.NewExec(pc.GitTimeout)
		x.OutputCap = pc.GitOutputCap
		git = x
	}
	// nostr:// clone URLs are resolved on the URL's relay hints and
	// the bootstrap relays, dialled under the relay address policy.
	nostrURLs := &nostrurl.NostrResolver{
		Dial: func(ctx context.Context, url string) (*relay.Conn, error) {
			return relays.Dial(ctx, url, ropts)
		},
		Relays: cfg.BootstrapRelays, Timeout: cfg.Sync.EOSETimeout,
		MaxRelays: nostrurl.DefaultNostrResolveRelays, TTL: cfg.Purgatory.NostrURLCacheTTL,
		Clock: d.Clock,
	}
	// A NIP-05 owner's nostr.json is fetched over HTTPS from a domain
	// named in an event: dialled under the policy (kind nip05).
	nip05 := &nostrurl.NIP05Lookup{
		Client:  pol.HTTPClientFor(netpolicy.KindNIP05, cfg.Purgatory.NIP05Timeout),
		Timeout: cfg.Purgatory.NIP05Timeout, MaxBody: nostrurl.DefaultNIP05MaxBody,
		MaxRelays: nostrurl.DefaultNIP05MaxRelays, TTL: cfg.Purgatory.NostrURLCacheTTL, Clock: d.Clock,
	}
	nostrURLs.NIP05 = nip05.Lookup
	purg, err := purgatory.New(pc, purgatory.Options{
		Publisher: releases, Logger: d.Log.Named("purgatory"), Registerer: d.Registry,
		Git: pol.GitRunner(git), Resolver: pol.Resolver(netpolicy.KindClone),
		CheckCloneURL: pol.CheckCloneURL,
		ResolveNostr:  nostrURLs.Resolve,
	})
	if err != nil {
		return nil, fmt.Errorf("purgatory: %w", err)
	}
	return purg, nil
}

// Metric names of the sidecar as a whole.
const (
	MetricReady             = "ngit_sync_ready"
	MetricOwnRelayConnected = "ngit_sync_own_relay_connected"
	MetricOwnRootsLate      = "ngit_sync_own_roots_applied_late_total"
	MetricOwnRootsUnapplied = "ngit_sync_own_roots_unapplied"
)

// registerSidecarMetrics registers the gauges read from the whole sidecar
// at scrape time: readiness (/readyz as a number), the own relay's
// connections, and the roots it stored that the self-subscription did not
// deliver in time.
func registerSidecarMetrics(reg prometheus.Registerer, s *Sidecar) error {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricReady,
			Help: "1 while the sidecar is ready (/readyz answers 200): own relay connected and its stored state read.",
		}, func() float64 { return b(s.Ready()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricOwnRelayConnected,
			Help: "1 while both the self-subscription and the publisher are connected to the own relay.",
		}, func() float64 { return b(s.engine.OwnConnected() && s.pub.Connected()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: MetricOwnRootsLate,
			Help: "Root events the own relay acknowledged storing that the self-subscription did not deliver within sync.root_wait, applied from the acknowledgement.",
		}, func() float64 { return float64(s.unapplied.AppliedLate()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: MetricOwnRootsUnapplied,
			Help: "Root events the own relay stored, waiting longer than sync.root_wait, that cannot be applied: no announcement applied and the orphan roots' bound reached.",
		}, func() float64 { return float64(s.unapplied.Stuck()) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("sidecar metrics: %w", err)
		}
	}
	return nil
}

// The configuration's sections are the engines' own settings types, passed
// to them as they are; the functions below add what New derives from other
// sections.

// RelayOptions are the base options of every relay connection: the
// relay section's settings (without the HTTP client and logger, which New
// injects); check uses it too.
func RelayOptions(cfg *config.Config) relay.Options {
	ropts := relay.DefaultOptions()
	ropts.Settings = cfg.Relay
	return ropts
}

// dialOwnReader dials the own relay for reading (the self-subscription,
// the local set's fill): what it sends is never forwarded, so the
// connection keeps no event's raw bytes.
func dialOwnReader(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error) {
	opts.NoRaw = true
	return relay.Dial(ctx, url, opts)
}

// syncConfig gives the sync engine its settings (its Deps are wired by
// New): the sync section, the limits' bounds on relays and repositories,
// the negentropy and trusted sections as they are, and what the engine
// takes from other sections.
func syncConfig(cfg *config.Config) reposync.Config {
	scfg := reposync.DefaultConfig()
	scfg.Settings = cfg.Sync.Settings
	scfg.Bounds = cfg.Limits.Bounds
	scfg.OwnRelay = cfg.OwnRelay
	scfg.ServiceDomain = cfg.ServiceDomain
	scfg.Bootstrap = cfg.BootstrapRelays
	scfg.Tick = cfg.Health.Tick
	scfg.ConnectTimeout = cfg.Relay.ConnectTimeout
	scfg.ProgressLogInterval = cfg.Log.ProgressInterval
	// A session accepts twice the largest message in hex.
	scfg.Negentropy = historic.NegConfig{NegSettings: cfg.Negentropy, MaxInboundHex: 2 * cfg.Relay.MaxMessageBytes}
	scfg.Trusted.Relays = cfg.TrustedRelays
	scfg.Trusted.Settings = cfg.Trusted
	return scfg
}

// ingestConfig puts together the shared event handler's settings, which
// the configuration keeps in several sections (limits, rejected,
// publisher, sync.verify_workers).
func ingestConfig(cfg *config.Config) ingest.Config {
	icfg := ingest.DefaultConfig()
	icfg.VerifyConfig = cfg.Sync.VerifyConfig
	icfg.EventLimits = cfg.Limits.EventLimits
	icfg.RelayLimits = cfg.Limits.RelayLimits
	// One relay may fill half of the shared queue at most.
	icfg.QueueLen = 2 * cfg.Limits.RelayQueue
	icfg.Rejected = cfg.Rejected
	icfg.OwnHeldConfig = cfg.Publisher.OwnHeldConfig
	// The dedupe memory must be shorter than the full-resync interval, or
	// a resync could never re-publish what the own relay lost.
	icfg.SeenTTL = min(ingest.DefaultSeenTTL, cfg.Sync.FullResyncMin/2)
	return icfg
}

// Engine exposes the sync engine (tests and the demo read its state).
func (s *Sidecar) Engine() *reposync.Engine { return s.engine }

// Purgatory exposes the purgatory, nil when it is off (the demo follows a
// held event with it).
func (s *Sidecar) Purgatory() *purgatory.Purgatory { return s.purg }

// Run runs every component until ctx is cancelled, then shuts down in
// order: stop syncing, flush the publisher within the grace period, stop
// the purgatory (waiting for its git commands).
func (s *Sidecar) Run(ctx context.Context) error {
	pubCtx, stopPub := context.WithCancel(context.Background())
	defer stopPub()
	engCtx, stopEng := context.WithCancel(ctx)
	defer stopEng()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	start := func(name string, ctx context.Context, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	// The handler stops with the engine: both are done before the
	// publisher is flushed.
	var engWG sync.WaitGroup
	engWG.Add(2)
	go func() { defer engWG.Done(); _ = s.ingest.Run(engCtx) }()
	go func() {
		defer engWG.Done()
		if err := s.engine.Run(engCtx); err != nil && !errors.Is(err, context.Canceled) {
			errs <- fmt.Errorf("sync: %w", err)
		}
	}()
	start("health", engCtx, s.health.Run)
	start("publisher", pubCtx, s.pub.Run)
	if s.purg != nil {
		start("purgatory", pubCtx, s.purg.Run)
		// Released events are published for as long as the purgatory runs.
		start("released", pubCtx, s.ingest.RunReleased)
	}
	start("progress", engCtx, s.runProgress)
	if s.gitHTTP != nil {
		start("git server", engCtx, s.runGitHTTP)
	}
	if s.store != nil {
		start("state", pubCtx, func(ctx context.Context) error {
			return s.store.Run(ctx, s.stateSources(), s.cfg.State.FlushInterval)
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
		s.log.Error("component failed; shutting down", zap.Error(runErr))
	}
	stopEng()
	engWG.Wait()
	grace := s.cfg.ShutdownGrace
	fctx, cancel := context.WithTimeout(context.Background(), grace)
	if err := s.pub.Flush(fctx); err != nil {
		st := s.pub.Stats()
		s.log.Warn("publisher not flushed within the grace period", zap.Duration("grace", grace),
			zap.Int("queued", st.Queued), zap.Int("in_flight", st.InFlight))
	}
	cancel()
	stopPub()
	wg.Wait()
	if s.store != nil {
		if err := s.store.FlushFinal(s.stateSources()); err != nil {
			s.log.Warn("final state store flush failed", zap.Error(err))
		}
		s.store.Close()
	}
	return runErr
}

// runGitHTTP serves the git directory until ctx is done, then gives the
// requests being served the shutdown grace to finish.
func (s *Sidecar) runGitHTTP(ctx context.Context) error {
	if err := s.gitHTTP.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := s.gitHTTP.Shutdown(sctx); err != nil {
		s.log.Warn("git requests cut off at shutdown", zap.Duration("grace", s.cfg.ShutdownGrace), zap.Error(err))
	}
	return nil
}

// GitHTTPAddr is the read-only git server's bound address: "" when it is
// off or not listening yet.
func (s *Sidecar) GitHTTPAddr() string {
	if s.gitHTTP == nil {
		return ""
	}
	return s.gitHTTP.Addr()
}

// Ready tells whether the own relay is connected and the first
// self-subscription EOSE was processed.
func (s *Sidecar) Ready() bool { return s.engine.Ready() && s.pub.Connected() }

// Status is the /status document.
func (s *Sidecar) Status() status.Snapshot {
	st := s.engine.Status()
	st.Version = s.d.Version
	st.Ready = s.Ready()
	ps := s.pub.Stats()
	st.Publisher = status.Publisher{Queued: ps.Queued, InFlight: ps.InFlight, Accepted: ps.Accepted, Duplicates: ps.Duplicates, Rejected: ps.Rejected}
	if s.purg != nil {
		st.Purgatory = purgatoryStatus(s.purg)
	}
	st.State = s.stateStatus()
	st.OwnRelay.RootsAppliedLate, st.OwnRelay.RootsUnapplied = s.unapplied.AppliedLate(), s.unapplied.Stuck()
	return st
}

// purgatoryStatus maps the purgatory's view (its size, per identifier and
// per clone domain) onto the status document.
func purgatoryStatus(p *purgatory.Purgatory) status.Purgatory {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	ps := p.Stats()
	l := p.DomainLimit()
	limit := status.DomainLimit{RequestsPerWindow: l.Requests, WindowSeconds: l.Window.Seconds(), Concurrency: l.Concurrency}
	out := status.Purgatory{Enabled: true, Events: ps.Events(), QueueSize: ps.QueueSize, DomainLimit: limit}
	for _, d := range p.Domains() {
		out.Domains = append(out.Domains, status.PurgatoryDomain{Domain: d.Domain, Waiting: d.Waiting,
			InFlight: d.InFlight, RequestsInWindow: d.InWindow, NextSlot: opt(d.NextSlot)})
	}
	ids := p.Identifiers()
	out.Identifiers = make([]status.PurgatoryIdentifier, 0, len(ids))
	for _, id := range ids {
		row := status.PurgatoryIdentifier{
			Identifier: id.Identifier, States: id.States, PRs: id.PRs,
			HeldSince: id.HeldSince, ExpiresAt: id.ExpiresAt,
			Attempts: id.Attempts, Syncing: id.Syncing, NextAttempt: opt(id.NextAttempt),
			LastError: id.LastError, LastErrorAt: opt(id.LastErrorAt),
		}
		for _, d := range id.Waiting {
			row.WaitingFor = append(row.WaitingFor, status.PurgatoryWait{Domain: d, DomainLimit: limit})
		}
		if len(row.WaitingFor) > 0 {
			out.Waiting++
		}
		out.Identifiers = append(out.Identifiers, row)
	}
	return out
}
