package app

import (
	"errors"
	"go/build"
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
		pkg, err := build.ImportDir(dir, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			continue
		}
		if err != nil {
			t.Fatalf("reading %s: %v", dir, err)
		}
		// Doc is the synopsis of the package comment, build constraints applied.
		if !strings.HasPrefix(pkg.Doc, "Package "+pkg.Name+" ") {
			t.Errorf("package %s (%s) has no doc comment starting with \"Package %s \"", pkg.Name, dir, pkg.Name)
		}
	}
}
