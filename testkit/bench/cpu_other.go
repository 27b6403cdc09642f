//go:build !linux

package bench

import "time"

var processStart = time.Now()

// threadCPU falls back to wall time where per-thread CPU time is not
// available.
func threadCPU() time.Duration { return time.Since(processStart) }

// vmHWM is not available here; the caller falls back to rusage.
func vmHWM(int) int64 { return 0 }

// selfCPU is not measured here (0: not reported).
func selfCPU() time.Duration { return 0 }
