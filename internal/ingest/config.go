package ingest

import (
	"time"

	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// Config bounds the handler.
//
// Its user settings live in the parts the configuration embeds in its
// sections, each field with its YAML key and help text: EventLimits and
// RelayLimits (limits), Rejected (rejected) and OwnHeldConfig (publisher).
// Start from DefaultConfig.
type Config struct {
	VerifyConfig
	// QueueLen is the number of received events waiting for a worker;
	// receivers block when it is full.
	QueueLen int
	EventLimits
	// SeenMax bounds the dedupe set; SeenTTL is how long an id is
	// remembered at most (0: until evicted by size).
	SeenMax int
	SeenTTL time.Duration
	RelayLimits
	// RelayBurst is how many events one relay may hand at once (0: one
	// second's worth of RelayRate).
	RelayBurst int
	// Rejected bounds the RejectedIndex.
	Rejected RejectedConfig
	OwnHeldConfig
}

// VerifyConfig sizes the signature verification (the configuration's
// sync section).
type VerifyConfig struct {
	// VerifyWorkers is the number of goroutines verifying signatures; 0
	// means GOMAXPROCS.
	VerifyWorkers int `yaml:"verify_workers" help:"Goroutines verifying event signatures (events held in purgatory, a second copy of an id in flight). 0 means automatic: as many as the threads running Go code (cpu.max_procs)."`
}

// Validate reports every invalid field, keyed by its YAML key.
func (c VerifyConfig) Validate() error {
	v := setting.Checks{}
	if c.VerifyWorkers < 0 {
		v.Fail("verify_workers", "must be >= 0 (0 means GOMAXPROCS)", c.VerifyWorkers)
	}
	return v.Err()
}

// OwnHeldConfig is the setting of events a GRASP own relay holds in its
// purgatory (the configuration's publisher section).
type OwnHeldConfig struct {
	// OwnPurgatoryRecheck is how long an event the own relay accepted into
	// its GRASP purgatory may stay unserved before it is published again;
	// 0 means DefaultOwnHeldRecheck.
	OwnPurgatoryRecheck time.Duration `yaml:"own_purgatory_recheck" help:"An event a GRASP own relay accepted into its purgatory (OK true \"purgatory:\") and has not served after this long is published again (GRASP-01 discards after 30m)."`
}

// Validate reports every invalid field, keyed by its YAML key.
func (c OwnHeldConfig) Validate() error {
	v := setting.Checks{}
	v.Positive("own_purgatory_recheck", c.OwnPurgatoryRecheck)
	return v.Err()
}

// Defaults (the limits CONFIGURATION.md lists; every queue is bounded, see
// docs/ARCHITECTURE.md, "Every buffer bounded").
const (
	DefaultRelayQueue      = 1000
	DefaultRelayQueueBytes = 4 << 20
	DefaultRelayRate       = 2000
	DefaultMaxEventBytes   = 262144
	DefaultMaxEventTags    = 2000
	DefaultSeenMax         = 2_000_000
	DefaultSeenTTL         = 20 * time.Minute
)

// DefaultConfig returns the handler's defaults: one relay may fill half of
// the shared queue at most.
func DefaultConfig() Config {
	return Config{
		QueueLen:    2 * DefaultRelayQueue,
		EventLimits: EventLimits{MaxEventBytes: DefaultMaxEventBytes, MaxEventTags: DefaultMaxEventTags},
		RelayLimits: RelayLimits{RelayRate: DefaultRelayRate, RelayQueue: DefaultRelayQueue, RelayQueueBytes: DefaultRelayQueueBytes},
		SeenMax:     DefaultSeenMax, SeenTTL: DefaultSeenTTL,
		Rejected:      DefaultRejectedConfig(),
		OwnHeldConfig: OwnHeldConfig{OwnPurgatoryRecheck: DefaultOwnHeldRecheck},
	}
}
