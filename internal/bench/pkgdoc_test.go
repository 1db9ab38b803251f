package bench

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func TestPackageDoc(t *testing.T) {
	t.Parallel()
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range pkgs["bench"].Files {
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package bench ") {
			return
		}
	}
	t.Error("package bench has no doc comment starting with \"Package bench \"")
}
