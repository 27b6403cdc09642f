package statestore

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportsOnlyLeaves: the store imports, of grasp-sync, only packages
// that import nothing of grasp-sync (the records and the clock), so it
// never depends on the engines whose state it keeps.
func TestImportsOnlyLeaves(t *testing.T) {
	const module = "github.com/grasp-sync/grasp-sync/"
	own := func(dir string) []string {
		t.Helper()
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module) {
				out = append(out, imp)
			}
		}
		return out
	}
	for _, imp := range own(".") {
		if deps := own(filepath.Join("..", "..", strings.TrimPrefix(imp, module))); len(deps) > 0 {
			t.Errorf("statestore imports %s, which imports %v", imp, deps)
		}
	}
}
