//go:build linux

package ingest

import (
	"syscall"
	"time"
)

// threadCPU returns the calling thread's CPU time (Linux RUSAGE_THREAD);
// benchmarks lock their goroutine to the thread and report it beside ns/op,
// which other processes competing for the cores inflate.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
