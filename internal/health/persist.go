package health

import (
	"sort"
	"time"
)

// Persisted is one relay's health as a state store keeps it across
// restarts. Times are wall-clock, so time spent down counts: a relay
// failing since before the restart is dead once DeadAfter has passed since
// then, a naughty relay stays out until NaughtyUntil, a rate-limited one
// until CooldownUntil.
type Persisted struct {
	URL           string    `json:"url"`
	Failures      int       `json:"failures,omitempty"`
	FailingSince  time.Time `json:"failing_since,omitzero"`
	NextAttempt   time.Time `json:"next_attempt,omitzero"`
	NaughtyUntil  time.Time `json:"naughty_until,omitzero"`
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
}

// Export returns the health of every tracked relay with anything to
// remember (failures, a penalty or a cooldown), sorted by URL.
func (t *Tracker) Export() []Persisted {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Persisted
	for url, r := range t.relays {
		p := Persisted{URL: url, Failures: r.failures, FailingSince: r.failingSince, NextAttempt: r.nextAttempt,
			NaughtyUntil: r.naughtyUntil, CooldownUntil: r.cooldownUntil, LastError: r.lastErr}
		if p.Failures == 0 && p.FailingSince.IsZero() && p.NaughtyUntil.IsZero() && p.CooldownUntil.IsZero() {
			continue
		}
		out = append(out, p)
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
}
