package app

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// fileWriters lists every function of the binary that opens a file for writing or
// creates one, with what it writes. Only the guarded writers of sysfsWriters write below
// /sys: each checks the device name, refuses links out of /sys and reads the value back. A
// new writer fails TestOneSysfsWriter until it is listed here, with a reason that is not
// sysfs.
var fileWriters = map[string]string{
	"internal/hostfs.SetReadAhead":                   "the guarded writer of /sys/class/bdi/<device>/read_ahead_kb",
	"internal/hostfs.OpenNFSShutdown":                "the guarded writer of /sys/fs/nfs/<device>/shutdown (nfstune shutdown)",
	"internal/hostfs.Root.writeFileAt":               "a new temporary file (O_CREAT|O_EXCL) renamed over a file: sysfs allows no new files",
	"internal/tune.writeLive":                        "sysctls below /proc/sys; it refuses any other path (TestWriteLiveOnlySysctls)",
	"internal/bench.session.dropCaches":              "/proc/sys/vm/drop_caches between bench runs",
	"internal/bench.WriteReport":                     "the charts and report.md in the directory the user names",
	"internal/cli.writeJSONFile":                     "a bench result file the user names",
	"internal/image.Write":                           "the image's digest file in the build's output directory",
	"internal/inventory/inventorytest.genFile.write": "a synthetic fixture tree in a directory the caller names (test support, not in the binary)",
	"internal/golden.Check":                          "a test's golden file, with UPDATE_GOLDEN set (test support, not in the binary)",
	"internal/hostfs/hostfstest.OverwriteAfterWrite": "the other writer's value into a FIFO a test put in a fixture's place (test support, not in the binary)",
	"internal/inventory.tempProc.parse":              "mountstats copied into a private temporary directory for procfs to parse",
	"internal/image.WriteIndex":                      "the image index's digest file in the build's output directory",
	"internal/image.tarDir":                          "the image index's OCI archive in the build's output directory",
	"internal/fleetbench.runner.run":                 "no file: the API server's Create of the Job and its ConfigMap (a method named Create)",
}

// sysfsWriters are the fileWriters entries allowed to write below /sys, each with a string
// it must name: the attribute it writes.
var sysfsWriters = map[string]string{
	"internal/hostfs.SetReadAhead":    "read_ahead_kb",
	"internal/hostfs.OpenNFSShutdown": "fs/nfs/",
}

// writeCalls are package functions that create or write a file whatever their flags.
var writeCalls = map[string]bool{
	"os.WriteFile": true, "os.Create": true, "os.Truncate": true, "ioutil.WriteFile": true,
	"unix.Creat": true, "syscall.Creat": true, "unix.Truncate": true, "syscall.Truncate": true,
}

// writeFlags are the open flags that make an open a write.
var writeFlags = map[string]bool{"O_WRONLY": true, "O_RDWR": true}

// writeMethods are methods that write a file through a handle such as an os.Root.
var writeMethods = map[string]bool{"WriteFile": true, "Create": true}

// namesSysfs reports where a function names a sysfs path: a string with "/sys", "sys/",
// "class/bdi", "read_ahead_kb", "fs/nfs/" or "shutdown" (other than in "/proc/sys"), or a
// call of a Root's Sys or BDI.
func namesSysfs(fset *token.FileSet, body *ast.BlockStmt) []string {
	var out []string
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			v := strings.ReplaceAll(n.Value, "proc/sys", "") // procfs sysctls are not sysfs
			for _, s := range []string{"/sys", "sys/", "class/bdi", "read_ahead_kb", "fs/nfs/", "shutdown"} {
				if strings.Contains(v, s) {
					out = append(out, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), n.Value))
					break
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Sys" || sel.Sel.Name == "BDI") {
				out = append(out, fmt.Sprintf("%s: .%s()", fset.Position(n.Pos()), sel.Sel.Name))
			}
		}
		return true
	})
	return out
}

// writeSites returns, per function ("dir.Func" or "dir.Recv.Func"), the positions in the
// module's non-test files where a file is opened for writing or created.
func writeSites(t *testing.T) (sites, sysfs map[string][]string) {
	t.Helper()
	sites, sysfs = map[string][]string{}, map[string][]string{}
	for _, pkg := range modulePackages(t) {
		rel, err := filepath.Rel(moduleRoot, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			imported := map[string]bool{}
			for _, im := range f.Imports {
				p := strings.Trim(im.Path.Value, `"`)
				n := p[strings.LastIndex(p, "/")+1:]
				if im.Name != nil {
					n = im.Name.Name
				}
				imported[n] = true
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				key := rel + "." + funcName(fn)
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.SelectorExpr:
						id, ok := n.X.(*ast.Ident)
						if ok && imported[id.Name] && (writeCalls[id.Name+"."+n.Sel.Name] || writeFlags[n.Sel.Name]) {
							sites[key] = append(sites[key], fmt.Sprintf("%s: %s.%s", fset.Position(n.Pos()), id.Name, n.Sel.Name))
						}
					case *ast.CallExpr:
						sel, ok := n.Fun.(*ast.SelectorExpr)
						if !ok || !writeMethods[sel.Sel.Name] {
							return true
						}
						if id, ok := sel.X.(*ast.Ident); ok && imported[id.Name] {
							return true // a package function: writeCalls decides
						}
						sites[key] = append(sites[key], fmt.Sprintf("%s: .%s", fset.Position(n.Pos()), sel.Sel.Name))
					}
					return true
				})
				if _, ok := sites[key]; ok {
					sysfs[key] = namesSysfs(fset, fn.Body)
				}
			}
		}
	}
	return sites, sysfs
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// TestOneSysfsWriter keeps writes below /sys in the guarded writers (ARCHITECTURE.md,
// "Only the guarded writers touch sysfs"): every function that opens a file for writing
// or creates one must be listed in fileWriters, and no function but sysfsWriters may name
// a sysfs path (a "/sys", "class/bdi", "read_ahead_kb", "fs/nfs/" or "shutdown" string, or
// a Root's Sys or BDI).
func TestOneSysfsWriter(t *testing.T) {
	sites, sysfs := writeSites(t)
	var keys []string
	for k := range sites {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := fileWriters[k]; !ok {
			t.Errorf("%s writes files but is not in fileWriters (only hostfs.SetReadAhead and hostfs.OpenNFSShutdown may write below /sys):\n\t%s", k, strings.Join(sites[k], "\n\t"))
		}
	}
	for k := range fileWriters {
		if _, ok := sites[k]; !ok {
			t.Errorf("fileWriters lists %s, which no longer writes files: remove it", k)
		}
	}
	for _, k := range keys {
		if _, ok := sysfsWriters[k]; !ok && len(sysfs[k]) > 0 {
			t.Errorf("%s writes files and names a sysfs path; only %v write below /sys:\n\t%s", k, slices.Sorted(maps.Keys(sysfsWriters)), strings.Join(sysfs[k], "\n\t"))
		}
	}
	for w, attr := range sysfsWriters {
		if !slices.ContainsFunc(sysfs[w], func(s string) bool { return strings.Contains(s, attr) }) {
			t.Errorf("%s no longer names %s: is it still a sysfs writer?", w, attr)
		}
	}
}
