package app

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package under internal/ has a doc comment that starts
// with "Package <name> ", as go doc expects.
func TestPackageDocs(t *testing.T) {
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join("..", d.Name())
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatalf("parsing %s: %v", dir, err)
		}
		for name, pkg := range pkgs {
			documented := false
			for _, f := range pkg.Files {
				documented = documented || (f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+name+" "))
			}
			if !documented {
				t.Errorf("package %s (%s) has no doc comment starting with \"Package %s \"", name, dir, name)
			}
		}
	}
}
