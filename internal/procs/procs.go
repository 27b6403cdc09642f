// Package procs decides how many threads run the sidecar's Go code at once
// (GOMAXPROCS): the setting, the environment's GOMAXPROCS, or one.
package procs

import (
	"os"
	"runtime"
)

// Default is how many threads run Go code when neither the setting nor the
// environment says: the sidecar hands each event from goroutine to
// goroutine (read loop, handler, publisher) and uses a fraction of a CPU;
// with more threads than it keeps busy, each hand-off wakes an idle
// thread, which costs more than the work handed off (BENCHMARKS.md, "One
// thread for the sidecar's Go code": one thread took 0.87× the CPU per
// event of two, in the same time).
const Default = 1

// Sources of the number in effect.
const (
	SourceSetting    = "setting"
	SourceGOMAXPROCS = "GOMAXPROCS"
	SourceDefault    = "default"
	SourceRuntime    = "runtime"
)

// Resolve decides the number of threads for the setting: > 0 is taken as
// is; -1 leaves the number to the Go runtime (GOMAXPROCS when the
// environment sets it, else the machine's CPUs or the container's CPU
// limit); 0 is automatic: GOMAXPROCS when the environment sets it (the
// runtime applied it already), else Default. A result of 0 means: leave
// the runtime's number as it is.
func Resolve(setting int, getenv func(string) string) (int, string) {
	switch {
	case setting > 0:
		return setting, SourceSetting
	case setting < 0:
		return 0, SourceRuntime
	case getenv("GOMAXPROCS") != "":
		return 0, SourceGOMAXPROCS
	}
	return Default, SourceDefault
}

// Apply resolves the setting and hands the number to the runtime. It
// returns the number in effect and where it came from.
func Apply(setting int) (int, string) {
	n, src := Resolve(setting, os.Getenv)
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	return runtime.GOMAXPROCS(0), src
}
