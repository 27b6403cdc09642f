package ingest

import "github.com/grasp-sync/grasp-sync/internal/setting"

// EventLimits bound one event (the configuration's limits section).
type EventLimits struct {
	MaxEventBytes int `yaml:"max_event_bytes" help:"Events larger than this (serialised JSON) are dropped."`
	MaxEventTags  int `yaml:"max_event_tags" help:"Events with more tags are dropped."`
}

// Validate reports every invalid field, keyed by its YAML key.
func (l EventLimits) Validate() error {
	v := setting.Checks{}
	v.PositiveInt("max_event_bytes", l.MaxEventBytes)
	v.PositiveInt("max_event_tags", l.MaxEventTags)
	return v.Err()
}

// RelayLimits bound what one relay may hand the handler (the
// configuration's limits section). A relay over a bound waits in Handle;
// each wait counts in
// ngit_sync_limit_hits_total{limit="relay_event_rate"|"relay_queue"}.
type RelayLimits struct {
	// RelayRate bounds the events per second one relay may hand to the
	// handler that are copies of events seen before (0: unbounded). An
	// event new to the handler is never paced: the sync asked for it.
	RelayRate int `yaml:"relay_event_rate" help:"Events per second accepted from one relay that the sidecar has seen before (repeats and replays); events new to it are not paced."`
	// RelayQueue bounds one relay's events waiting in the shared queue
	// (0: only QueueLen bounds them).
	RelayQueue int `yaml:"relay_queue" help:"Events buffered per relay before it is throttled."`
	// RelayQueueBytes bounds the bytes (frame sizes) of one relay's events
	// waiting in the shared queue (0: unbounded); a relay over it waits in
	// Handle and counts as a "relay_queue" limit hit. One event is always
	// let in.
	RelayQueueBytes int `yaml:"relay_queue_bytes" help:"Bytes of events buffered per relay before it is throttled (0: no byte bound)."`
}

// Validate reports every invalid field, keyed by its YAML key. The
// configuration requires a rate and a queue (0, unbounded, is for tests).
func (l RelayLimits) Validate() error {
	v := setting.Checks{}
	v.PositiveInt("relay_event_rate", l.RelayRate)
	v.PositiveInt("relay_queue", l.RelayQueue)
	v.NonNegativeInt("relay_queue_bytes", l.RelayQueueBytes)
	return v.Err()
}
