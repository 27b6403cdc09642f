package localindex

import (
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// MaxEventsLimit is the largest Options.MaxEvents (2^27-1: an event's slot
// shares a word with other bits).
const MaxEventsLimit = authorMask

// Config is the index's setting in the configuration's limits section.
type Config struct {
	MaxLocalIndexEvents int `yaml:"max_local_index_events" help:"Events of the own relay the local index (negentropy's local set, about 100 bytes each) holds at most; those beyond it are left out of the set, so reconciliations fetch them again, and ngit_sync_localindex_full is 1. At most 134217727."`
}

// DefaultConfig returns the documented default (DefaultOptions' MaxEvents).
func DefaultConfig() Config { return Config{MaxLocalIndexEvents: DefaultOptions().MaxEvents} }

// Options returns DefaultOptions with the configured bound.
func (c Config) Options() Options {
	o := DefaultOptions()
	o.MaxEvents = c.MaxLocalIndexEvents
	return o
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (c Config) Validate() error {
	v := setting.Checks{}
	v.PositiveInt("max_local_index_events", c.MaxLocalIndexEvents)
	if c.MaxLocalIndexEvents > MaxEventsLimit {
		v.Fail("max_local_index_events", "must be at most 134217727", c.MaxLocalIndexEvents)
	}
	return v.Err()
}
