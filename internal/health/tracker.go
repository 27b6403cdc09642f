package health

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// ErrAttemptExpired is the failure recorded when an attempt announced with
// AttemptStarted got no Connected or Failed within Config.AttemptExpiry.
var ErrAttemptExpired = errors.New("connection attempt reported no outcome")

// Option adjusts a Tracker built by New.
type Option func(*Tracker)

// WithRand replaces the source of jitter. rnd must return values in [0, 1)
// and be safe for concurrent use; tests pass a constant to make backoff
// deterministic. The default is math/rand/v2's Float64.
func WithRand(rnd func() float64) Option {
	return func(t *Tracker) { t.rand = rnd }
}

// Tracker keeps the health of every tracked relay, keyed by relay URL. It is
// safe for concurrent use. Events about relays that are not tracked (never
// passed to Track, or already passed to Forget) are ignored, so a late
// report from a closing connection cannot resurrect a forgotten relay or
// its metric series.
type Tracker struct {
	cfg     Config
	clock   clock.Clock
	log     *zap.Logger
	rand    func() float64
	metrics *metrics

	mu     sync.Mutex
	relays map[string]*relayHealth
	// restored is the previous run's health not yet applied (Restore).
	restored map[string]Persisted
}

// relayHealth is one relay's record. All fields are guarded by Tracker.mu.
type relayHealth struct {
	url string
	log *zap.Logger

	failures      int       // consecutive failures; cleared once stable or achieved
	achieved      bool      // the connection answered (Achieved)
	delivered     bool      // the connection delivered events to a sync in progress (Delivered)
	drops         int       // connections in a row that answered and dropped
	failingSince  time.Time // start of continuous failure (Dead clock); zero when none
	nextAttempt   time.Time // backoff, dead retry or naughty: no attempt before
	naughtyUntil  time.Time
	cooldownUntil time.Time
	refusedUntil  time.Time // Refused: no REQ or NEG-OPEN before
	refusal       string    // the reason that started refusedUntil
	lastErr       string

	connected     bool
	connectedAt   time.Time
	lastConnected time.Time
	connecting    bool
	attemptAt     time.Time

	announced       relay.Limits
	learned         relay.Limits // bounds taught by refusals (0: nothing learned)
	learnedSubs     int          // 0: nothing learned
	learnedAt       time.Time    // when a learned bound last went down
	lastBudgetLower time.Time

	reported State // last state logged, for transition logs
}

// RelayHealth is a point-in-time view of one relay for /status.
type RelayHealth struct {
	URL   string
	State State
	// Failures is the consecutive failure count driving backoff.
	Failures int
	// Connected is true between Connected and Failed/Disconnected.
	Connected bool
	// Connecting is true while an attempt is in flight.
	Connecting bool
	// NextAttempt is the earliest time a connection attempt is allowed;
	// zero when one is allowed now (or the relay is connected).
	NextAttempt time.Time
	// CooldownUntil is the end of a rate-limit cooldown; zero if none.
	CooldownUntil time.Time
	// NaughtyUntil is the end of the naughty-list period; zero if none.
	NaughtyUntil time.Time
	// RefusedUntil is the end of the wait after a permanent refusal
	// (Refused); zero if none. Refusal is that refusal's reason.
	RefusedUntil time.Time
	Refusal      string
	// LastConnected is when the last connection was established.
	LastConnected time.Time
	// LastError is the text of the last failure.
	LastError string
	// SubscriptionBudget is the number of concurrent subscriptions allowed.
	SubscriptionBudget int
	// Limits are the effective limits (see Tracker.Limits).
	Limits relay.Limits
}

// New returns a Tracker. It validates cfg, registers the health metrics on
// reg (nil: metrics are kept but not registered) and logs through
// log.Named("health") (nil: no logging).
func New(cfg Config, clk clock.Clock, reg prometheus.Registerer, log *zap.Logger, opts ...Option) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	t := &Tracker{
		cfg:     cfg,
		clock:   clk,
		log:     log.Named("health"),
		rand:    backoff.Rand,
		metrics: m,
		relays:  make(map[string]*relayHealth),
	}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// Config returns the configuration the Tracker runs with.
func (t *Tracker) Config() Config { return t.cfg }

// Track starts tracking url as Disconnected with no failures. Tracking an
// already tracked relay changes nothing.
func (t *Tracker) Track(url string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.relays[url]; ok {
		return
	}
	r := &relayHealth{url: url, log: t.log.With(zap.String("relay", url)), reported: Disconnected}
	t.applyRestoredLocked(r)
	t.relays[url] = r
	t.metrics.set(url, Disconnected, 0)
}

