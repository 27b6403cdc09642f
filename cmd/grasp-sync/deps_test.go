package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The shipped binary links no test code: no test relays (khatru and its
// event store, fasthttp) and not the testing package.
func TestBinaryLinksNoTestCode(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") ||
			strings.Contains(pkg, "khatru") || strings.Contains(pkg, "eventstore") || strings.Contains(pkg, "fasthttp") ||
			strings.HasPrefix(pkg, "github.com/grasp-sync/grasp-sync/testkit") ||
			strings.HasPrefix(pkg, "github.com/grasp-sync/grasp-sync/internal/") &&
				(strings.HasSuffix(pkg, "/harness") || strings.HasSuffix(pkg, "/gitserver") || strings.HasSuffix(pkg, "/demo") || strings.HasSuffix(pkg, "/bench")) {
			t.Errorf("grasp-sync links %s", pkg)
		}
	}
}
