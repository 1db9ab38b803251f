package app

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the repository root, seen from this package's directory.
const moduleRoot = "../.."

// modulePackages returns every package of the nfstune module, as go build sees it without
// build tags: testdata, hidden directories and nested modules (perf/scrape) are skipped.
func modulePackages(t *testing.T) []*build.Package {
	t.Helper()
	return modulePackagesIn(t, &build.Default)
}

// modulePackagesIn is modulePackages as ctx sees them (its build tags). Under a tag, a
// directory of test files only (the lab's packages) counts as a package too.
func modulePackagesIn(t *testing.T, ctx *build.Context) []*build.Package {
	t.Helper()
	var pkgs []*build.Package
	err := filepath.WalkDir(moduleRoot, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if dir != moduleRoot {
			if name == "testdata" || name == "bin" || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Lstat(filepath.Join(dir, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		pkg, err := ctx.ImportDir(dir, 0)
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			if ctx != &build.Default && len(pkg.TestGoFiles)+len(pkg.XTestGoFiles) > 0 {
				pkgs = append(pkgs, pkg)
			}
			return nil
		}
		if err != nil {
			return err
		}
		pkgs = append(pkgs, pkg)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A walk that found almost nothing has walked the wrong directory.
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s", len(pkgs), moduleRoot)
	}
	return pkgs
}

// runsPrograms lists the packages allowed to run external programs: fio runs the fio
// benchmark. Tests and the lab's test support (build tag lab) may run programs too; they
// are not part of the binary.
var runsPrograms = []string{"internal/fio"}

// TestOneProgramRunner keeps the running of external programs in the packages of
// runsPrograms: a program nfstune runs is a program an attacker who controls its arguments
// could run, so there is one place to review. .golangci.yml's depguard rule says the same
// for os/exec.
func TestOneProgramRunner(t *testing.T) {
	forbidden := map[string]bool{
		"os.StartProcess": true, "syscall.Exec": true, "syscall.ForkExec": true,
		"unix.Exec": true, "syscall.StartProcess": true,
	}
	runners := map[string]bool{}
	for _, pkg := range modulePackages(t) {
		rel, err := filepath.Rel(moduleRoot, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		allowed := slices.Contains(runsPrograms, rel)
		if slices.Contains(pkg.Imports, "os/exec") {
			runners[rel] = true
			if !allowed {
				t.Errorf("%s imports os/exec; only %v run programs", rel, runsPrograms)
			}
		}
		fset := token.NewFileSet()
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && forbidden[id.Name+"."+sel.Sel.Name] && !allowed {
					t.Errorf("%s: %s.%s runs a program; only %v run programs", fset.Position(sel.Pos()), id.Name, sel.Sel.Name, runsPrograms)
				}
				return true
			})
		}
	}
	// The allowed runners must still run programs, or the list has gone stale.
	for _, p := range runsPrograms {
		if !runners[p] {
			t.Errorf("%s is listed as running programs but does not import os/exec", p)
		}
	}
}

// kubernetesClients lists the packages allowed to import the Kubernetes client
// (k8s.io/client-go): those of kubectl-nfstune. nfstune calls no API, and its agent has
// no token; the client would only add size and code to review.
var kubernetesClients = []string{"internal/fleet", "internal/fleetbench", "internal/plugin"}

// TestKubernetesClientOnlyInPlugin keeps k8s.io/client-go out of the nfstune binary: only
// the packages of kubernetesClients import it, and no package cmd/nfstune imports,
// directly or not, is one of them. .golangci.yml's depguard rule kubernetes-client says the
// first half without this test.
func TestKubernetesClientOnlyInPlugin(t *testing.T) {
	const module = "github.com/nfstune/nfstune/"
	imports := map[string][]string{}
	for _, pkg := range modulePackages(t) {
		rel, err := filepath.Rel(moduleRoot, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		imports[rel] = pkg.Imports
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "k8s.io/client-go") && !slices.Contains(kubernetesClients, rel) {
				t.Errorf("%s imports %s; only %v use the Kubernetes client", rel, imp, kubernetesClients)
			}
		}
	}
	seen := map[string]bool{}
	var walk func(rel string)
	walk = func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		if slices.Contains(kubernetesClients, rel) {
			t.Errorf("cmd/nfstune imports %s, which uses the Kubernetes client", rel)
		}
		for _, imp := range imports[rel] {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				walk(dep)
			}
		}
	}
	walk("cmd/nfstune")
	if !seen["internal/agent"] || !seen["internal/status"] {
		t.Fatalf("the walk from cmd/nfstune missed internal/agent or internal/status: %v", seen)
	}
}
