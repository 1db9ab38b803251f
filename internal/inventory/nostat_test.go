package inventory

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoStatCalls keeps calls that stat or walk arbitrary paths out of the package: a stat
// of a dead hard NFS mount point hangs the caller, and TestReadNeverTouchesMountPoints can
// only catch opens. Directory scans go through os.ReadDir and filepath.Glob on /etc and
// udev directories, which never hold a mount point of interest.
func TestNoStatCalls(t *testing.T) {
	t.Parallel()
	forbidden := map[string]bool{
		"os.Stat": true, "os.Lstat": true, "os.Chdir": true, "os.DirFS": true,
		"syscall.Stat": true, "syscall.Lstat": true, "syscall.Statfs": true,
		"unix.Stat": true, "unix.Lstat": true, "unix.Statfs": true, "unix.Statx": true,
		"filepath.Walk": true, "filepath.WalkDir": true, "filepath.EvalSymlinks": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && forbidden[id.Name+"."+sel.Sel.Name] {
				t.Errorf("%s: %s.%s may touch a mount point", fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked only %d files", checked)
	}
}
