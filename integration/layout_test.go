package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestReadmePackageTable: the README's package table names every package
// of the tree, once, and nothing else, so it cannot drift from the code.
func TestReadmePackageTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, found := strings.Cut(string(readme), "| package | purpose |\n")
	if !found {
		t.Fatal("README has no package table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9/_-]+)` \\| [^|]+ \\|$")
	inTable := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		inTable[m[1]]++
	}
	inTree := map[string]bool{}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != "..") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			rel, _ := filepath.Rel("..", filepath.Dir(path))
			inTree[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing, extra []string
	for pkg := range inTree {
		if inTable[pkg] == 0 {
			missing = append(missing, pkg)
		}
	}
	for pkg, n := range inTable {
		if !inTree[pkg] || n > 1 {
			extra = append(extra, pkg)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("packages missing from the README's table: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("README table rows naming no package, or twice: %v", extra)
	}
}
