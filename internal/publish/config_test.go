package publish

import (
	"errors"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesFieldAndValue(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"window", func(c *Config) { c.Window = 0 }, `window: must be > 0, got "0"`},
		{"ok timeout", func(c *Config) { c.OKTimeout = -time.Second }, `ok_timeout: must be > 0, got "-1s"`},
		{"max timeouts", func(c *Config) { c.MaxTimeouts = 0 }, `max_timeouts: must be > 0, got "0"`},
		{"retry max below base", func(c *Config) { c.RetryMax = time.Millisecond }, `retry_max: must be >= retry_base (1s), got "1ms"`},
		{"queue below window", func(c *Config) { c.QueueSize = 10 }, `queue_size: must be >= window (200), got "10"`},
		{"auth timeout", func(c *Config) { c.AuthTimeout = 0 }, `auth_timeout: must be > 0, got "0s"`},
		{"dial timeout", func(c *Config) { c.DialTimeout = 0 }, `dial_timeout: must be > 0, got "0s"`},
		{"two at once", func(c *Config) { c.Window = -1; c.RetryBase = 0 },
			`window: must be > 0, got "-1"` + "\n" + `retry_base: must be > 0, got "0s"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%v does not wrap ErrInvalidConfig", err)
			}
			if _, err := New(c, newFakeRelay(t).dialer(), nil, nil, nil); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New accepted an invalid config: %v", err)
			}
		})
	}
}
