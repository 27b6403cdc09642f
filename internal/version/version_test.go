package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }

	tests := []struct {
		name    string
		v, c, d string
		read    func() (*debug.BuildInfo, bool)
		want    Build
	}{
		{"ldflags win", "v1.0.0", "deadbeef", "2026-11-21T00:00:00Z", vcs,
			Build{"v1.0.0", "deadbeef", "2026-11-21T00:00:00Z", runtime.Version()}},
		{"vcs fallback", "dev", "", "", vcs,
			Build{"dev", "abc123", "2026-01-02T03:04:05Z", runtime.Version()}},
		{"unknown", "", "", "", none,
			Build{"unknown", "unknown", "unknown", runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolve(tt.v, tt.c, tt.d, tt.read); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	got := Build{"v1", "c", "d", "go1.26"}.String()
	if want := "grasp-sync v1 (commit c, built d, go1.26)"; got != want {
		t.Errorf("String: got %q, want %q", got, want)
	}
}
