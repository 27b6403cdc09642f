package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
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

// Size limits of the code under internal/ and testkit/: a package past maxPackageLines
// non-test lines, or a type past maxTypeMethods methods, holds more than
// one job and is split along its seams.
const (
	maxPackageLines = 3000
	maxTypeMethods  = 40
)

// TestPackageAndTypeSize parses every non-test Go file under internal/ and testkit/,
// counts the lines of each package (directory) and the methods of each
// receiver type, logs the five largest of each, and fails on a package or
// type over its limit.
func TestPackageAndTypeSize(t *testing.T) {
	lines := map[string]int{}   // package directory → non-test lines
	methods := map[string]int{} // package.Type → methods
	fset := token.NewFileSet()
	walk := func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		lines[pkg] += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			if name := receiverType(fn.Recv.List[0].Type); name != "" {
				methods[pkg+"."+name]++
			}
		}
		return nil
	}
	// internal/ is the product; testkit/ is read as often, by every test.
	for _, root := range []string{"../internal", "../testkit"} {
		if err := filepath.WalkDir(root, walk); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what   string
		counts map[string]int
		limit  int
	}{
		{"non-test lines", lines, maxPackageLines},
		{"methods", methods, maxTypeMethods},
	} {
		names := make([]string, 0, len(c.counts))
		for n := range c.counts {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool {
			if c.counts[names[i]] != c.counts[names[j]] {
				return c.counts[names[i]] > c.counts[names[j]]
			}
			return names[i] < names[j]
		})
		for i, n := range names {
			if i < 5 {
				t.Logf("%s: %d %s", n, c.counts[n], c.what)
			}
			if c.counts[n] > c.limit {
				t.Errorf("%s has %d %s, more than %d: split it along its seams", n, c.counts[n], c.what, c.limit)
			}
		}
	}
}

// receiverType is the name of a method receiver's type: T of T, *T, T[P]
// and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
