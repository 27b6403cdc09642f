package health

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/clock"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// MetricRequestsWaiting is the gauge of requests queued by a Pacer.
const MetricRequestsWaiting = "ngit_sync_relay_requests_waiting"

// Pacer spaces what the sync engine asks of each remote relay, whatever
// the code path asking: every request (REQ, fetches by id included,
// NEG-OPEN, AUTH) and every dial takes a token from the relay's bucket
// (Config.RequestRate sustained, Config.RequestBurst at once), and after a
// refusal (a CLOSED or NEG-ERR of any reason, a NOTICE that is an error
// about a request, but not the refusals AsksSmaller answers with a
// smaller request) the relay's requests back off exponentially with
// jitter (Config.RefusalBackoffBase doubling up to RefusalBackoffMax):
// one request per backoff goes out, and the wait grows while they are
// refused, until a request is answered (an EOSE or a NEG-MSG) again.
//
// A request that must wait queues (Wait blocks); it is never dropped. The
// requests waiting per relay are the gauge ngit_sync_relay_requests_waiting,
// and the log says when a relay starts refusing and when it answers again,
// never per request. A nil *Pacer lets everything through.
//
// Time comes from the injected clock.Clock.
type Pacer struct {
	cfg     Config
	clock   clock.Clock
	log     *zap.Logger
	rand    func() float64
	waiting *prometheus.GaugeVec

	mu     sync.Mutex
	relays map[string]*pace
}

// pace is one relay's bucket and refusal backoff.
type pace struct {
	tokens float64   // at time at
	at     time.Time // when tokens was last brought up to date
	// strikes counts refusals in a row (0: none outstanding); until is
	// the earliest time the next request may go while strikes > 0.
	strikes int
	until   time.Time
	// sent: a request went out since the last counted strike. A refusal
	// counts only then: the refusals of requests sent together before the
	// backoff started count once.
	sent   bool
	reason string // the refusal that started the streak
	// ended is when the last streak ended; told says the current one was
	// logged. A streak starting within RefusalBackoffMax of the last one
	// (a relay refusing one request among answered ones) is not logged
	// again: the log says a state change, not every refusal.
	ended   time.Time
	told    bool
	changed chan struct{} // closed (and replaced) when the backoff ends early
	queued  int
}

// NewPacer returns a Pacer with cfg's request budget and refusal backoff
// (Validate is applied), registering its gauge with reg (nil: none).
func NewPacer(cfg Config, clk clock.Clock, reg prometheus.Registerer, log *zap.Logger) (*Pacer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = zap.NewNop()
	}
	p := &Pacer{
		cfg: cfg, clock: clk, log: log.Named("health"), rand: backoff.Rand,
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricRequestsWaiting,
			Help: "Requests (REQ, NEG-OPEN, AUTH) to a remote relay queued for its request budget (health.request_rate, health.request_burst) or for the backoff after a refusal.",
		}, []string{"relay"}),
		relays: map[string]*pace{},
	}
	if reg != nil {
		if err := reg.Register(p.waiting); err != nil {
			return nil, fmt.Errorf("register pacer metrics: %w", err)
		}
	}
	return p, nil
}

// Track creates url's gauge at 0.
func (p *Pacer) Track(url string) {
	if p == nil {
		return
	}
	p.waiting.WithLabelValues(url)
}

// Forget drops url's bucket and gauge. Requests waiting on it still go
// out in turn.
func (p *Pacer) Forget(url string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.relays, url)
	p.mu.Unlock()
	p.waiting.DeleteLabelValues(url)
}

// get returns url's pace with its tokens brought up to now; p.mu is held.
func (p *Pacer) get(url string, now time.Time) *pace {
	b := p.relays[url]
	if b == nil {
		b = &pace{tokens: float64(p.cfg.RequestBurst), at: now, changed: make(chan struct{})}
		p.relays[url] = b
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(p.cfg.RequestBurst), b.tokens+d.Seconds()*p.cfg.RequestRate)
		b.at = now
	}
	return b
}

// take tries to send one request to url now: it returns 0 and takes the
// token (and, in a refusal backoff, the backoff's one request) or returns
// how long to wait before trying again. p.mu is held.
func (p *Pacer) take(b *pace, now time.Time) time.Duration {
	if b.strikes > 0 && now.Before(b.until) {
		return b.until.Sub(now)
	}
	if b.tokens < 1 {
		return max(time.Duration((1-b.tokens)/p.cfg.RequestRate*float64(time.Second)), time.Millisecond)
	}
	b.tokens--
	if b.strikes > 0 {
		// One request per backoff while the relay refuses: the next one
		// waits as long again, whether or not this one is refused.
		b.sent = true
		b.until = now.Add(p.policy().Delay(b.strikes, p.rand()))
	}
	return 0
}

