package app

import (
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/nfstune/nfstune"

// outsideNames are the short names ARCHITECTURE.md gives the modules outside the standard
// library, by import path prefix. An import that matches none fails the test: name it here
// and in the table.
var outsideNames = []struct{ prefix, name string }{
	{"github.com/spf13/cobra", "cobra"},
	{"github.com/spf13/pflag", "pflag"},
	{"sigs.k8s.io/yaml", "sigs.k8s.io/yaml"},
	{"golang.org/x/sys/unix", "x/sys/unix"},
	{"golang.org/x/net/", "x/net"},
	{"github.com/prometheus/client_golang/", "client_golang"},
	{"github.com/prometheus/client_model/", "client_model"},
	{"github.com/prometheus/common/", "prometheus/common"},
	{"github.com/prometheus/procfs", "procfs"},
	{"github.com/moby/sys/mountinfo", "moby/sys/mountinfo"},
	{"k8s.io/api/", "k8s.io/api"},
	{"k8s.io/apimachinery/", "k8s.io/apimachinery"},
	{"k8s.io/client-go/", "client-go"},
	{"gopkg.in/yaml.v3", "gopkg.in/yaml.v3"},
	{"go.yaml.in/yaml/v2", "go.yaml.in/yaml/v2"},
	{"github.com/google/go-containerregistry/", "go-containerregistry"},
	{"github.com/google/go-cmp/", "go-cmp"},
	{"github.com/cilium/ebpf", "cilium/ebpf"},
	{"github.com/tidwall/pretty", "tidwall/pretty"},
}

// importRow is one row of ARCHITECTURE.md's import table.
type importRow struct{ module, outside []string }

// architectureImports reads the import table of ARCHITECTURE.md: package path (relative to
// the module) to its two columns.
func architectureImports(t *testing.T) map[string]importRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([^`]+)`(?: \\(tag `[a-z]+`\\))? \\|([^|]*)\\|([^|]*)\\|$")
	list := func(s string) []string {
		var out []string
		for f := range strings.SplitSeq(s, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		slices.Sort(out)
		return out
	}
	rows := make(map[string]importRow)
	for line := range strings.SplitSeq(string(b), "\n") {
		m := row.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || !strings.Contains(line, "|") {
			continue
		}
		rows[m[1]] = importRow{module: list(m[2]), outside: list(m[3])}
	}
	if len(rows) < 10 {
		t.Fatalf("found %d rows in ARCHITECTURE.md's import table", len(rows))
	}
	return rows
}

// packageImports returns a package's imports as the table writes them: the module's own
// packages by their last path elements below internal/ (or their path), the others by
// their short names.
func packageImports(t *testing.T, pkg *build.Package) importRow {
	t.Helper()
	var r importRow
	for _, imp := range pkg.Imports {
		switch {
		case strings.HasPrefix(imp, modulePath+"/"):
			p := strings.TrimPrefix(imp, modulePath+"/")
			r.module = append(r.module, shortPackage(p))
		case !strings.Contains(strings.SplitN(imp, "/", 2)[0], "."):
			// the standard library
		default:
			i := slices.IndexFunc(outsideNames, func(o struct{ prefix, name string }) bool {
				return imp == strings.TrimSuffix(o.prefix, "/") || strings.HasPrefix(imp, o.prefix)
			})
			if i < 0 {
				t.Errorf("%s imports %s, which outsideNames does not name", pkg.ImportPath, imp)
				continue
			}
			r.outside = append(r.outside, outsideNames[i].name)
		}
	}
	slices.Sort(r.module)
	r.module = slices.Compact(r.module)
	slices.Sort(r.outside)
	r.outside = slices.Compact(r.outside)
	return r
}

// shortPackage is how the table's module column names a package: "internal/x/y" as "x/y".
func shortPackage(p string) string { return strings.TrimPrefix(p, "internal/") }

// TestArchitectureImports: ARCHITECTURE.md's import table is the import graph of the code,
// every package with exactly its imports (those of its non-test files, with the lab's build
// tag for the lab's packages).
func TestArchitectureImports(t *testing.T) {
	rows := architectureImports(t)
	seen := make(map[string]bool)
	for _, pkg := range taggedModulePackages(t) {
		rel, err := filepath.Rel(moduleRoot, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if testsOnly(pkg) {
			// A package of tests only (the lab's, internal/release): the table lists what its
			// tests import.
			pkg.Imports = append(pkg.TestImports, pkg.XTestImports...)
		}
		seen[rel] = true
		want, ok := rows[rel]
		if !ok {
			t.Errorf("ARCHITECTURE.md's import table has no row for %s", rel)
			continue
		}
		got := packageImports(t, pkg)
		if !slices.Equal(got.module, want.module) {
			t.Errorf("%s imports (module) %q; ARCHITECTURE.md says %q", rel, got.module, want.module)
		}
		if !slices.Equal(got.outside, want.outside) {
			t.Errorf("%s imports (outside) %q; ARCHITECTURE.md says %q", rel, got.outside, want.outside)
		}
	}
	for rel := range rows {
		if !seen[rel] {
			t.Errorf("ARCHITECTURE.md's import table has a row for %s, which is no package of the module", rel)
		}
	}
}

// testsOnly reports whether pkg is tests and at most a doc.go.
func testsOnly(pkg *build.Package) bool {
	return len(pkg.TestGoFiles)+len(pkg.XTestGoFiles) > 0 &&
		(len(pkg.GoFiles) == 0 || len(pkg.GoFiles) == 1 && pkg.GoFiles[0] == "doc.go")
}

// taggedModulePackages is modulePackages with the build tags of the lab's packages and of
// the tests that run helm and a real kube-apiserver.
func taggedModulePackages(t *testing.T) []*build.Package {
	t.Helper()
	ctx := build.Default
	ctx.BuildTags = append(slices.Clone(ctx.BuildTags), "lab", "helm", "apiserver", "release")
	return modulePackagesIn(t, &ctx)
}
