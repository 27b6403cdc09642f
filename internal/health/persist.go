package health

import (
	"sort"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/persisted"
)

// Persisted is one relay's health as a state store keeps it across
// restarts (persisted.Health).
type Persisted = persisted.Health

// Export returns the health of every tracked relay with anything to
// remember (failures, a penalty, a cooldown or learned limits), sorted by
// URL, and the restored limits of relays not tracked again yet while they
// are inside LearnedTTL: a flush before discovery tracks a relay again (or
// a run that never does) does not lose them.
func (t *Tracker) Export() []Persisted {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Persisted
	for url, r := range t.relays {
		p := Persisted{URL: url, Failures: r.failures, FailingSince: r.failingSince, NextAttempt: r.nextAttempt,
			NaughtyUntil: r.naughtyUntil, CooldownUntil: r.cooldownUntil, LastError: r.lastErr}
		if !r.learnedAt.IsZero() {
			// persisted.Limits has relay.Limits' fields: they convert.
			p.Learned, p.LearnedAt = persisted.Limits(r.learned), r.learnedAt
			p.Learned.MaxSubscriptions = r.learnedSubs
		}
		if p.Failures == 0 && p.FailingSince.IsZero() && p.NaughtyUntil.IsZero() && p.CooldownUntil.IsZero() && p.LearnedAt.IsZero() {
			continue
		}
		out = append(out, p)
	}
	now := t.clock.Now()
	for url, p := range t.restored {
		if p.LearnedAt.IsZero() || now.Sub(p.LearnedAt) >= t.cfg.LearnedTTL {
			continue
		}
		out = append(out, Persisted{URL: url, Learned: p.Learned, LearnedAt: p.LearnedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out
}

// Restore hands the tracker the previous run's health; each relay's is
// applied when it is tracked again. Call it before the relays are tracked.
func (t *Tracker) Restore(ps []Persisted) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.restored = make(map[string]Persisted, len(ps))
	for _, p := range ps {
		t.restored[p.URL] = p
	}
}

// applyRestoredLocked gives a newly tracked relay its persisted health.
func (t *Tracker) applyRestoredLocked(r *relayHealth) {
	p, ok := t.restored[r.url]
	if !ok {
		return
	}
	delete(t.restored, r.url)
	r.failures, r.failingSince, r.nextAttempt = p.Failures, p.FailingSince, p.NextAttempt
	r.naughtyUntil, r.cooldownUntil, r.lastErr = p.NaughtyUntil, p.CooldownUntil, p.LastError
	if p.LearnedAt.IsZero() || t.clock.Now().Sub(p.LearnedAt) >= t.cfg.LearnedTTL {
		return
	}
	l := p.Learned
	// As Learn and Observe would have set them: a bound is positive and
	// never below their floors.
	if l.MaxFilters > 0 {
		r.learned.MaxFilters = max(l.MaxFilters, minLearnedFilters)
	}
	if l.MaxTagValues > 0 {
		r.learned.MaxTagValues = l.MaxTagValues
	}
	if l.MaxMessageLength > 0 {
		r.learned.MaxMessageLength = max(l.MaxMessageLength, minLearnedMessage)
	}
	if l.MaxSubscriptions > 0 {
		r.learnedSubs = max(l.MaxSubscriptions, t.cfg.MinSubscriptionBudget)
	}
	r.learnedAt = p.LearnedAt
	r.log.Info("keeping the limits this relay taught before the restart",
		zap.Time("learned_at", p.LearnedAt),
		zap.Int("max_filters", r.learned.MaxFilters), zap.Int("max_tag_values", r.learned.MaxTagValues),
		zap.Int("max_message_length", r.learned.MaxMessageLength), zap.Int("subscription_budget", r.learnedSubs))
}
