package memlimit

import "github.com/grasp-sync/grasp-sync/internal/setting"

// Config is the configuration's memory section: each setting carries its
// YAML key and help text (flag, environment variable and documentation
// are derived from them).
type Config struct {
	// GCHeadroomMiB is StartHeadroom's headroom (0: off).
	GCHeadroomMiB int `yaml:"gc_headroom_mib" help:"How far in MiB the Go heap may grow past the live heap before the garbage collector runs: after each collection GOGC is lowered so the heap goal is the live heap plus this (never below GOGC 20), and the soft memory limit is set half this further (never above memory.limit_mib's), so the resident memory grows with the indexes, not with twice them, and freed memory goes back to the OS. A live heap below it keeps GOGC (100 unless the environment sets it) and the collector's usual cost; a larger one costs collections in proportion. 0: off, GOGC alone."`
	// LimitMiB is the setting Apply resolves: > 0 as is, 0 automatic, -1
	// none.
	LimitMiB int `yaml:"limit_mib" help:"Soft memory limit of the Go runtime in MiB (debug.SetMemoryLimit): as the heap nears it the garbage collector runs more often, so the resident memory stays near the live heap instead of growing to about twice it, at some CPU cost. It is soft: the process exceeds it rather than fail. 0: automatic: GOMEMLIMIT when the environment sets it, else 75% of the cgroup's memory limit when one is set (a container's; the rest is left to git and memory outside the Go heap), else none. -1: none."`
}

// DefaultConfig returns the defaults: DefaultHeadroomMiB, the limit
// automatic.
func DefaultConfig() Config { return Config{GCHeadroomMiB: DefaultHeadroomMiB} }

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (c Config) Validate() error {
	v := setting.Checks{}
	if c.GCHeadroomMiB < 0 {
		v.Fail("gc_headroom_mib", "must be >= 0 (0: off)", c.GCHeadroomMiB)
	}
	if c.LimitMiB < -1 {
		v.Fail("limit_mib", "must be >= -1 (-1: none, 0: automatic)", c.LimitMiB)
	}
	return v.Err()
}
