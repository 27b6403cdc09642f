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
		{"default", 0, "", 1, SourceDefault},
		{"environment", 0, "3", 0, SourceGOMAXPROCS},
		{"setting over the environment", 2, "3", 2, SourceSetting},
		{"setting", 4, "", 4, SourceSetting},
		{"runtime's choice", -1, "", 0, SourceRuntime},
		{"runtime's choice, the environment's number", -1, "3", 0, SourceGOMAXPROCS},
		// The runtime ignores these, so they are no choice of the operator's.
		{"environment not a number", 0, "abc", 1, SourceDefault},
		{"environment zero", 0, "0", 1, SourceDefault},
		{"environment negative", 0, "-1", 1, SourceDefault},
		{"environment with a space", 0, " 2", 1, SourceDefault},
		{"environment with a plus", 0, "+2", 0, SourceGOMAXPROCS}, // the runtime reads it
		{"environment past 32 bits", 0, "4294967297", 1, SourceDefault},
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
	t.Setenv("GOMAXPROCS", "")
	// Numbers other than the one in force, whatever -cpu the test runs at.
	a, b := before+1, before+2
	if n, src := Apply(a); n != a || src != SourceSetting || runtime.GOMAXPROCS(0) != a {
		t.Fatalf("Apply(%d) = %d, %s; runtime %d", a, n, src, runtime.GOMAXPROCS(0))
	}
	// The runtime's choice leaves the number in force as it is.
	if n, src := Apply(-1); n != a || src != SourceRuntime {
		t.Fatalf("Apply(-1) = %d, %s; want %d, %s", n, src, a, SourceRuntime)
	}
	// Automatic without the environment: one thread.
	if n, src := Apply(0); n != 1 || src != SourceDefault || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("Apply(0) = %d, %s; runtime %d; want 1, %s", n, src, runtime.GOMAXPROCS(0), SourceDefault)
	}
	// Automatic with the environment's number: left as the runtime has it.
	runtime.GOMAXPROCS(b)
	t.Setenv("GOMAXPROCS", "7")
	if n, src := Apply(0); n != b || src != SourceGOMAXPROCS {
		t.Fatalf("Apply(0) with GOMAXPROCS=7 = %d, %s; want %d (left), %s", n, src, b, SourceGOMAXPROCS)
	}
}
