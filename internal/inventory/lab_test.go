package inventory

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/hostfs"
)

// labTrees returns the fixture trees recorded from the lab's kernels by make lab-record
// (testdata/lab-<kernel release>[-server-gone]), one per kernel line and state.
func labTrees(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "lab-*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, filepath.Base(d))
		}
	}
	if len(out) == 0 {
		t.Fatal("no testdata/lab-* trees")
	}
	return out
}

// TestLabTreesGolden reads every recorded lab tree and compares the inventory, as JSON,
// with testdata/golden/<tree>.json. UPDATE_GOLDEN=1 rewrites the goldens.
func TestLabTreesGolden(t *testing.T) {
	t.Parallel()
	for _, tree := range labTrees(t) {
		t.Run(tree, func(t *testing.T) {
			t.Parallel()
			inv, err := Read(hostfs.Root(filepath.Join("testdata", tree)), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(inv, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden.Check(t, filepath.Join("testdata", "golden", tree+".json"), got)
		})
	}
}

// TestLabTreesKernelGates checks, on every recorded kernel, what the inventory depends on
// the kernel for: the sunrpc sysfs transports exist from 5.14 on and their absence is a
// warning; every NFS superblock has its mountstats entry, its transports and a read-ahead.
func TestLabTreesKernelGates(t *testing.T) {
	t.Parallel()
	for _, tree := range labTrees(t) {
		t.Run(tree, func(t *testing.T) {
			t.Parallel()
			inv, err := Read(hostfs.Root(filepath.Join("testdata", tree)), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(tree, "lab-"+inv.KernelRelease) {
				t.Errorf("kernel release %q does not name the tree %s", inv.KernelRelease, tree)
			}
			major, minor := releaseVersion(t, inv.KernelRelease)
			sunrpc := major > 5 || major == 5 && minor >= 14
			if got := len(inv.Transports) > 0; got != sunrpc {
				t.Errorf("kernel %s: %d sunrpc transports, want some: %v", inv.KernelRelease, len(inv.Transports), sunrpc)
			}
			if got := slices.Contains(inv.Warnings, noSunrpcSysfs); got == sunrpc {
				t.Errorf("kernel %s: warnings %q; want the missing sunrpc sysfs named: %v", inv.KernelRelease, inv.Warnings, !sunrpc)
			}
			if len(inv.Mounts) == 0 {
				t.Fatal("no NFS mounts")
			}
			for _, m := range inv.Mounts {
				if m.Stats == nil || m.Connections == 0 || m.ReadAheadKB == nil || m.Version == "" {
					t.Errorf("mount %s %v: stats %v, %d connections, read-ahead %v, version %q",
						m.Device, m.MountPoints, m.Stats != nil, m.Connections, m.ReadAheadKB, m.Version)
				}
			}
		})
	}
}

// releaseVersion parses "5.10.0-32-amd64" as 5, 10.
func releaseVersion(t *testing.T, release string) (int, int) {
	t.Helper()
	var major, minor int
	if _, err := fmt.Sscanf(release, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("kernel release %q: %v", release, err)
	}
	return major, minor
}
