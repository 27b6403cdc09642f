package event

import (
	"os/exec"
	"strings"
	"testing"
)

// depsOf lists the packages pkg depends on (go list -deps).
func depsOf(t *testing.T, pkg string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

const module = "github.com/grasp-sync/grasp-sync/"

// The event package is a leaf: it imports nothing of this project, so
// every stage can take its types.
func TestEventIsALeaf(t *testing.T) {
	for _, dep := range depsOf(t, ".") {
		if strings.HasPrefix(dep, module) && dep != module+"internal/event" {
			t.Errorf("internal/event depends on %s", dep)
		}
	}
}

// The pipeline flows one way: ingest holds events in the purgatory
// through an interface of its own and the purgatory hands them back
// through a queue, so neither imports the other.
func TestIngestAndPurgatoryImportNeitherOther(t *testing.T) {
	for _, c := range []struct{ pkg, not string }{
		{"../ingest", module + "internal/purgatory"},
		{"../purgatory", module + "internal/ingest"},
	} {
		for _, dep := range depsOf(t, c.pkg) {
			if dep == c.not || strings.HasPrefix(dep, c.not+"/") {
				t.Errorf("%s depends on %s", c.pkg, dep)
			}
		}
	}
}
