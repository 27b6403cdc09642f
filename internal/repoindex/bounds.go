package repoindex

import "github.com/grasp-sync/grasp-sync/internal/setting"

// Bounds are the sync engine's bounds on what the indexes track: its part
// of the configuration's limits section.
type Bounds struct {
	MaxRelaysPerAnnouncement int `yaml:"max_relays_per_announcement" help:"Relay URLs taken from one announcement at most."`
	MaxTrackedRelays         int `yaml:"max_tracked_relays" help:"Remote relays tracked at most."`
	MaxRepositories          int `yaml:"max_repositories" help:"Repositories tracked at most."`
}

// DefaultBounds returns the documented defaults.
func DefaultBounds() Bounds {
	return Bounds{MaxRelaysPerAnnouncement: 20, MaxTrackedRelays: 500, MaxRepositories: 50000}
}

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (b Bounds) Validate() error {
	v := setting.Checks{}
	v.PositiveInt("max_relays_per_announcement", b.MaxRelaysPerAnnouncement)
	v.PositiveInt("max_tracked_relays", b.MaxTrackedRelays)
	v.PositiveInt("max_repositories", b.MaxRepositories)
	return v.Err()
}
