package publish

import (
	"errors"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid publisher config")

// Config tunes a Publisher. Start from DefaultConfig; every field must be set.
//
// It also serves the configuration's publisher section: each user setting
// carries its YAML key and help text (flag, environment variable and
// documentation are derived from them); fields tagged yaml:"-" are not
// user settings.
type Config struct {
	// Window is the largest number of EVENTs awaiting their OK at once.
	// Default 200 (chosen from BenchmarkPublish; see the package doc and
	// BENCHMARKS.md, "Publisher window").
	Window int `yaml:"window" help:"Outstanding EVENTs awaiting OK."`
	// OKTimeout is how long an EVENT may wait for its OK before it is sent
	// again. Default 15s.
	OKTimeout time.Duration `yaml:"ok_timeout" help:"How long to wait for an OK before retrying the EVENT."`
	// RetryBase is the first hold after a rate-limited OK and the first
	// delay before redialling; it doubles per consecutive failure up to
	// RetryMax, with jitter. Defaults 1s and 60s.
	RetryBase time.Duration `yaml:"retry_base" help:"First retry delay after rate-limited or timed-out publishes."`
	RetryMax  time.Duration `yaml:"retry_max" help:"Largest publish retry delay."`
	// QueueSize bounds the submissions not yet answered (queued and in
	// flight); Submit blocks while it is reached, which slows the whole
	// pipeline down to the own relay's pace (backpressure) instead of
	// holding a sync in memory. Default 4000 (20 windows of 200).
	QueueSize int `yaml:"queue_size" help:"Events waiting to be published; producers block when it is full."`
	// AuthTimeout bounds one NIP-42 attempt: waiting for the relay's
	// challenge and for the OK of the AUTH event. Default 10s.
	AuthTimeout time.Duration `yaml:"auth_timeout" help:"Bounds one NIP-42 authentication to the own relay: the wait for its challenge and for the OK of the AUTH event."`
	// FailureLogInterval paces the WARN lines of a streak of failed dials
	// or rate-limited OKs: the first, then at most one per interval with
	// the count since. Default 1m.
	FailureLogInterval time.Duration `yaml:"failure_log_interval" help:"Least time between two WARN lines of one streak of failed dials to the own relay or rate-limited publishes (the first is logged at once, later ones count what was not logged)."`
	// QueueBytes bounds the bytes of those submissions (each event's raw
	// JSON as it arrived, or about its encoding), 0 none; Submit blocks
	// while it is reached, like QueueSize. An event bigger than QueueBytes
	// waits for the queue to be empty. Default 2 MiB: events of 2 kB fill
	// 1,000 submissions, five windows of 200.
	QueueBytes int `yaml:"queue_bytes" help:"Bytes of the events waiting to be published (each as it arrived); producers block when they are reached, so large events queue fewer at once. 0: no byte bound (queue_size still bounds them)."`

	// MaxTimeouts is how many OK timeouts in a row make the publisher drop
	// the connection and dial again. Default 3.
	MaxTimeouts int `yaml:"-"`
	// DialTimeout bounds one connection attempt. Default
	// relay.DefaultConnectTimeout (5s); the sidecar sets it from
	// relay.connect_timeout.
	DialTimeout time.Duration `yaml:"-"`
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

// Validate reports every field that is out of range, each as a
// *setting.Error keyed by its YAML key; the errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	v := setting.Checks{Kind: ErrInvalidConfig}
	v.PositiveInt("window", c.Window)
	v.Positive("ok_timeout", c.OKTimeout)
	v.Positive("auth_timeout", c.AuthTimeout)
	v.Positive("failure_log_interval", c.FailureLogInterval)
	v.Positive("retry_base", c.RetryBase)
	v.Positive("retry_max", c.RetryMax)
	v.Compare("retry_max", c.RetryMax, ">=", "retry_base", c.RetryBase)
	v.PositiveInt("queue_size", c.QueueSize)
	if c.QueueSize > 0 && c.Window > 0 {
		v.Compare("queue_size", c.QueueSize, ">=", "window", c.Window)
	}
	v.NonNegativeInt("queue_bytes", c.QueueBytes)
	// Not user settings.
	v.PositiveInt("max_timeouts", c.MaxTimeouts)
	v.Positive("dial_timeout", c.DialTimeout)
	return v.Err()
}
