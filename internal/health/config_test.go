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
		BackoffBase: 5 * time.Second, BackoffMax: time.Hour, Jitter: 0.2,
		AttemptExpiry: time.Minute,
		DeadAfter:     24 * time.Hour, DeadRetry: 24 * time.Hour,
		RateLimitCooldown: 65 * time.Second, StabilityPeriod: 5 * time.Minute, ReconnectWait: time.Second,
		ResumeWait: 100 * time.Millisecond,
		Tick:       2 * time.Second, NaughtyPeriod: 12 * time.Hour,
		DefaultSubscriptionBudget: 20, MinSubscriptionBudget: 1, BudgetHoldoff: 10 * time.Second,
		LearnedTTL: 7 * 24 * time.Hour, RefusalWait: 6 * time.Hour,
		RequestRate: 5, RequestBurst: 5000, RefusalBackoffBase: 2 * time.Second, RefusalBackoffMax: 10 * time.Minute,
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
		{func(c *Config) { c.BackoffBase = 0 }, `backoff_base: must be > 0, got "0s"`},
		{func(c *Config) { c.BackoffMax = -time.Second }, `backoff_max: must be > 0, got "-1s"` + "\n" + `backoff_max: must be >= backoff_base (5s), got "-1s"`},
		{func(c *Config) { c.AttemptExpiry = 0 }, `attempt_expiry: must be > 0, got "0s"`},
		{func(c *Config) { c.DeadAfter = 0 }, `dead_after: must be > 0, got "0s"`},
		{func(c *Config) { c.DeadRetry = 0 }, `dead_retry: must be > 0, got "0s"`},
		{func(c *Config) { c.RateLimitCooldown = 0 }, `rate_limit_cooldown: must be > 0, got "0s"`},
		{func(c *Config) { c.StabilityPeriod = 0 }, `stability_period: must be > 0, got "0s"`},
		{func(c *Config) { c.ReconnectWait = 0 }, `reconnect_wait: must be > 0, got "0s"` + "\n" + `reconnect_wait: must be >= resume_wait (100ms), got "0s"`},
		{func(c *Config) { c.ResumeWait = 0 }, `resume_wait: must be > 0, got "0s"`},
		{func(c *Config) { c.ResumeWait = 2 * time.Second }, `reconnect_wait: must be >= resume_wait (2s), got "1s"`},
		{func(c *Config) { c.Tick = 0 }, `tick: must be > 0, got "0s"`},
		{func(c *Config) { c.NaughtyPeriod = 0 }, `naughty_period: must be > 0, got "0s"`},
		{func(c *Config) { c.LearnedTTL = 0 }, `learned_ttl: must be > 0, got "0s"`},
		{func(c *Config) { c.BackoffMax = time.Second }, `backoff_max: must be >= backoff_base (5s), got "1s"`},
		{func(c *Config) { c.Jitter = 1 }, `jitter: must be in [0, 1), got "1"`},
		{func(c *Config) { c.Jitter = -0.1 }, `jitter: must be in [0, 1), got "-0.1"`},
		{func(c *Config) { c.Jitter = math.NaN() }, `jitter: must be in [0, 1), got "NaN"`},
		{func(c *Config) { c.MinSubscriptionBudget = 0 }, `min_subscription_budget: must be >= 1, got "0"`},
		{func(c *Config) { c.DefaultSubscriptionBudget = 0 }, `default_subscription_budget: must be > 0, got "0"`},
		{func(c *Config) { c.BudgetHoldoff = -1 }, `budget_holdoff: must be >= 0, got "-1ns"`},
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
	cfg.Jitter = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}
