package health

import (
	"errors"
	"fmt"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid health config")

// Config holds every duration and limit of the Tracker. Zero is never
// "unset": start from DefaultConfig and change what you need.
type Config struct {
	// BackoffBase is the wait after the first consecutive failure; the n-th
	// failure waits BackoffBase·2^(n−1), capped at BackoffMax. It is also
	// the connection timeout (Tracker.ConnectTimeout), so a hanging dial
	// never outlives the first backoff. Default 5s.
	BackoffBase time.Duration `yaml:"backoff_base"`
	// BackoffMax caps the exponential backoff (before jitter, so a wait may
	// reach BackoffMax·(1+JitterFraction)). Default 1h.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// JitterFraction spreads each backoff uniformly over
	// [1−JitterFraction, 1+JitterFraction] times its nominal value so that
	// many sidecars do not reconnect in lockstep. 0 disables jitter; must be
	// in [0, 1). Default 0.2.
	JitterFraction float64 `yaml:"jitter_fraction"`
	// AttemptExpiry is how long an attempt reported by AttemptStarted may go
	// without an outcome (Connected or Failed) before the Tracker counts it
	// as a failure, so a lost report cannot park a relay forever. An attempt
	// never expires before the connection timeout (BackoffBase) has passed.
	// Default 1m.
	AttemptExpiry time.Duration `yaml:"attempt_expiry"`
	// DeadAfter is how long failures must continue, without any established
	// connection, before a relay is Dead. Default 24h.
	DeadAfter time.Duration `yaml:"dead_after"`
	// DeadRetryInterval is the spacing of attempts to a Dead relay.
	// Default 24h.
	DeadRetryInterval time.Duration `yaml:"dead_retry_interval"`
	// RateLimitCooldown is how long a relay that signalled rate limiting is
	// left alone (no connection attempt, REQ or NEG-OPEN). Default 65s: a
	// typical 60s window plus 5s of margin.
	RateLimitCooldown time.Duration `yaml:"rate_limit_cooldown"`
	// StabilityPeriod is how long a connection established after failures
	// must last before the relay is Healthy again and its failure count is
	// cleared. Default 5m.
	StabilityPeriod time.Duration `yaml:"stability_period"`
	// Tick is the period of Run: time-based transitions, attempt expiry and
	// metric updates. Default 2s.
	Tick time.Duration `yaml:"tick"`
	// NaughtyPeriod is how long a relay is skipped after a hard failure
	// (DNS name not found, TLS error, not a websocket, protocol garbage),
	// where backing off by seconds would only repeat the same error.
	// Default 12h.
	NaughtyPeriod time.Duration `yaml:"naughty_period"`
	// DefaultSubscriptionBudget is the number of concurrent subscriptions
	// the engine may hold on a relay that announced no max_subscriptions.
	// Default 20: relays that do not publish limits often enforce small
	// ones, and exceeding them costs rejected REQs (strfry answers a NOTICE
	// that names no subscription, so the engine cannot even tell which REQ
	// failed). The engine consolidates filters, so 20 is enough for live
	// sync plus a few historic pages in flight.
	DefaultSubscriptionBudget int `yaml:"default_subscription_budget"`
	// MinSubscriptionBudget is the floor for a budget lowered by "too many
	// subscriptions" notices. Default 1.
	MinSubscriptionBudget int `yaml:"min_subscription_budget"`
	// BudgetHoldoff is how long after lowering a relay's subscription budget
	// further "too many subscriptions" notices are ignored for budgeting:
	// one overflow burst produces one notice per rejected REQ and must lower
	// the budget once, not once per notice. 0 lowers on every notice.
	// Default 10s.
	BudgetHoldoff time.Duration `yaml:"budget_holdoff"`
	// LearnedTTL is how long the bounds a relay taught by refusals (filters
	// per REQ, tag values per filter, message size, subscription budget)
	// are kept across restarts, counted from the last time one went down:
	// within it a restarted sidecar builds requests that fit at once
	// instead of being refused again (a message too big closes the
	// connection). Default 7 days.
	LearnedTTL time.Duration `yaml:"learned_ttl"`
}

// DefaultConfig returns the defaults documented on each Config field.
func DefaultConfig() Config {
	return Config{
		BackoffBase:               5 * time.Second,
		BackoffMax:                time.Hour,
		JitterFraction:            0.2,
		AttemptExpiry:             time.Minute,
		DeadAfter:                 24 * time.Hour,
		DeadRetryInterval:         24 * time.Hour,
		RateLimitCooldown:         65 * time.Second,
		StabilityPeriod:           5 * time.Minute,
		Tick:                      2 * time.Second,
		NaughtyPeriod:             12 * time.Hour,
		DefaultSubscriptionBudget: 20,
		MinSubscriptionBudget:     1,
		BudgetHoldoff:             10 * time.Second,
		LearnedTTL:                7 * 24 * time.Hour,
	}
}

// Validate reports the first invalid field, naming it and its value. The
// error wraps ErrInvalidConfig.
func (c Config) Validate() error {
	positive := []struct {
		name string
		v    time.Duration
	}{
		{"backoff_base", c.BackoffBase},
		{"backoff_max", c.BackoffMax},
		{"attempt_expiry", c.AttemptExpiry},
		{"dead_after", c.DeadAfter},
		{"dead_retry_interval", c.DeadRetryInterval},
		{"rate_limit_cooldown", c.RateLimitCooldown},
		{"stability_period", c.StabilityPeriod},
		{"tick", c.Tick},
		{"naughty_period", c.NaughtyPeriod},
		{"learned_ttl", c.LearnedTTL},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %s", ErrInvalidConfig, p.name, p.v)
		}
	}
	switch {
	case c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("%w: backoff_max (%s) must be at least backoff_base (%s)", ErrInvalidConfig, c.BackoffMax, c.BackoffBase)
	case !(c.JitterFraction >= 0 && c.JitterFraction < 1): // also rejects NaN
		return fmt.Errorf("%w: jitter_fraction must be in [0, 1), got %v", ErrInvalidConfig, c.JitterFraction)
	case c.MinSubscriptionBudget < 1:
		return fmt.Errorf("%w: min_subscription_budget must be at least 1, got %d", ErrInvalidConfig, c.MinSubscriptionBudget)
	case c.DefaultSubscriptionBudget < c.MinSubscriptionBudget:
		return fmt.Errorf("%w: default_subscription_budget (%d) must be at least min_subscription_budget (%d)", ErrInvalidConfig, c.DefaultSubscriptionBudget, c.MinSubscriptionBudget)
	case c.BudgetHoldoff < 0:
		return fmt.Errorf("%w: budget_holdoff must not be negative, got %s", ErrInvalidConfig, c.BudgetHoldoff)
	}
	return nil
}

// policy is the reconnect backoff: BackoffBase·2^(failures−1), capped at
// BackoffMax, spread by JitterFraction either way.
func (c Config) policy() backoff.Policy {
	return backoff.Policy{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: c.JitterFraction}
}
