package health

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	want := Config{
		BackoffBase: 5 * time.Second, BackoffMax: time.Hour, JitterFraction: 0.2,
		AttemptExpiry: time.Minute,
		DeadAfter:     24 * time.Hour, DeadRetryInterval: 24 * time.Hour,
		RateLimitCooldown: 65 * time.Second, StabilityPeriod: 5 * time.Minute,
		Tick: 2 * time.Second, NaughtyPeriod: 12 * time.Hour,
		DefaultSubscriptionBudget: 20, MinSubscriptionBudget: 1, BudgetHoldoff: 10 * time.Second,
		LearnedTTL: 7 * 24 * time.Hour,
	}
	if cfg != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", cfg, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.BackoffBase = 0 }, "invalid health config: backoff_base must be positive, got 0s"},
		{func(c *Config) { c.BackoffMax = -time.Second }, "invalid health config: backoff_max must be positive, got -1s"},
		{func(c *Config) { c.AttemptExpiry = 0 }, "invalid health config: attempt_expiry must be positive, got 0s"},
		{func(c *Config) { c.DeadAfter = 0 }, "invalid health config: dead_after must be positive, got 0s"},
		{func(c *Config) { c.DeadRetryInterval = 0 }, "invalid health config: dead_retry_interval must be positive, got 0s"},
		{func(c *Config) { c.RateLimitCooldown = 0 }, "invalid health config: rate_limit_cooldown must be positive, got 0s"},
		{func(c *Config) { c.StabilityPeriod = 0 }, "invalid health config: stability_period must be positive, got 0s"},
		{func(c *Config) { c.Tick = 0 }, "invalid health config: tick must be positive, got 0s"},
		{func(c *Config) { c.NaughtyPeriod = 0 }, "invalid health config: naughty_period must be positive, got 0s"},
		{func(c *Config) { c.LearnedTTL = 0 }, "invalid health config: learned_ttl must be positive, got 0s"},
		{func(c *Config) { c.BackoffMax = time.Second }, "invalid health config: backoff_max (1s) must be at least backoff_base (5s)"},
		{func(c *Config) { c.JitterFraction = 1 }, "invalid health config: jitter_fraction must be in [0, 1), got 1"},
		{func(c *Config) { c.JitterFraction = -0.1 }, "invalid health config: jitter_fraction must be in [0, 1), got -0.1"},
		{func(c *Config) { c.JitterFraction = math.NaN() }, "invalid health config: jitter_fraction must be in [0, 1), got NaN"},
		{func(c *Config) { c.MinSubscriptionBudget = 0 }, "invalid health config: min_subscription_budget must be at least 1, got 0"},
		{func(c *Config) { c.DefaultSubscriptionBudget = 0 }, "invalid health config: default_subscription_budget (0) must be at least min_subscription_budget (1)"},
		{func(c *Config) { c.BudgetHoldoff = -1 }, "invalid health config: budget_holdoff must not be negative, got -1ns"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mut(&cfg)
			err := cfg.Validate()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error does not wrap ErrInvalidConfig")
			}
			if _, err := New(cfg, nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New accepted an invalid config: %v", err)
			}
		})
	}
}

func TestConfigZeroBudgetHoldoffIsValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BudgetHoldoff = 0
	cfg.JitterFraction = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}
