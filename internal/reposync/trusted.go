package reposync

import (
	"context"
	"errors"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/repoindex"
)

// TrustedConfig configures periodic reconciliation with trusted archive
// relays: every Interval, the events of the last Lookback matching the
// NIP-34 kinds and the events tagging our repositories and root events
// are reconciled with NIP-77 and the missing ones fetched (at most
// MaxEventsPerCycle) through the shared handler.
type TrustedConfig struct {
	Relays            []string
	Interval          time.Duration
	Lookback          time.Duration
	MaxEventsPerCycle int
	// Kinds of the first filter; default all NIP-34 kinds.
	Kinds []int
}

// nip34Kinds are the kinds of NIP-34 events.
var nip34Kinds = []int{
	nip34.KindRepoAnnouncement, nip34.KindRepoState, nip34.KindPatch, nip34.KindPullRequest,
	nip34.KindPRUpdate, nip34.KindIssue, nip34.KindStatusOpen, nip34.KindStatusApplied,
	nip34.KindStatusClosed, nip34.KindStatusDraft,
}

// runTrusted reconciles one trusted relay every Interval until ctx ends.
// The first cycle starts once the sidecar is ready. The relay goes through
// the health tracker like any other: a failed cycle backs off (dead relays
// are tried once per dead retry interval, hard failures sit out the naughty
// period), a rate limit's cooldown is waited out, and a relay known not to
// speak NIP-77 (the support cache) is not asked until the cache expires.
func (e *Engine) runTrusted(ctx context.Context, url string) {
	log := e.log.Named("trusted").With(zap.String("relay", url))
	if e.neg == nil {
		log.Warn("trusted relay configured but NIP-77 historic sync is off; not reconciling")
		return
	}
	e.d.Health.Track(url)
	for !e.Ready() {
		if e.sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
	for {
		wait := e.cfg.Trusted.Interval
		// Not ok with no wait: the sync engine holds a connection to the
		// relay (an announcement lists it too); its health is the
		// engine's to report, the cycle runs beside it.
		ok, w := e.d.Health.CanAttempt(url)
		shared := !ok && w <= 0
		if !ok && !shared {
			wait = max(w, e.cfg.Tick)
		} else if e.neg.Support(url) != "unsupported" {
			if err := e.trustedCycle(ctx, url, shared, log); err != nil && ctx.Err() == nil {
				log.Warn("trusted reconciliation failed", zap.Error(err))
				if ok, w := e.d.Health.CanAttempt(url); !ok {
					wait = min(max(w, e.cfg.Tick), wait)
				}
			}
		}
		if e.sleep(ctx, wait) != nil {
			return
		}
	}
}

// trustedFilters are the filters of one cycle.
func (e *Engine) trustedFilters(ctx context.Context) ([]nostr.Filter, bool) {
	var repos, roots []string
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
	case <-ctx.Done():
		return nil, false
	}
	since := nostr.Timestamp(e.clock.Now().Add(-e.cfg.Trusted.Lookback).Unix())
	kinds := e.cfg.Trusted.Kinds
	if len(kinds) == 0 {
		kinds = nip34Kinds
	}
	fs := []nostr.Filter{{Kinds: kinds, Since: &since}}
	return append(fs, nip34.Layers23(repos, roots, e.cfg.ValuesPerFilter, &since)...), true
}

// trustedCycle runs one reconciliation on a connection of its own. Unless
// shared (the engine is connected to the relay and reports its health), the
// connection's outcome goes to the health tracker.
func (e *Engine) trustedCycle(ctx context.Context, url string, shared bool, log *zap.Logger) error {
	ht := e.d.Health
	attempt, connected, failed, closed := ht.AttemptStarted, ht.Connected, ht.Failed, ht.Disconnected
	if shared {
		attempt, connected, closed = func(string) {}, func(string) {}, func(string) {}
		failed = func(string, error) {}
	}
	fs, ok := e.trustedFilters(ctx)
	if !ok {
		return ctx.Err()
	}
	timeout := min(e.d.Health.ConnectTimeout(url), e.cfg.ConnectTimeout)
	if timeout <= 0 {
		timeout = e.cfg.ConnectTimeout
	}
	attempt(url)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := e.d.Dial(dctx, url, e.remoteOptions(url))
	cancel()
	if err != nil {
		failed(url, err)
		return err
	}
	connected(url)
	defer conn.Close()
	recv := e.m.eventsReceived.WithLabelValues(url)
	emit := func(ctx context.Context, in ingest.Incoming) error {
		recv.Inc()
		return e.h.Handle(ctx, in)
	}
	start := e.clock.Now()
	budget := e.cfg.Trusted.MaxEventsPerCycle
	missing := 0
	var errs []error
	for _, f := range fs {
		if e.cfg.Trusted.MaxEventsPerCycle > 0 && budget <= 0 {
			log.Warn("per-cycle event limit reached; the rest waits for the next cycle", zap.Int("limit", e.cfg.Trusted.MaxEventsPerCycle))
			break
		}
		n, err := e.neg.ReconcileFilter(ctx, conn, f, 2, budget, emit)
		missing += n
		if e.cfg.Trusted.MaxEventsPerCycle > 0 {
			budget -= min(n, budget)
		}
		if errors.Is(err, neg.ErrUnsupported) {
			e.neg.SetSupport(url, false)
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
	log.Info("trusted reconciliation done", zap.Int("filters", len(fs)), zap.Int("missing", missing), zap.Duration("took", e.clock.Now().Sub(start)))
	return nil
}
