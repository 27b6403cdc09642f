// Package version carries the build's version, commit and date, injected at
// build time:
//
//	go build -ldflags "-X github.com/grasp-sync/grasp-sync/internal/version.Version=v1.2.3 \
//	  -X github.com/grasp-sync/grasp-sync/internal/version.Commit=$(git rev-parse HEAD) \
//	  -X github.com/grasp-sync/grasp-sync/internal/version.Date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
//	  ./cmd/grasp-sync
//
// Without ldflags, Commit and Date fall back to the VCS stamp the Go
// toolchain embeds (when built inside a git checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set with -ldflags -X at build time.
var (
	// Version is the release version, e.g. "v0.1.0".
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = ""
	// Date is the build date, RFC 3339 UTC.
	Date = ""
)

// Build describes the running binary.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"go_version"`
}

var (
	once     sync.Once
	resolved Build
)

// Get returns the build information, with VCS fallbacks for Commit and Date
// and "unknown" for whatever remains empty.
func Get() Build {
	once.Do(func() {
		resolved = resolve(Version, Commit, Date, debug.ReadBuildInfo)
	})
	return resolved
}

func resolve(v, c, d string, read func() (*debug.BuildInfo, bool)) Build {
	b := Build{Version: v, Commit: c, Date: d, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Date == "" {
					b.Date = s.Value
				}
			}
		}
	}
	for _, p := range []*string{&b.Version, &b.Commit, &b.Date} {
		if *p == "" {
			*p = "unknown"
		}
	}
	return b
}

// String renders "grasp-sync <version> (commit <commit>, built <date>, <go>)".
func (b Build) String() string {
	return fmt.Sprintf("grasp-sync %s (commit %s, built %s, %s)", b.Version, b.Commit, b.Date, b.GoVersion)
}
