package neg

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time of the calling OS thread (the benchmark
// locks its goroutine to one), so figures do not depend on machine load.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
