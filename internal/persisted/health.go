package persisted

import "time"

// Health is one remote relay's health as a state store keeps it across
// restarts. Times are wall-clock, so time spent down counts: a relay
// failing since before the restart is dead once DeadAfter has passed since
// then, a naughty relay stays out until NaughtyUntil, a rate-limited one
// until CooldownUntil.
type Health struct {
	URL           string    `json:"url"`
	Failures      int       `json:"failures,omitempty"`
	FailingSince  time.Time `json:"failing_since,omitzero"`
	NextAttempt   time.Time `json:"next_attempt,omitzero"`
	NaughtyUntil  time.Time `json:"naughty_until,omitzero"`
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	// Learned are the bounds the relay taught by refusals (MaxFilters,
	// MaxTagValues, MaxMessageLength; MaxSubscriptions is the budget
	// "too many subscriptions" notices lowered), as of LearnedAt, the last
	// time one went down. They are restored for the health tracker's
	// LearnedTTL from then.
	Learned   Limits    `json:"learned,omitzero"`
	LearnedAt time.Time `json:"learned_at,omitzero"`
}

// Limits are a relay's limits as Health keeps them: the fields of the
// relay client's Limits (NIP-11's `limitation` object and the learned
// MaxTagValues), in the same order and with the same JSON, so the two
// convert into each other. Zero means "not known".
type Limits struct {
	MaxSubscriptions    int `json:"max_subscriptions,omitempty"`
	MaxFilters          int `json:"max_filters,omitempty"`
	MaxLimit            int `json:"max_limit,omitempty"`
	MaxMessageLength    int `json:"max_message_length,omitempty"`
	MaxEventTags        int `json:"max_event_tags,omitempty"`
	MaxContentLength    int `json:"max_content_length,omitempty"`
	CreatedAtLowerLimit int `json:"created_at_lower_limit,omitempty"`
	MaxTagValues        int `json:"max_tag_values,omitempty"`
}
