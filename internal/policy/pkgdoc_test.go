package policy

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
	for _, f := range pkgs["policy"].Files {
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package policy ") {
			return
		}
	}
	t.Error("package policy has no doc comment starting with \"Package policy \"")
}
