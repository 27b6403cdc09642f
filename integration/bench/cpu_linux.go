package bench

import (
	"syscall"
	"time"
)

// rusageThread is Linux's RUSAGE_THREAD.
const rusageThread = 1

// threadCPU returns the calling thread's CPU time (user + system); callers
// lock the goroutine to its thread. It is unaffected by other processes
// competing for the cores, unlike wall time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
