package inventory

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcLinksOnlyReadlinked keeps the package from reaching a file through another
// process's /proc/<pid>/root or cwd: those links lead into the process's own filesystem,
// outside the read-only /proc mount, and with CAP_SYS_PTRACE (the chart's
// agent.blockedProcesses) uid 0 may open and write there. Every path built with a "root"
// or "cwd" element (Root.Proc(dir, "root"), Root.Proc(dir, via)) must end with it and be
// the argument of os.Readlink, which returns the link's text and follows nothing.
func TestProcLinksOnlyReadlinked(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	links := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		readlinked := map[ast.Expr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && isSelector(call.Fun, "os", "Readlink") && len(call.Args) == 1 {
				readlinked[call.Args[0]] = true
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Proc" {
				return true
			}
			for i, arg := range call.Args {
				if !isLinkElement(arg) {
					continue
				}
				links++
				if i != len(call.Args)-1 || !readlinked[call] {
					t.Errorf("%s: a path through a process's %s link other than os.Readlink of the link itself",
						fset.Position(call.Pos()), exprString(arg))
				}
			}
			return true
		})
	}
	if links < 2 {
		t.Fatalf("found %d root or cwd links; the check looks at nothing", links)
	}
}

// isLinkElement reports whether e names the root or cwd link: the strings, the Via
// constants, or the variable the holder reader ranges over them with.
func isLinkElement(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Value == `"root"` || e.Value == `"cwd"`
	case *ast.Ident:
		return e.Name == "ViaRoot" || e.Name == "ViaCwd" || e.Name == "via"
	}
	return false
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

func exprString(e ast.Expr) string {
	if l, ok := e.(*ast.BasicLit); ok {
		return l.Value
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
