// Package profiling writes Go CPU and heap profiles of the running process:
// `grasp-sync run --cpuprofile FILE --memprofile FILE` (hidden flags the
// end-to-end benchmark uses to profile the sidecar it measures).
package profiling

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// Start begins profiling. With cpuPath set it writes a CPU profile there
// until stop; with memPath set it writes a heap profile there at stop, and
// one taken near the highest heap seen to memPath+".peak" (the peak figures
// are reported on report at stop). Call stop once, before the process exits.
func Start(cpuPath, memPath string, report io.Writer) (stop func() error, err error) {
	var stops []func() error
	stop = func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		stops = append(stops, func() error {
			pprof.StopCPUProfile()
			return f.Close()
		})
	}
	if memPath != "" {
		stopPeak := watchPeakHeap(memPath+".peak", report)
		stops = append(stops, func() error {
			stopPeak()
			return writeHeapProfile(memPath)
		})
	}
	return stop, nil
}

// watchPeakHeap writes a heap profile to path each time the heap in use
// passes its highest value so far by 10 %, so that the file ends up showing
// what was live near the peak. Call the returned function to stop.
func watchPeakHeap(path string, report io.Writer) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		var peak, peakSys, peakStack uint64
		defer func() {
			fmt.Fprintf(report, "profiling: peak heap in use %d MiB, heap from the OS %d MiB, stacks %d MiB\n",
				peak>>20, peakSys>>20, peakStack>>20)
		}()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peakSys = max(peakSys, ms.HeapSys)
			peakStack = max(peakStack, ms.StackSys)
			if ms.HeapInuse < peak+peak/10 {
				continue
			}
			peak = ms.HeapInuse
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}()
	return func() { close(done); <-finished }
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}
