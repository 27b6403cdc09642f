// Package procs decides how many threads run the sidecar's Go code at once
// (GOMAXPROCS): the setting, the environment's GOMAXPROCS, or one.
package procs

import (
	"os"
	"runtime"
	"strconv"
)

// Default is how many threads run Go code when neither the setting nor the
// environment says: the sidecar hands each event from goroutine to
// goroutine (read loop, handler, publisher) and uses a fraction of a CPU;
// with more threads than it keeps busy, each hand-off wakes an idle
// thread, a noticeable share of the CPU per event (measured cheaper at one
// thread, no slower; BENCHMARKS.md, "Decisions the numbers justified").
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
// runtime applied it already), else Default. A GOMAXPROCS the runtime
// ignores (not a number above 0) counts as not set. A result of 0 means:
// leave the runtime's number as it is.
func Resolve(setting int, getenv func(string) string) (int, string) {
	env := envSet(getenv)
	switch {
	case setting > 0:
		return setting, SourceSetting
	case env:
		return 0, SourceGOMAXPROCS
	case setting < 0:
		return 0, SourceRuntime
	}
	return Default, SourceDefault
}

// envSet tells whether the environment's GOMAXPROCS is one the runtime
// applies: read as the runtime reads it (a 32-bit decimal number), above 0.
func envSet(getenv func(string) string) bool {
	n, err := strconv.ParseInt(getenv("GOMAXPROCS"), 10, 32)
	return err == nil && n > 0
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
