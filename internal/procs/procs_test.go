package procs

import (
	"runtime"
	"testing"
)

func TestResolve(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMAXPROCS" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name    string
		setting int
		env     string
		want    int
		src     string
	}{
		{"default", 0, "", Default, SourceDefault},
		{"environment", 0, "3", 0, SourceGOMAXPROCS},
		{"setting over the environment", 2, "3", 2, SourceSetting},
		{"setting", 4, "", 4, SourceSetting},
		{"runtime's choice", -1, "", 0, SourceRuntime},
		{"runtime's choice with the environment", -1, "3", 0, SourceRuntime},
	} {
		n, src := Resolve(c.setting, env(c.env))
		if n != c.want || src != c.src {
			t.Errorf("%s: Resolve(%d, GOMAXPROCS=%q) = %d, %s; want %d, %s", c.name, c.setting, c.env, n, src, c.want, c.src)
		}
	}
}

func TestApplySetsTheRuntime(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	if n, src := Apply(3); n != 3 || src != SourceSetting || runtime.GOMAXPROCS(0) != 3 {
		t.Fatalf("Apply(3) = %d, %s; runtime %d", n, src, runtime.GOMAXPROCS(0))
	}
	// The runtime's choice leaves the number in force as it is.
	if n, src := Apply(-1); n != 3 || src != SourceRuntime {
		t.Fatalf("Apply(-1) = %d, %s; want 3, %s", n, src, SourceRuntime)
	}
}
