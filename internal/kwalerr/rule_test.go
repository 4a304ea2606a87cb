package kwalerr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibraryBuildsErrorsWithKwalerr: the library's packages build every
// error around another error with Errorf or Join, never with fmt.Errorf or
// errors.Join, whose texts repeat an inner error's "kwal: " or span lines.
// The error-text tests catch a bad text only on the paths they drive; this
// catches the construction on every path. Test files, and modules of their
// own (a go.mod below the root), are not the library's.
func TestLibraryBuildsErrorsWithKwalerr(t *testing.T) {
	var bad []string
	for _, root := range []string{"../../logstore", "../../embedded"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != root {
					if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
						return filepath.SkipDir
					}
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				if (pkg.Name == "fmt" && sel.Sel.Name == "Errorf") || (pkg.Name == "errors" && sel.Sel.Name == "Join") {
					bad = append(bad, fset.Position(call.Pos()).String()+": "+pkg.Name+"."+sel.Sel.Name)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(bad) > 0 {
		t.Errorf("use kwalerr.Errorf or kwalerr.Join instead:\n%s", strings.Join(bad, "\n"))
	}
}