// Wait blocks until a request may go to url and takes its token; it
// returns ctx's error if ctx ends first (the request is not sent, and no
// token is spent).
func (p *Pacer) Wait(ctx context.Context, url string) error {
	if p == nil {
		return nil
	}
	queued := false
	defer func() {
		if !queued {
			return
		}
		p.mu.Lock()
		b := p.relays[url]
		tracked := b != nil && b.queued > 0 // not forgotten meanwhile
		if tracked {
			b.queued--
		}
		p.mu.Unlock()
		if tracked {
			p.waiting.WithLabelValues(url).Dec()
		}
	}()
	for {
		p.mu.Lock()
		now := p.clock.Now()
		b := p.get(url, now)
		d := p.take(b, now)
		changed := b.changed
		first := d > 0 && !queued
		if first {
			queued = true
			b.queued++
		}
		p.mu.Unlock()
		if d == 0 {
			return nil
		}
		if first {
			p.waiting.WithLabelValues(url).Inc()
		}
		timer := p.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-changed:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// Gate is what a remote relay's connection runs before every REQ,
// NEG-OPEN and AUTH (relay.Options.BeforeRequest): it fails at once while
// url's wait after a permanent refusal runs (Tracker.RefusalErr), waits
// out the rate-limit cooldown (Tracker.CooldownRemaining) and then p's
// turn (Wait), and calls sent when the request may go.
func Gate(ctx context.Context, t *Tracker, p *Pacer, clk clock.Clock, url string, sent func()) error {
	if err := t.RefusalErr(url); err != nil {
		return err
	}
	for {
		if d := t.CooldownRemaining(url); d > 0 {
			timer := clk.NewTimer(d)
			select {
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			case <-timer.C():
			}
			continue
		}
		if err := p.Wait(ctx, url); err != nil {
			return err
		}
		if t.CooldownRemaining(url) <= 0 { // else a rate limit came meanwhile (the token is spent)
			sent()
			return nil
		}
	}
}

// Allow takes a token for url if one is there now, without waiting (a
// dial: the engine tries again at its next tick).
func (p *Pacer) Allow(url string) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.get(url, p.clock.Now())
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Refused records that url refused a request: a CLOSED or NEG-ERR
// (source SourceClosed, SourceNegErr), or a NOTICE that RefusalNotice
// counts. The relay's requests back off; only the first refusal of a
// streak is logged.
func (p *Pacer) Refused(url string, source MessageSource, reason string) {
	switch {
	case p == nil:
		return
	case source == SourceNotice && !RefusalNotice(reason):
		return
	case source != SourceNotice && source != SourceClosed && source != SourceNegErr:
		return // an OK answers an EVENT, not a request
	case AsksSmaller(reason):
		return // the engine asks a smaller request at once, not this one again
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	b := p.get(url, now)
	if b.strikes > 0 && !b.sent {
		return // refused before the backoff began: counted already
	}
	b.strikes++
	b.sent = false
	wait := p.policy().Delay(b.strikes, p.rand())
	b.until = now.Add(wait)
	if b.strikes == 1 {
		b.reason = source.String() + ": " + reason
		b.told = b.ended.IsZero() || now.Sub(b.ended) > p.cfg.RefusalBackoffMax
		if !b.told {
			return
		}
		p.log.Warn("relay refuses requests; backing them off until it answers one", zap.String("relay", url),
			zap.String("reason", b.reason), zap.Duration("retry_in", wait))
	}
}

// Answered records that url answered a request (an EOSE, a NEG-MSG): a
// refusal backoff ends, and the requests waiting on it go.
func (p *Pacer) Answered(url string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.relays[url]
	if b == nil || b.strikes == 0 {
		return
	}
	if b.told {
		p.log.Info("relay answers requests again", zap.String("relay", url),
			zap.String("refused", b.reason), zap.Int("refusals", b.strikes))
	}
	b.strikes, b.sent, b.until, b.reason, b.told = 0, false, time.Time{}, "", false
	b.ended = p.clock.Now()
	close(b.changed)
	b.changed = make(chan struct{})
}

// OnAnswer returns a relay.Options.OnFrame that calls next (when set) with
// every frame and Answered for url at every EOSE and NEG-MSG.
func (p *Pacer) OnAnswer(url string, next func(label string, size int)) func(label string, size int) {
	if p == nil {
		return next
	}
	return func(label string, size int) {
		if next != nil {
			next(label, size)
		}
		if label == "EOSE" || label == "NEG-MSG" {
			p.Answered(url)
		}
	}
}

// Backoff describes url's refusal backoff for /status ("" when none).
func (p *Pacer) Backoff(url string) string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.relays[url]
	if b == nil || b.strikes == 0 {
		return ""
	}
	return fmt.Sprintf("%s; %d refused in a row, next request at %s", b.reason, b.strikes, b.until.UTC().Format(time.RFC3339))
}

// Queued returns how many requests to url are waiting.
func (p *Pacer) Queued(url string) int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.relays[url]; b != nil {
		return b.queued
	}
	return 0
}

// RefusalNotice tells whether a NOTICE is an error about a request: it
// carries a NIP-01 machine-readable prefix ("error:", "invalid:", …) or
// says a limit was hit. Other NOTICEs (greetings, announcements) are not.
func RefusalNotice(text string) bool {
	t := strings.ToLower(strings.TrimSpace(text))
	return relay.ReasonPrefix(t) != "" || ClassifyMessage(t) != SignalNone
}

// AsksSmaller tells whether a refusal teaches the engine to ask
// differently rather than again: a limit learned (too many filters, tag
// values or subscriptions: requests are rebuilt within it) or strfry's
// negentropy "blocked: too many query results" (the window is split).
// The bucket still spaces those requests; the refusal backoff does not
// delay them.
func AsksSmaller(reason string) bool {
	switch ClassifyMessage(reason) {
	case SignalTooManyFilters, SignalTooManyTagValues, SignalTooManySubscriptions:
		return true
	}
	t := strings.ToLower(strings.TrimSpace(reason))
	return relay.ReasonPrefix(t) == relay.ReasonBlocked && strings.Contains(t, "too many")
}

func (p *Pacer) policy() backoff.Policy {
	return backoff.Policy{Base: p.cfg.RefusalBackoffBase, Max: p.cfg.RefusalBackoffMax, Jitter: p.cfg.Jitter}
}
