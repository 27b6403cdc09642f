package procs

import (
	"fmt"

	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// MaxLimit bounds Config.MaxProcs: the runtime has no bound, and a typo
// of a million would make a million schedulers.
const MaxLimit = 1024

// Config is the configuration's cpu section: each setting carries its
// YAML key and help text (flag, environment variable and documentation
// are derived from them).
type Config struct {
	// MaxProcs is the setting Apply resolves: > 0 as is, 0 automatic, -1
	// the Go runtime's choice.
	MaxProcs int `yaml:"max_procs" help:"How many threads run Go code at once (GOMAXPROCS). The sidecar uses a fraction of a CPU and hands each event from goroutine to goroutine; more threads than it keeps busy cost CPU in waking each other (BENCHMARKS.md, \"Decisions the numbers justified\"). Raise it when the sidecar's CPU (process_cpu_seconds_total) sits at cpu.max_procs CPUs while a sync is behind. 0: automatic: GOMAXPROCS when the environment sets it, else 1. -1: as the Go runtime decides (GOMAXPROCS, else the machine's CPUs or the container's CPU limit, rounded up, at least 2). At most 1024."`
}

// DefaultConfig returns the defaults: automatic.
func DefaultConfig() Config { return Config{} }

// Validate reports every invalid setting, each as a *setting.Error keyed
// by its YAML key.
func (c Config) Validate() error {
	v := setting.Checks{}
	if c.MaxProcs < -1 || c.MaxProcs > MaxLimit {
		v.Fail("max_procs", fmt.Sprintf("must be in -1..%d (-1: the Go runtime's choice, 0: automatic)", MaxLimit), c.MaxProcs)
	}
	return v.Err()
}
