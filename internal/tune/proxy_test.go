package tune

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// proxiedPlan plans apply with the built-in policy on a copy of the EFS fixture tree after
// edit has changed it.
func proxiedPlan(t *testing.T, opts Options, edit func(root hostfs.Root)) *Plan {
	t.Helper()
	root := hostfs.Root(t.TempDir())
	if err := os.CopyFS(string(root), os.DirFS("../inventory/testdata/synthetic-efs-proxy")); err != nil {
		t.Fatal(err)
	}
	edit(root)
	inv, err := inventory.Read(root, inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.Default()
	want := Want{Resolve: func(m *inventory.Mount) Desired {
		r := pol.Resolve(m)
		return Desired{Profile: r.Profile, Mode: r.Mode, Rule: r.Rule}
	}}
	opts.Persist = PersistNone
	p, err := NewPlan(root, inv, want, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanProxiedEFS: apply --exact leaves the read-ahead efs-utils wrote (here 15360 KiB
// from its 1 MiB rsize option on a 256 KiB mount), and the new mount options of an EFS
// mount are written for mount.efs, from its fstab line or, without one, from the state.
func TestPlanProxiedEFS(t *testing.T) {
	t.Parallel()
	setRA := func(root hostfs.Root) {
		if err := os.WriteFile(root.Sys("class", "bdi", "0:61", "read_ahead_kb"), []byte("15360\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := proxiedPlan(t, Options{Exact: true}, setRA)
	for _, a := range p.Actions {
		if a.Device == "0:60" || a.Device == "0:61" {
			t.Errorf("apply --exact would change efs-utils' read-ahead: %+v", a)
		}
	}
	remount := func(p *Plan, dev string) *Remount {
		for _, g := range p.Remounts {
			for i := range g.Mounts {
				if g.Mounts[i].Device == dev {
					return &g.Mounts[i]
				}
			}
		}
		return nil
	}
	r := remount(p, "0:61")
	if r == nil || !slices.Equal(r.FstabLines, []string{"fs-0fedcba987654321f:/ /mnt/efs-legacy efs _netdev,tls,stunnel,rsize=1048576,wsize=1048576 0 0"}) ||
		!strings.HasPrefix(r.Commands[0], "mount -t efs ") {
		t.Errorf("remount of 0:61 from its fstab line: %+v", r)
	}

	p = proxiedPlan(t, Options{}, func(root hostfs.Root) {
		if err := os.WriteFile(filepath.Join(string(root), "etc", "fstab"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	r = remount(p, "0:61")
	if r == nil || len(r.FstabLines) != 1 {
		t.Fatalf("remount of 0:61 without an fstab line: %+v", r)
	}
	line := r.FstabLines[0]
	if !strings.HasPrefix(line, "fs-0fedcba987654321f:/ /mnt/efs-legacy efs ") || strings.Contains(line, "port=") ||
		!strings.Contains(line, "tls") || !strings.Contains(line, "stunnel") || !strings.Contains(r.Commands[0], "mount -t efs ") {
		t.Errorf("remount of 0:61 without an fstab line is not for mount.efs: %s | %s", line, r.Commands[0])
	}
}
