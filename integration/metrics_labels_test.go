package integration

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// labelVec is a labelled metric as the sources declare it.
type labelVec struct {
	Name   string
	Labels []string
}

// labelUse is one WithLabelValues call of the sources with the label
// values it names by a literal or a package constant ("" where the value
// is computed).
type labelUse struct {
	Where  string
	Vec    labelVec
	Values []string
}

// sourceLabelUses reads the non-test Go files under root and returns every
// WithLabelValues call on a vector the same package declares (a struct
// field or variable set to prometheus.New…Vec with a literal name) that
// names at least one label value by a string literal or a package string
// constant.
func sourceLabelUses(t *testing.T, root string) []labelUse {
	t.Helper()
	type pkg struct {
		files  []*ast.File
		consts map[string]string
		vecs   map[string]labelVec
	}
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if pkgs[dir] == nil {
			pkgs[dir] = &pkg{consts: map[string]string{}, vecs: map[string]labelVec{}}
		}
		pkgs[dir].files = append(pkgs[dir].files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	str := func(e ast.Expr) (string, bool) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, err := strconv.Unquote(lit.Value)
			return s, err == nil
		}
		return "", false
	}
	// newVec returns the metric a prometheus.New…Vec call declares.
	newVec := func(e ast.Expr) (labelVec, bool) {
		call, ok := e.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return labelVec{}, false
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return labelVec{}, false
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" || !strings.HasSuffix(sel.Sel.Name, "Vec") {
			return labelVec{}, false
		}
		opts, ok1 := call.Args[0].(*ast.CompositeLit)
		labels, ok2 := call.Args[1].(*ast.CompositeLit)
		if !ok1 || !ok2 {
			return labelVec{}, false
		}
		var v labelVec
		for _, el := range opts.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
					v.Name, _ = str(kv.Value)
				}
			}
		}
		for _, el := range labels.Elts {
			l, ok := str(el)
			if !ok {
				return labelVec{}, false
			}
			v.Labels = append(v.Labels, l)
		}
		return v, v.Name != ""
	}
	lastName := func(e ast.Expr) string {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name
		case *ast.SelectorExpr:
			return x.Sel.Name
		}
		return ""
	}
	for _, p := range pkgs {
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.ValueSpec:
					for i, id := range x.Names {
						if i < len(x.Values) {
							if s, ok := str(x.Values[i]); ok {
								p.consts[id.Name] = s
							} else if v, ok := newVec(x.Values[i]); ok {
								p.vecs[id.Name] = v
							}
						}
					}
				case *ast.KeyValueExpr:
					if v, ok := newVec(x.Value); ok {
						p.vecs[lastName(x.Key)] = v
					}
				case *ast.AssignStmt:
					for i, rhs := range x.Rhs {
						if v, ok := newVec(rhs); ok && i < len(x.Lhs) {
							p.vecs[lastName(x.Lhs[i])] = v
						}
					}
				}
				return true
			})
		}
	}
	var out []labelUse
	for _, p := range pkgs {
		value := func(e ast.Expr) string {
			if c, ok := e.(*ast.CallExpr); ok && len(c.Args) == 1 { // string(KindRelay)
				e = c.Args[0]
			}
			if s, ok := str(e); ok {
				return s
			}
			if id, ok := e.(*ast.Ident); ok {
				return p.consts[id.Name]
			}
			return ""
		}
		for _, f := range p.files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "WithLabelValues" {
					return true
				}
				vec, ok := p.vecs[lastName(sel.X)]
				if !ok || len(call.Args) != len(vec.Labels) {
					return true
				}
				u := labelUse{Where: fset.Position(call.Pos()).String(), Vec: vec}
				named := false
				for _, a := range call.Args {
					v := value(a)
					named = named || v != ""
					u.Values = append(u.Values, v)
				}
				if named {
					out = append(out, u)
				}
				return true
			})
		}
	}
	return out
}
