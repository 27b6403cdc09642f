package health

import "github.com/grasp-sync/grasp-sync/internal/relay"

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
	return l
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
