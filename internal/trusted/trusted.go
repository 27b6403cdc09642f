// Package trusted reconciles trusted archive relays periodically: every
// interval, the NIP-34 events of the last lookback and the events tagging
// the hosted repositories and root events are reconciled with NIP-77, and
// the missing ones fetched through the shared ingest handler.
//
// Ownership: each trusted relay has one goroutine of its own (Syncer.Run)
// that holds nothing the engine owns: the hosted items it asks about come
// from the engine's Run goroutine (Deps.Hosted), the relay's health from
// the health tracker, NIP-77 support from the historic NegSyncer, each
// behind its own synchronisation.
package trusted

import (
	"context"
	"errors"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/health"
	"github.com/grasp-sync/grasp-sync/internal/historic"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// Config configures periodic reconciliation with trusted archive
// relays: every Interval, the events of the last Lookback matching the
// NIP-34 kinds and the events tagging our repositories and root events
// are reconciled with NIP-77 and the missing ones fetched (at most
// MaxEventsPerCycle) through the shared handler.
type Config struct {
	// Relays are the trusted relays (the configuration's trusted_relays).
	Relays []string
	Settings
	// Kinds of the first filter; default all NIP-34 kinds.
	Kinds []int
}

// Settings are the user settings of the cycles: the configuration's
// trusted section. Each carries its YAML key and help text (flag,
// environment variable and documentation are derived from them).
type Settings struct {
	Interval          time.Duration `yaml:"interval" help:"Interval between reconciliations with each trusted relay."`
	Lookback          time.Duration `yaml:"lookback" help:"Window reconciled: events created within this long before now."`
	MaxEventsPerCycle int           `yaml:"max_events_per_cycle" help:"Events fetched from one trusted relay per cycle at most."`
}

// DefaultSettings returns the documented defaults.
func DefaultSettings() Settings {
	return Settings{Interval: 10 * time.Minute, Lookback: 7 * 24 * time.Hour, MaxEventsPerCycle: 50000}
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (s Settings) Validate() error {
	v := setting.Checks{}
	v.Positive("interval", s.Interval)
	v.Positive("lookback", s.Lookback)
	v.PositiveInt("max_events_per_cycle", s.MaxEventsPerCycle)
	return v.Err()
}

// Deps are the syncer's collaborators and the engine settings it reads.
type Deps struct {
	Log    *zap.Logger
	Clock  clock.Clock
	Health *health.Tracker
	// Pacer, when set, is each relay's request budget: a dial takes a
	// token as the engine's do (its REQs and NEG-OPENs take theirs
	// through Options' BeforeRequest).
	Pacer *health.Pacer
	// Neg reconciles; nil when NIP-77 historic sync is off.
	Neg    *historic.NegSyncer
	Ingest *ingest.Handler
	// Dial connects to a relay with Options(url), the engine's options.
	Dial    func(ctx context.Context, url string, opts relay.Options) (*relay.Conn, error)
	Options func(url string) relay.Options
	// Received counts the events received from a relay.
	Received func(url string) prometheus.Counter
	// Ready tells whether the sidecar is ready (the first cycle waits).
	Ready func() bool
	// Hosted asks the engine's Run goroutine for the hosted repositories
	// and their roots (sorted); false when ctx ended first.
	Hosted func(ctx context.Context) (repos, roots []string, ok bool)
	// Tick, ConnectTimeout and ValuesPerFilter are the engine's settings.
	Tick            time.Duration
	ConnectTimeout  time.Duration
	ValuesPerFilter int
}

// Syncer runs the cycles of the trusted relays.
type Syncer struct {
	cfg Config
	d   Deps
	log *zap.Logger
}

// New builds the syncer.
func New(cfg Config, d Deps) *Syncer {
	return &Syncer{cfg: cfg, d: d, log: d.Log}
}

// sleep waits dur or until ctx is done.
func (s *Syncer) sleep(ctx context.Context, dur time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.d.Clock.After(dur):
		return nil
	}
}

// nip34Kinds are the kinds of NIP-34 events.
var nip34Kinds = []int{
	nip34.KindRepoAnnouncement, nip34.KindRepoState, nip34.KindPatch, nip34.KindPullRequest,
	nip34.KindPRUpdate, nip34.KindIssue, nip34.KindStatusOpen, nip34.KindStatusApplied,
	nip34.KindStatusClosed, nip34.KindStatusDraft,
}

// Run reconciles one trusted relay every Interval until ctx ends.
// The first cycle starts once the sidecar is ready. The relay goes through
// the health tracker like any other: a failed cycle backs off (dead relays
// are tried once per dead retry interval, hard failures sit out the naughty
// period), a rate limit's cooldown is waited out, and a relay known not to
// speak NIP-77 (the support cache) is not asked until the cache expires.
func (s *Syncer) Run(ctx context.Context, url string) {
	log := s.log.With(zap.String("relay", url))
	if s.d.Neg == nil {
		log.Warn("trusted relay configured but NIP-77 historic sync is off; not reconciling")
		return
	}
	s.d.Health.Track(url)
	for !s.d.Ready() {
		if s.sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
	for {
		wait := s.cfg.Interval
		// Not ok with no wait: the sync engine holds a connection to the
		// relay (an announcement lists it too); its health is the
		// engine's to report, the cycle runs beside it.
		ok, w := s.d.Health.CanAttempt(url)
		shared := !ok && w <= 0
		if !ok && !shared {
			wait = max(w, s.d.Tick)
		} else if s.d.Neg.Support(url) != "unsupported" {
			if err := s.cycle(ctx, url, shared, log); err != nil && ctx.Err() == nil {
				log.Warn("trusted reconciliation failed", zap.Error(err))
				if ok, w := s.d.Health.CanAttempt(url); !ok {
					wait = min(max(w, s.d.Tick), wait)
				}
			}
		}
		if s.sleep(ctx, wait) != nil {
			return
		}
	}
}

// Filters are the filters of one cycle.
func (s *Syncer) Filters(ctx context.Context) ([]nostr.Filter, bool) {
	repos, roots, ok := s.d.Hosted(ctx)
	if !ok {
		return nil, false
	}
	since := nostr.Timestamp(s.d.Clock.Now().Add(-s.cfg.Lookback).Unix())
	kinds := s.cfg.Kinds
	if len(kinds) == 0 {
		kinds = nip34Kinds
	}
	fs := []nostr.Filter{{Kinds: kinds, Since: &since}}
	return append(fs, nip34.Layers23(repos, roots, s.d.ValuesPerFilter, &since)...), true
}

// cycle runs one reconciliation on a connection of its own. Unless
// shared (the engine is connected to the relay and reports its health), the
// connection's outcome goes to the health tracker.
func (s *Syncer) cycle(ctx context.Context, url string, shared bool, log *zap.Logger) error {
	ht := s.d.Health
	attempt, connected, failed, closed := ht.AttemptStarted, ht.Connected, ht.Failed, ht.Disconnected
	if shared {
		attempt, connected, closed = func(string) {}, func(string) {}, func(string) {}
		failed = func(string, error) {}
	}
	fs, ok := s.Filters(ctx)
	if !ok {
		return ctx.Err()
	}
	timeout := min(s.d.Health.ConnectTimeout(url), s.d.ConnectTimeout)
	if timeout <= 0 {
		timeout = s.d.ConnectTimeout
	}
	if err := s.d.Pacer.Wait(ctx, url); err != nil {
		return err
	}
	attempt(url)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := s.d.Dial(dctx, url, s.d.Options(url))
	cancel()
	if err != nil {
		failed(url, err)
		return err
	}
	connected(url)
	defer conn.Close()
	recv := s.d.Received(url)
	emit := func(ctx context.Context, in ingest.Incoming) error {
		recv.Inc()
		return s.d.Ingest.Handle(ctx, in)
	}
	start := s.d.Clock.Now()
	budget := s.cfg.MaxEventsPerCycle
	missing := 0
	var errs []error
	for _, f := range fs {
		if s.cfg.MaxEventsPerCycle > 0 && budget <= 0 {
			log.Warn("per-cycle event limit reached; the rest waits for the next cycle", zap.Int("limit", s.cfg.MaxEventsPerCycle))
			break
		}
		n, err := s.d.Neg.ReconcileFilter(ctx, conn, f, 2, budget, emit)
		missing += n
		if s.cfg.MaxEventsPerCycle > 0 {
			budget -= min(n, budget)
		}
		if errors.Is(err, neg.ErrUnsupported) {
			s.d.Neg.SetSupport(url, false)
			closed(url)
			return err
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		failed(url, err)
		return err
	}
	closed(url)
	log.Info("trusted reconciliation done", zap.Int("filters", len(fs)), zap.Int("missing", missing), zap.Duration("took", s.d.Clock.Now().Sub(start)))
	return nil
}
