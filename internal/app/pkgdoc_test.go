package app

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that every package of the module (cmd/, internal/, lab/) has a doc
// comment as go doc expects: "Package <name> ..." for a library, "Command <dir> ..." for a
// program.
func TestPackageDocs(t *testing.T) {
	for _, pkg := range modulePackages(t) {
		want := "Package " + pkg.Name + " "
		if pkg.IsCommand() {
			want = "Command " + filepath.Base(pkg.Dir) + " "
		}
		// Doc is the synopsis of the package comment, build constraints applied.
		if !strings.HasPrefix(pkg.Doc, want) {
			t.Errorf("package %s (%s) has no doc comment starting with %q", pkg.Name, pkg.Dir, want)
		}
	}
}
