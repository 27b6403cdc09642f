// Package memlimit bounds the Go runtime's memory: the soft memory limit
// from the configuration, else from the cgroup's memory limit
// (containers), and the collector's headroom over the live heap.
package memlimit

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// CgroupShare is the part of a cgroup's memory limit taken as the soft
// limit when the setting is automatic: the rest is left to the git
// commands the sidecar runs in the same cgroup and to memory outside the
// Go heap.
const CgroupShare = 0.75

// Sources of a limit.
const (
	SourceSetting    = "setting"
	SourceCgroup     = "cgroup"
	SourceGOMEMLIMIT = "GOMEMLIMIT"
	SourceNone       = "none"
)

// System is what Resolve reads: the environment and files (the real ones
// in Apply; fakes in tests).
type System struct {
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
}

func realSystem() System { return System{Getenv: os.Getenv, ReadFile: os.ReadFile} }

// Resolve decides the soft limit in bytes (0: none) for the setting in
// MiB: > 0 is taken as is; -1 means none; 0 means automatic: GOMEMLIMIT
// when the environment sets it (the runtime applied it already), else
// CgroupShare of the cgroup's memory limit when one is set, else none.
func Resolve(settingMiB int, sys System) (int64, string) {
	switch {
	case settingMiB > 0:
		return int64(settingMiB) << 20, SourceSetting
	case settingMiB < 0:
		return 0, SourceNone
	}
	if sys.Getenv("GOMEMLIMIT") != "" {
		return 0, SourceGOMEMLIMIT
	}
	if l := CgroupLimit(sys.ReadFile); l > 0 {
		return int64(float64(l) * CgroupShare), SourceCgroup
	}
	return 0, SourceNone
}

// Apply resolves the limit and hands it to the runtime. It returns the
// limit in effect (math.MaxInt64: none) and where it came from.
func Apply(settingMiB int) (int64, string) {
	limit, src := Resolve(settingMiB, realSystem())
	switch src {
	case SourceGOMEMLIMIT:
		return debug.SetMemoryLimit(-1), src
	case SourceNone:
		debug.SetMemoryLimit(math.MaxInt64)
		return math.MaxInt64, src
	}
	debug.SetMemoryLimit(limit)
	return limit, src
}

// noLimit is where cgroup v1 reports "unlimited" (a page-rounded
// MaxInt64); anything this large is no limit.
const noLimit = 1 << 60

// CgroupLimit is the memory limit in bytes of the cgroup this process is
// in (v2 memory.max, else v1 memory.limit_in_bytes), 0 when there is none
// or it cannot be read.
func CgroupLimit(readFile func(string) ([]byte, error)) int64 {
	v2, v1 := "/", "/"
	if b, err := readFile("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// hierarchy-ID:controllers:path
			parts := strings.SplitN(sc.Text(), ":", 3)
			if len(parts) != 3 {
				continue
			}
			if parts[0] == "0" && parts[1] == "" {
				v2 = parts[2]
			}
			for _, c := range strings.Split(parts[1], ",") {
				if c == "memory" {
					v1 = parts[2]
				}
			}
		}
	}
	read := func(file string) int64 {
		b, err := readFile(file)
		if err != nil {
			return 0
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= noLimit {
			return 0
		}
		return n
	}
	// The process's own cgroup first; inside a container with its own
	// cgroup namespace the path is "/" and the root files are its own.
	for _, f := range []string{
		path.Join("/sys/fs/cgroup", v2, "memory.max"),
		"/sys/fs/cgroup/memory.max",
		path.Join("/sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"),
		"/sys/fs/cgroup/memory/memory.limit_in_bytes",
	} {
		if n := read(f); n > 0 {
			return n
		}
	}
	return 0
}