// Forget stops tracking url and removes its metric series.
func (t *Tracker) Forget(url string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.relays[url]; !ok {
		return
	}
	delete(t.relays, url)
	t.metrics.forget(url)
}

// Tracked reports whether url is tracked.
func (t *Tracker) Tracked(url string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.relays[url]
	return ok
}

// CanAttempt reports whether a connection attempt to url is allowed now.
// When it is not, wait is how long until it may be (backoff, Dead retry
// interval, naughty period or rate-limit cooldown, whichever ends last),
// or 0 when no wait applies because the relay is connected. While an
// attempt is in flight, wait runs to that attempt's expiry. An untracked
// relay may always be attempted.
func (t *Tracker) CanAttempt(url string) (ok bool, wait time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, found := t.relays[url]
	if !found {
		return true, 0
	}
	now := t.clock.Now()
	t.settle(r, now)
	return t.canAttempt(r, now)
}

func (t *Tracker) canAttempt(r *relayHealth, now time.Time) (bool, time.Duration) {
	if r.connected {
		return false, 0
	}
	if r.connecting {
		return false, r.attemptAt.Add(t.attemptExpiry()).Sub(now)
	}
	if at := r.earliestAttempt(); now.Before(at) {
		return false, at.Sub(now)
	}
	return true, 0
}

func (r *relayHealth) earliestAttempt() time.Time {
	at := r.nextAttempt
	if r.naughtyUntil.After(at) {
		at = r.naughtyUntil
	}
	if r.cooldownUntil.After(at) {
		at = r.cooldownUntil
	}
	return at
}

// Due returns, sorted, the tracked relays that are neither connected nor
// connecting and whose wait has elapsed: the ones the engine's retry tick
// should connect now.
func (t *Tracker) Due() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	var due []string
	for url, r := range t.relays {
		t.settle(r, now)
		if ok, _ := t.canAttempt(r, now); ok {
			due = append(due, url)
		}
	}
	slices.Sort(due)
	return due
}

// ConnectTimeout returns how long one connection attempt to url may take:
// Config.BackoffBase for every relay, so that an attempt always ends before
// the shortest backoff would allow the next one.
func (t *Tracker) ConnectTimeout(url string) time.Duration {
	return t.cfg.BackoffBase
}

// AttemptStarted records that a connection attempt to url began. Until
// Connected or Failed (or Config.AttemptExpiry), CanAttempt refuses further
// attempts, so one attempt per Dead retry interval is exactly one.
func (t *Tracker) AttemptStarted(url string) {
	t.transition(url, func(r *relayHealth, now time.Time) {
		r.connecting = true
		r.attemptAt = now
	})
}

// transition applies a change to url's record under the lock, between
// settling the record at now and noting the change; an untracked url is
// left alone.
func (t *Tracker) transition(url string, change func(r *relayHealth, now time.Time)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return
	}
	now := t.clock.Now()
	t.settle(r, now)
	change(r, now)
	t.note(r, now)
}

// Connected records that a connection to url is established. After
// failures the relay is Degraded for Config.StabilityPeriod, then Healthy;
// without failures it is Healthy at once. The naughty period and the Dead
// clock end here.
func (t *Tracker) Connected(url string) {
	t.transition(url, func(r *relayHealth, now time.Time) {
		r.connected = true
		r.connecting = false
		r.achieved, r.delivered = false, false
		r.connectedAt = now
		r.lastConnected = now
		r.failingSince = time.Time{}
		r.naughtyUntil = time.Time{}
		r.nextAttempt = time.Time{}
		if r.failures > 0 {
			r.log.Info("relay recovered, stability period started",
				zap.Int("failures", r.failures), zap.Duration("stability_period", t.cfg.StabilityPeriod))
		}
	})
}

// Achieved records that url's connection answered a request (delivered
// an event, an EOSE, a NEG-MSG or an OK; OnFirstAnswer calls it once per
// connection): the relay works. Its failure count is cleared at once
// (no stability period to wait), and when this connection drops the
// relay is reconnected after ReconnectWait, not after a backoff. Without
// a connection it changes nothing.
func (t *Tracker) Achieved(url string) {
	t.transition(url, func(r *relayHealth, now time.Time) {
		if !r.connected || r.achieved {
			return
		}
		r.achieved = true
		r.failures = 0
		r.failingSince = time.Time{}
	})
}

// Delivered records that url's connection delivered events to a historic
// sync still in progress and that the relay closed it in order (the
// engine calls it before Failed): when it drops transiently, the relay is
// reconnected after ResumeWait instead of ReconnectWait, so the sync
// resumes where the drop cut it. Without an answered (Achieved)
// connection it changes nothing: a connection that delivered nothing
// never reconnects sooner.
func (t *Tracker) Delivered(url string) {
	t.transition(url, func(r *relayHealth, now time.Time) {
		r.delivered = r.connected && r.achieved
	})
}

