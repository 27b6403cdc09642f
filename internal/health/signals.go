package health

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// What a relay says about our requests: rate limits (a cooldown) and
// refusals that will not change by themselves (a long wait).

// Observe classifies a NOTICE text or a CLOSED, OK or NEG-ERR reason from
// url (see ClassifyMessage), applies its effect and returns it so the caller
// can react, e.g. re-queue a refused REQ:
//   - SignalRateLimited starts (or extends) a RateLimitCooldown;
//   - SignalTooManySubscriptions halves the relay's subscription budget,
//     never below MinSubscriptionBudget and at most once per BudgetHoldoff;
//   - SignalTooManyFilters and SignalNone change nothing.
//
// For an untracked relay the signal is returned without effect.
func (t *Tracker) Observe(url string, source MessageSource, text string) Signal {
	sig := ClassifyMessage(text)
	if sig == SignalNone {
		return sig
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return sig
	}
	now := t.clock.Now()
	t.settle(r, now)
	switch sig {
	case SignalRateLimited:
		t.startCooldown(r, now, source.String()+": "+text)
	case SignalTooManySubscriptions:
		if !r.lastBudgetLower.IsZero() && now.Sub(r.lastBudgetLower) < t.cfg.BudgetHoldoff {
			break
		}
		before := t.budget(r)
		r.learnedSubs = max(t.cfg.MinSubscriptionBudget, before/2)
		r.lastBudgetLower, r.learnedAt = now, now
		r.log.Info("relay refused a subscription, lowering its budget",
			zap.Stringer("source", source), zap.String("message", text),
			zap.Int("budget_before", before), zap.Int("budget", t.budget(r)))
	case SignalTooManyFilters:
		r.log.Debug("relay refused a REQ for its filter count",
			zap.Stringer("source", source), zap.String("message", text))
	}
	t.note(r, now)
	return sig
}

func (t *Tracker) startCooldown(r *relayHealth, now time.Time, why string) {
	if !now.Before(r.cooldownUntil) {
		r.log.Warn("relay is rate limiting us, cooling down",
			zap.String("reason", why), zap.Duration("cooldown", t.cfg.RateLimitCooldown))
	}
	r.cooldownUntil = now.Add(t.cfg.RateLimitCooldown)
}

// CooldownRemaining returns how long url's rate-limit cooldown still runs,
// 0 if none. While it runs the engine must send no REQ or NEG-OPEN to url.
func (t *Tracker) CooldownRemaining(url string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return 0
	}
	if d := r.cooldownUntil.Sub(t.clock.Now()); d > 0 {
		return d
	}
	return 0
}

// Refused hears a relay's CLOSED or NEG-ERR reason; one that will not
// change by itself (PermanentRefusal; haveKey: a key to authenticate
// with is configured) parks url: no REQ or NEG-OPEN goes to it for
// Config.RefusalWait (RefusalRemaining). The first refusal of a wait is
// logged once at WARN; the refusals of the requests already on their way
// extend nothing and log nothing. It reports whether this refusal started
// the wait.
func (t *Tracker) Refused(url string, source MessageSource, reason string, haveKey bool) bool {
	if (source != SourceClosed && source != SourceNegErr) || !PermanentRefusal(reason, haveKey) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return false
	}
	now := t.clock.Now()
	if now.Before(r.refusedUntil) {
		return false
	}
	r.refusedUntil, r.refusal = now.Add(t.cfg.RefusalWait), source.String()+": "+reason
	r.log.Warn("relay refuses our requests; asking again after refusal_wait or a restart",
		zap.String("reason", r.refusal), zap.Duration("refusal_wait", t.cfg.RefusalWait))
	return true
}

// Refusal describes url's permanent refusal and the end of its wait
// (Refused) while the wait runs, for /status; "" otherwise.
func (t *Tracker) Refusal(url string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok || !t.clock.Now().Before(r.refusedUntil) {
		return ""
	}
	return r.refusal + "; asking again at " + r.refusedUntil.UTC().Format(time.RFC3339)
}

// ErrRefused is wrapped by RefusalErr's error.
var ErrRefused = errors.New("the relay refused reads for good")

// RefusalErr returns an error wrapping ErrRefused that describes the
// refusal (Refusal) while url's wait after a permanent refusal runs; nil
// otherwise.
func (t *Tracker) RefusalErr(url string) error {
	if why := t.Refusal(url); why != "" {
		return fmt.Errorf("%w (%s)", ErrRefused, why)
	}
	return nil
}

// RefusalRemaining returns how long the wait after url's permanent refusal
// (Refused) still runs, 0 if none. While it runs the engine must send no
// REQ or NEG-OPEN to url.
func (t *Tracker) RefusalRemaining(url string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return 0
	}
	if d := r.refusedUntil.Sub(t.clock.Now()); d > 0 {
		return d
	}
	return 0
}
