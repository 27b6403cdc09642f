package publish

import (
	"errors"
	"fmt"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid publisher config")

// Config tunes a Publisher. Start from DefaultConfig; every field must be set.
type Config struct {
	// Window is the largest number of EVENTs awaiting their OK at once.
	// Default 200 (chosen from BenchmarkPublish; see the package doc and
	// BENCHMARKS.md, "Publisher window").
	Window int
	// OKTimeout is how long an EVENT may wait for its OK before it is sent
	// again. Default 15s.
	OKTimeout time.Duration
	// MaxTimeouts is how many OK timeouts in a row make the publisher drop
	// the connection and dial again. Default 3.
	MaxTimeouts int
	// RetryBase is the first hold after a rate-limited OK and the first
	// delay before redialling; it doubles per consecutive failure up to
	// RetryMax, with jitter. Defaults 1s and 60s.
	RetryBase time.Duration
	RetryMax  time.Duration
	// QueueSize bounds the submissions not yet answered (queued and in
	// flight); Submit blocks while it is reached, which slows the whole
	// pipeline down to the own relay's pace (backpressure) instead of
	// holding a sync in memory. Default 4000 (20 windows of 200).
	QueueSize int
	// QueueBytes bounds the bytes of those submissions (each event's raw
	// JSON as it arrived, or about its encoding), 0 none; Submit blocks
	// while it is reached, like QueueSize. An event bigger than QueueBytes
	// waits for the queue to be empty. Default 2 MiB: events of 2 kB fill
	// 1,000 submissions, five windows of 200.
	QueueBytes int
	// AuthTimeout bounds one NIP-42 attempt: waiting for the relay's
	// challenge and for the OK of the AUTH event. Default 10s.
	AuthTimeout time.Duration
	// DialTimeout bounds one connection attempt. Default
	// relay.DefaultConnectTimeout (5s).
	DialTimeout time.Duration
	// FailureLogInterval paces the WARN lines of a streak of failed dials
	// or rate-limited OKs: the first, then at most one per interval with
	// the count since. Default 1m.
	FailureLogInterval time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Window:      200,
		OKTimeout:   15 * time.Second,
		MaxTimeouts: 3,
		RetryBase:   time.Second,
		RetryMax:    60 * time.Second,
		QueueSize:   4000,
		QueueBytes:  2 << 20,
		AuthTimeout: 10 * time.Second,
		DialTimeout: relay.DefaultConnectTimeout,

		FailureLogInterval: time.Minute,
	}
}

// Validate reports every field that is out of range, naming the field and
// the bad value.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s: must be > 0, got %d", ErrInvalidConfig, name, v))
		}
	}
	positiveDur := func(name string, v time.Duration) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%w: %s: must be > 0, got %s", ErrInvalidConfig, name, v))
		}
	}
	positive("window", c.Window)
	positiveDur("ok_timeout", c.OKTimeout)
	positive("max_timeouts", c.MaxTimeouts)
	positiveDur("retry_base", c.RetryBase)
	positiveDur("retry_max", c.RetryMax)
	if c.RetryBase > 0 && c.RetryMax > 0 && c.RetryMax < c.RetryBase {
		errs = append(errs, fmt.Errorf("%w: retry_max: must be >= retry_base (%s), got %s", ErrInvalidConfig, c.RetryBase, c.RetryMax))
	}
	positive("queue_size", c.QueueSize)
	if c.QueueSize > 0 && c.Window > 0 && c.QueueSize < c.Window {
		errs = append(errs, fmt.Errorf("%w: queue_size: must be >= window (%d), got %d", ErrInvalidConfig, c.Window, c.QueueSize))
	}
	if c.QueueBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: queue_bytes: must be >= 0, got %d", ErrInvalidConfig, c.QueueBytes))
	}
	positiveDur("auth_timeout", c.AuthTimeout)
	positiveDur("dial_timeout", c.DialTimeout)
	positiveDur("failure_log_interval", c.FailureLogInterval)
	return errors.Join(errs...)
}