// Failed records that a connection attempt to url failed or an established
// connection dropped with err. The error decides the consequence (see
// ClassifyError): a transient failure backs off BackoffBase·2^(n−1) capped
// at BackoffMax with jitter, or DeadRetry once the relay is Dead; a
// hard failure also puts the relay on the naughty list for NaughtyPeriod; a
// rate-limited handshake starts a cooldown without counting a failure. A
// connection that had answered (Achieved) and dropped transiently is no
// failure: the relay is reconnected after ReconnectWait.
func (t *Tracker) Failed(url string, err error) {
	t.transition(url, func(r *relayHealth, now time.Time) {
		t.fail(r, now, err)
	})
}

// fail applies one failure to r at now.
func (t *Tracker) fail(r *relayHealth, now time.Time, err error) {
	if err == nil {
		err = errors.New("unspecified failure")
	}
	wasConnected, achieved, delivered := r.connected, r.achieved, r.delivered
	r.connected = false
	r.connecting = false
	r.achieved, r.delivered = false, false
	r.lastErr = err.Error()

	kind := ClassifyError(err)
	if kind == FailureRateLimited {
		t.startCooldown(r, now, "handshake refused: "+err.Error())
		// A Dead relay keeps its one attempt per interval even when that
		// attempt is refused as too fast.
		if r.failures > 0 && now.Sub(r.failingSince) >= t.cfg.DeadAfter {
			r.nextAttempt = now.Add(t.cfg.DeadRetry)
		}
		return
	}
	if wasConnected && achieved && kind == FailureTransient {
		wait := t.cfg.ReconnectWait
		if delivered {
			wait = t.cfg.ResumeWait
		}
		r.dropped(now, t.cfg.jittered(wait, t.rand), err)
		return
	}

	r.drops = 0
	r.failures++
	if r.failingSince.IsZero() {
		r.failingSince = now
	}
	wait := t.cfg.jittered(t.cfg.policy().Nominal(r.failures), t.rand)
	dead := now.Sub(r.failingSince) >= t.cfg.DeadAfter
	if dead {
		wait = t.cfg.DeadRetry
	}
	r.nextAttempt = now.Add(wait)
	if kind == FailureHard {
		r.naughtyUntil = now.Add(t.cfg.NaughtyPeriod)
		if r.naughtyUntil.After(r.nextAttempt) {
			r.nextAttempt = r.naughtyUntil
		}
	}

	fields := []zap.Field{
		zap.Error(err),
		zap.Int("failures", r.failures),
		zap.Stringer("kind", kind),
		zap.Duration("retry_in", r.nextAttempt.Sub(now)),
	}
	// This is the one log line of a relay failure (reposync logs none).
	switch {
	case kind == FailureHard:
		r.log.Warn("relay failed hard, skipping it for the naughty period", fields...)
	case wasConnected:
		r.log.Info("relay disconnected", fields...)
	case dead:
		r.log.Warn("dead relay attempt failed", fields...)
	case bits.OnesCount(uint(r.failures)) == 1:
		// Failures 1, 2, 4, 8, …: a relay down for a day logs ~11 lines.
		r.log.Warn("relay connection failed", fields...)
	default:
		r.log.Debug("relay connection failed", fields...)
	}
}

// dropped applies the drop of a connection that answered (Achieved) at
// now: no failure, a reconnect after wait (ReconnectWait, jittered). The
// first drop of a run is logged at INFO, then drops 2, 4, 8, …; the rest
// at DEBUG.
func (r *relayHealth) dropped(now time.Time, wait time.Duration, err error) {
	r.failures = 0
	r.failingSince = time.Time{}
	r.drops++
	r.nextAttempt = now.Add(wait)
	level := zap.DebugLevel
	if bits.OnesCount(uint(r.drops)) == 1 {
		level = zap.InfoLevel
	}
	r.log.Log(level, "relay dropped a connection that had answered; reconnecting", zap.Error(err),
		zap.Int("drops_in_a_row", r.drops), zap.Duration("retry_in", r.nextAttempt.Sub(now)))
}

// Disconnected records that the connection to url closed without a failure
// (a clean close, or the engine dropped it). No backoff is added; a
// recovered relay that had not yet proven stable keeps its failure count.
func (t *Tracker) Disconnected(url string) {
	t.transition(url, func(r *relayHealth, now time.Time) {
		r.connected = false
		r.connecting = false
		r.achieved, r.delivered = false, false
	})
}

