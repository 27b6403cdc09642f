package health

import (
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// SetLimits records the limits url announced in its NIP-11 document.
// Negative values count as not announced. A budget learned from notices
// stays in force if it is lower.
func (t *Tracker) SetLimits(url string, l relay.Limits) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return
	}
	r.announced = relay.Limits{
		MaxSubscriptions: max(l.MaxSubscriptions, 0),
		MaxFilters:       max(l.MaxFilters, 0),
		MaxLimit:         max(l.MaxLimit, 0),
		MaxMessageLength: max(l.MaxMessageLength, 0),
	}
}

// Limits returns the limits the engine must respect on url: the announced
// NIP-11 limits (0 = unknown) with MaxSubscriptions replaced by
// SubscriptionBudget. An untracked relay gets the default budget only.
func (t *Tracker) Limits(url string) relay.Limits {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return relay.Limits{MaxSubscriptions: t.cfg.DefaultSubscriptionBudget}
	}
	return t.limits(r)
}

func (t *Tracker) limits(r *relayHealth) relay.Limits {
	l := r.announced
	l.MaxSubscriptions = t.budget(r)
	l.MaxFilters = lower(l.MaxFilters, r.learned.MaxFilters)
	l.MaxMessageLength = lower(l.MaxMessageLength, r.learned.MaxMessageLength)
	l.MaxTagValues = r.learned.MaxTagValues
	return l
}

// lower is the smaller of an announced and a learned bound, 0 meaning
// unknown on either side.
func lower(announced, learned int) int {
	if learned > 0 && (announced <= 0 || learned < announced) {
		return learned
	}
	return announced
}

// Smallest bounds Learn accepts: below them a relay refusing everything is
// broken, not small.
const (
	minLearnedFilters = 1
	minLearnedMessage = 8192
)

// Learn records limits url enforces without announcing them (or below what
// it announces), taught by a refusal: a REQ CLOSED for too many filters, a
// connection closed for a message too big, a filter refused for its tag
// values. Only positive MaxFilters, MaxMessageLength and MaxTagValues count; a bound only ever goes down, never below 1 filter
// or 8,192 bytes. Limits returns the smaller of the announced and learned
// bounds from then on, for as long as the relay is tracked: NIP-11 fetched
// again does not erase what the relay did. It reports whether a bound went
// down.
func (t *Tracker) Learn(url string, l relay.Limits, why string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return false
	}
	before := t.limits(r)
	if l.MaxFilters > 0 {
		r.learned.MaxFilters = lower(r.learned.MaxFilters, max(l.MaxFilters, minLearnedFilters))
	}
	if l.MaxTagValues > 0 {
		r.learned.MaxTagValues = lower(r.learned.MaxTagValues, l.MaxTagValues)
	}
	if l.MaxMessageLength > 0 {
		r.learned.MaxMessageLength = lower(r.learned.MaxMessageLength, max(l.MaxMessageLength, minLearnedMessage))
	}
	after := t.limits(r)
	if after == before {
		return false
	}
	r.learnedAt = t.clock.Now()
	r.log.Warn("relay refused a request over a limit it does not announce (or announces higher), building smaller requests",
		zap.String("why", why),
		zap.Int("max_filters_before", before.MaxFilters), zap.Int("max_filters", after.MaxFilters),
		zap.Int("max_message_length_before", before.MaxMessageLength), zap.Int("max_message_length", after.MaxMessageLength),
		zap.Int("max_tag_values_before", before.MaxTagValues), zap.Int("max_tag_values", after.MaxTagValues))
	return true
}

// SubscriptionBudget returns how many concurrent subscriptions the engine
// may hold on url: the announced max_subscriptions, or
// DefaultSubscriptionBudget when none was announced, lowered to what
// "too many subscriptions" notices taught.
func (t *Tracker) SubscriptionBudget(url string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.relays[url]
	if !ok {
		return t.cfg.DefaultSubscriptionBudget
	}
	return t.budget(r)
}

func (t *Tracker) budget(r *relayHealth) int {
	b := t.cfg.DefaultSubscriptionBudget
	if r.announced.MaxSubscriptions > 0 {
		b = r.announced.MaxSubscriptions
	}
	if r.learnedSubs > 0 && r.learnedSubs < b {
		b = r.learnedSubs
	}
	return b
}