// State returns url's current state; Disconnected for an untracked relay.
func (t *Tracker) State(url string) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return Disconnected
	}
	now := t.clock.Now()
	t.settle(r, now)
	t.note(r, now)
	return t.state(r, now)
}

// Snapshot returns every tracked relay's health, sorted by URL.
func (t *Tracker) Snapshot() []RelayHealth {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	out := make([]RelayHealth, 0, len(t.relays))
	for _, r := range t.relays {
		t.settle(r, now)
		t.note(r, now)
		h := RelayHealth{
			URL:                r.url,
			State:              t.state(r, now),
			Failures:           r.failures,
			Connected:          r.connected,
			Connecting:         r.connecting,
			LastConnected:      r.lastConnected,
			LastError:          r.lastErr,
			SubscriptionBudget: t.budget(r),
			Limits:             t.limits(r),
		}
		if !r.connected {
			if at := r.earliestAttempt(); now.Before(at) {
				h.NextAttempt = at
			}
		}
		if now.Before(r.cooldownUntil) {
			h.CooldownUntil = r.cooldownUntil
		}
		if now.Before(r.naughtyUntil) {
			h.NaughtyUntil = r.naughtyUntil
		}
		if now.Before(r.refusedUntil) {
			h.RefusedUntil, h.Refusal = r.refusedUntil, r.refusal
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b RelayHealth) int {
		switch {
		case a.URL < b.URL:
			return -1
		case a.URL > b.URL:
			return 1
		}
		return 0
	})
	return out
}

// Tick applies time-based transitions (stability period over, cooldown
// over, Dead after DeadAfter, attempts expired), logs state changes and
// updates the metrics. Run calls it every Config.Tick.
func (t *Tracker) Tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	var dead, limited int
	for url, r := range t.relays {
		t.settle(r, now)
		t.note(r, now)
		s := t.state(r, now)
		switch s {
		case Dead:
			dead++
		case RateLimited:
			limited++
		}
		t.metrics.set(url, s, r.failures)
	}
	t.metrics.deadTotal.Set(float64(dead))
	t.metrics.rateLimitedTotal.Set(float64(limited))
}

// Run calls Tick every Config.Tick until ctx is done, then returns nil.
func (t *Tracker) Run(ctx context.Context) error {
	ticker := t.clock.NewTicker(t.cfg.Tick)
	defer ticker.Stop()
	t.Tick()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			t.Tick()
		}
	}
}

// settle applies the transitions that follow from time alone: an attempt
// without outcome expires as a failure, and a recovered connection that
// lasted StabilityPeriod clears the failure count.
func (t *Tracker) settle(r *relayHealth, now time.Time) {
	if exp := t.attemptExpiry(); r.connecting && !now.Before(r.attemptAt.Add(exp)) {
		t.fail(r, now, fmt.Errorf("%w after %s", ErrAttemptExpired, exp))
	}
	if r.connected && !now.Before(r.connectedAt.Add(t.cfg.StabilityPeriod)) {
		r.failures = 0
		r.failingSince = time.Time{}
		r.drops = 0
	}
}

// attemptExpiry is Config.AttemptExpiry, never shorter than the connection
// timeout.
func (t *Tracker) attemptExpiry() time.Duration {
	return max(t.cfg.AttemptExpiry, t.cfg.BackoffBase)
}

// state derives r's state at now. settle must have run first.
func (t *Tracker) state(r *relayHealth, now time.Time) State {
	switch {
	case now.Before(r.cooldownUntil):
		return RateLimited
	case r.connected && r.failures > 0:
		return Degraded // recovered, stability period running
	case r.connected:
		return Healthy
	case r.failures == 0:
		return Disconnected
	case !r.failingSince.IsZero() && now.Sub(r.failingSince) >= t.cfg.DeadAfter:
		return Dead
	default:
		return Degraded
	}
}

// note logs a change of r's state since the last note.
func (t *Tracker) note(r *relayHealth, now time.Time) {
	s := t.state(r, now)
	if s == r.reported {
		return
	}
	from := r.reported
	r.reported = s
	fields := []zap.Field{zap.Stringer("from", from), zap.Stringer("to", s), zap.Int("failures", r.failures)}
	if r.drops > 1 && (from == Healthy || from == Disconnected) && (s == Healthy || s == Disconnected) {
		// A relay that keeps dropping connections that answered: dropped
		// logs the drops (paced), not every coming and going.
		r.log.Debug("relay health changed", fields...)
		return
	}
	if s == Dead {
		r.log.Warn("relay is dead, retrying once per interval",
			append(fields, zap.Duration("retry_interval", t.cfg.DeadRetry))...)
		return
	}
	r.log.Info("relay health changed", fields...)
}
