package tune

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

type brief struct{ Kind, Path, Old, New string }

func briefs(p *Plan) []brief {
	var out []brief
	for _, a := range p.Actions {
		b := brief{Kind: string(a.Kind), Path: a.Path, Old: a.Old, New: a.New}
		if !a.Kind.Live() {
			b.Old, b.New = "", ""
			if a.OldAbsent {
				b.Old = "absent"
			}
		}
		out = append(out, b)
	}
	return out
}

func TestPlanFixture(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	p, err := NewPlan(root, fixtureInventory(), fixtureWant(), defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := []brief{
		{"readahead", "/sys/class/bdi/0:53/read_ahead_kb", "128", "16384"},
		{"readahead", "/sys/class/bdi/0:54/read_ahead_kb", "128", "1024"},
		{"udev-rule", UdevRulePath, "absent", ""},
		{"sysctl", "/proc/sys/net/core/rmem_max", "212992", "16777216"},
		{"sysctl", "/proc/sys/net/ipv4/tcp_rmem", "4096 131072 6291456", "4096 131072 16777216"},
		{"sysctl", "/proc/sys/sunrpc/tcp_slot_table_entries", "2", "128"},
		{"sysctl-file", SysctlFilePath, "absent", ""},
	}
	if diff := cmp.Diff(want, briefs(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	rule := p.Actions[2].New
	if !strings.Contains(rule, `KERNEL=="0:*", PROGRAM="/usr/local/bin/nfstune udev-readahead %k", ATTR{read_ahead_kb}="%c"`) {
		t.Errorf("udev rule lacks the PROGRAM/ATTR pair:\n%s", rule)
	}
	wantSysctlFile := "# Written by nfstune apply; removed by nfstune revert.\n" +
		"net.core.rmem_max = 16777216\nnet.ipv4.tcp_rmem = 4096 131072 16777216\nsunrpc.tcp_slot_table_entries = 128\n"
	if diff := cmp.Diff(wantSysctlFile, p.Actions[6].New); diff != "" {
		t.Errorf("sysctl drop-in (-want +got):\n%s", diff)
	}
	if len(p.Remounts) != 1 {
		t.Fatalf("remount groups = %+v, want one (tools)", p.Remounts)
	}
	g := p.Remounts[0]
	if g.ClientWide || g.Key != "192.168.122.72:2049/v3/tcp" || !cmp.Equal(g.UnmountTogether, []string{"/mnt/tools"}) {
		t.Errorf("remount group = %+v", g)
	}
	wantLine := "192.168.122.72:/export/tools\t/mnt/tools\tnfs\trsize=1048576,wsize=1048576,hard\t0\t0"
	if diff := cmp.Diff([]string{wantLine}, g.Mounts[0].FstabLines); diff != "" {
		t.Errorf("fstab lines (-want +got):\n%s", diff)
	}
	wantCmd := "mount -t nfs -o rsize=1048576,wsize=1048576,hard 192.168.122.72:/export/tools /mnt/tools"
	if diff := cmp.Diff([]string{wantCmd}, g.Mounts[0].Commands); diff != "" {
		t.Errorf("mount commands (-want +got):\n%s", diff)
	}
	if !containsNote(p, "99-nfs.rules:1 (runs /usr/libexec/nfsrahead) runs before 99-zz-nfstune-readahead.rules") {
		t.Errorf("no note about nfs-utils' rule being overridden: %q", p.Notes)
	}
}

func containsNote(p *Plan, s string) bool {
	for _, n := range p.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

func TestPlanExactLowers(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	opts := defaultOptions()
	opts.Exact = true
	p, err := NewPlan(root, fixtureInventory(), fixtureWant(), opts)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range p.Actions {
		if a.Path == "/proc/sys/net/core/wmem_max" {
			found = a.Old == "16777216" && a.New == "4194304"
		}
	}
	if !found {
		t.Errorf("--exact did not lower net.core.wmem_max: %v", briefs(p))
	}
}

// Read-ahead is only written on bdis that both mountinfo and /proc/fs/nfsfs/volumes call NFS.
func TestPlanReadAheadOnlyConfirmedNFS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(inv *inventory.Inventory)
		note  string
		wantN int
	}{
		{"block device", func(inv *inventory.Inventory) { inv.Mounts[0].Device = "8:0" }, "not an anonymous", 1},
		{"not in volumes", func(inv *inventory.Inventory) { inv.Mounts[0].Device = "0:99" }, "not listed in /proc/fs/nfsfs/volumes", 1},
		{"not nfs in mountinfo", func(inv *inventory.Inventory) { inv.Mounts[0].FSType = "fuse" }, "not nfs or nfs4", 1},
		{"invalid device", func(inv *inventory.Inventory) { inv.Mounts[0].Device = "0:../../x" }, "not an anonymous", 1},
		{"observe", func(inv *inventory.Inventory) { inv.Mounts[0].Server = "observe.example" }, "observe mode", 1},
		// The kernel would store 2 KiB as 0, read-ahead off.
		{"below one page", func(inv *inventory.Inventory) { inv.Mounts[0].Server = "tiny.example" }, "2 KiB is below one page", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := fixtureRoot(t)
			inv := fixtureInventory()
			tt.edit(inv)
			want := fixtureWant()
			base := want.Resolve
			want.Resolve = func(m *inventory.Mount) Desired {
				d := base(m)
				if m.Server == "observe.example" {
					d = base(&inventory.Mount{Server: "192.168.122.71"})
					d.Mode = policy.ModeObserve
				}
				if m.Server == "tiny.example" {
					d = base(&inventory.Mount{Server: "192.168.122.71"})
					d.Profile.ReadAheadKB = 2
				}
				return d
			}
			opts := defaultOptions()
			opts.Persist = PersistNone
			p, err := NewPlan(root, inv, want, opts)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range p.Actions {
				if a.Kind == KindReadAhead {
					n++
					if a.Device != "0:54" {
						t.Errorf("read-ahead planned for %s", a.Device)
					}
				}
			}
			if n != tt.wantN {
				t.Errorf("%d read-ahead actions, want %d", n, tt.wantN)
			}
			if !containsNote(p, tt.note) {
				t.Errorf("no note %q in %q", tt.note, p.Notes)
			}
		})
	}
}

func TestPlanUdevConflicts(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	inv := fixtureInventory()
	inv.ReadAhead.UdevRules = append(inv.ReadAhead.UdevRules,
		inventory.UdevRule{File: "/etc/udev/rules.d/99-nfs.rules", Line: 1, ReadAheadKB: intp(15380), Hides: "/usr/lib/udev/rules.d/99-nfs.rules"},
		inventory.UdevRule{File: "/etc/udev/rules.d/99-zzz-late.rules", Line: 3, ReadAheadKB: intp(16384)},
	)
	p, err := NewPlan(root, inv, fixtureWant(), defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"/etc/udev/rules.d/99-nfs.rules hides /usr/lib/udev/rules.d/99-nfs.rules",
		"/etc/udev/rules.d/99-nfs.rules:1 (sets 15380 KiB) runs before",
		"99-zzz-late.rules:3 (sets 16384 KiB) sorts after 99-zz-nfstune-readahead.rules",
		"cannot win by ordering",
	} {
		if !containsNote(p, want) {
			t.Errorf("no note %q in:\n%s", want, strings.Join(p.Notes, "\n"))
		}
	}
}

func TestPlanNFSConf(t *testing.T) {
	t.Parallel()
	opts := defaultOptions()
	opts.Persist = PersistNFSConf

	// A policy whose read-ahead depends only on the file system type fits nfsrahead.
	byType := fixtureWant()
	base := byType.Resolve
	byType.Resolve = func(m *inventory.Mount) Desired {
		if m.FSType == "nfs4" {
			return base(&inventory.Mount{Server: "192.168.122.71"})
		}
		return base(&inventory.Mount{Server: "192.168.122.72"})
	}
	root := fixtureRoot(t)
	p, err := NewPlan(root, fixtureInventory(), byType, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, a := range p.Actions {
		if a.Kind == KindNFSConf {
			got = a.New
		}
	}
	want := "# Written by nfstune apply; removed by nfstune revert.\n[nfsrahead]\nnfs=1024\nnfs4=16384\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("drop-in (-want +got):\n%s", diff)
	}

	// Per-server rules: a future nfs4 mount of another server wants the default 4096 KiB,
	// the data export 16384 KiB, and nfsrahead has one value for both.
	if _, err := NewPlan(root, fixtureInventory(), fixtureWant(), opts); err == nil || !strings.Contains(err.Error(), "one value per file system type") {
		t.Errorf("err = %v, want a per-fstype error", err)
	}

	// A second nfs4 mount with another value cannot be expressed per fstype.
	inv := fixtureInventory()
	other := inv.Mounts[0]
	other.Device, other.MountPoints, other.Server = "0:55", []string{"/mnt/other"}, "192.168.122.99"
	other.FSType = "nfs4"
	inv.Mounts = append(inv.Mounts, other)
	oneServer := byType
	oneServer.Resolve = func(m *inventory.Mount) Desired {
		d := byType.Resolve(m)
		if m.Server == "192.168.122.99" {
			d.Profile.ReadAheadKB = 2048
		}
		return d
	}
	if _, err := NewPlan(root, inv, oneServer, opts); err == nil || !strings.Contains(err.Error(), "one value per file system type") {
		t.Errorf("err = %v, want a per-fstype error", err)
	}

	// Without nfs-utils' nfsrahead there is nothing to read the drop-in.
	inv = fixtureInventory()
	inv.ReadAhead.UdevRules = nil
	if err := os.Remove(root.Path("usr/lib/udev/rules.d/99-nfs.rules")); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(root, inv, fixtureWant(), opts); err == nil || !strings.Contains(err.Error(), "2.6.2") {
		t.Errorf("err = %v, want an nfs-utils version error", err)
	}
}

func TestPlanFstabEdit(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	opts := defaultOptions()
	opts.Fstab = true
	p, err := NewPlan(root, fixtureInventory(), fixtureWant(), opts)
	if err != nil {
		t.Fatal(err)
	}
	var backup, fstab *Action
	for i := range p.Actions {
		switch p.Actions[i].Kind {
		case KindBackup:
			backup = &p.Actions[i]
		case KindFstab:
			fstab = &p.Actions[i]
		}
	}
	if backup == nil || fstab == nil {
		t.Fatalf("no backup or fstab action: %v", briefs(p))
	}
	if backup.New != fixtureFstab || !backup.OldAbsent {
		t.Errorf("backup is not a copy of fstab: %+v", backup)
	}
	want := strings.Replace(fixtureFstab, "soft,rsize=65536,wsize=65536\t0", "rsize=1048576,wsize=1048576,hard\t0", 1)
	if diff := cmp.Diff(want, fstab.New); diff != "" {
		t.Errorf("new fstab (-want +got):\n%s", diff)
	}
}

func TestPlanSysctlMax(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	writeFile(t, root, "proc/sys/sunrpc/tcp_max_slot_table_entries", "65536\n")
	want := fixtureWant()
	want.SysctlsMax = map[string]int64{"sunrpc.tcp_max_slot_table_entries": 128}
	opts := defaultOptions()
	p, err := NewPlan(root, fixtureInventory(), want, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if strings.HasSuffix(a.Path, "tcp_max_slot_table_entries") {
			t.Errorf("lowered without --exact: %v", a)
		}
	}
	if !containsNote(p, "above the profile's bound 128; lowered only with --exact") {
		t.Errorf("no note about the bound: %q", p.Notes)
	}
	opts.Exact = true
	p, err = NewPlan(root, fixtureInventory(), want, opts)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range p.Actions {
		if a.Path == "/proc/sys/sunrpc/tcp_max_slot_table_entries" {
			found = a.Old == "65536" && a.New == "128"
		}
		if a.Kind == KindSysctlFile && !strings.Contains(a.New, "sunrpc.tcp_max_slot_table_entries = 128\n") {
			t.Errorf("drop-in lacks the bound:\n%s", a.New)
		}
	}
	if !found {
		t.Errorf("--exact did not lower to the bound: %v", briefs(p))
	}
}

// An option the policy should have refused (a newline, a blank) must not reach /etc/fstab:
// the plan fails instead of writing a line that does not parse back to what was meant.
func TestPlanFstabRefusesLineThatDoesNotParseBack(t *testing.T) {
	t.Parallel()
	for _, extra := range []string{"noresvport\nnfsvers=2", "a b", "x\t0 0\n#"} {
		root := fixtureRoot(t)
		want := fixtureWant()
		resolve := want.Resolve
		want.Resolve = func(m *inventory.Mount) Desired {
			d := resolve(m)
			d.Profile.Mount.Extra = []string{extra}
			return d
		}
		opts := defaultOptions()
		opts.Fstab = true
		p, err := NewPlan(root, fixtureInventory(), want, opts)
		if err == nil || !strings.Contains(err.Error(), "does not parse back") {
			t.Errorf("extra %q: err = %v, want a refusal; plan %v", extra, err, p)
		}
		if got := readFixture(t, root, FstabPath); got != fixtureFstab {
			t.Errorf("extra %q: fstab changed:\n%s", extra, got)
		}
	}
}

// Only the sysctls policy allows, within their ranges, are planned, whoever builds the Want.
func TestPlanSysctlsOnlyAllowed(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	for _, p := range []string{"proc/sys/kernel/panic", "proc/sys/vm/drop_caches"} {
		if err := os.MkdirAll(filepath.Dir(root.Path(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, root, p, "0\n")
	}
	want := Want{
		Resolve:    fixtureWant().Resolve,
		Sysctls:    map[string]int64{"kernel.panic": 10, "sunrpc.tcp_slot_table_entries": 1 << 20},
		SysctlsMax: map[string]int64{"vm.drop_caches": 3},
	}
	p, err := NewPlan(root, fixtureInventory(), want, defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Kind == KindSysctl || a.Kind == KindSysctlFile {
			t.Errorf("planned %v", a)
		}
	}
	for _, n := range []string{`sysctl "kernel.panic" skipped: not a sysctl nfstune sets`, `sysctl "vm.drop_caches" skipped: not a sysctl nfstune sets`,
		`sysctl sunrpc.tcp_slot_table_entries skipped: 1048576 is out of range 2..65536`} {
		if !containsNote(p, n) {
			t.Errorf("no note %q in %q", n, p.Notes)
		}
	}
}

// With no config file (the built-in policy) every NFS mount gets 15 x its rsize live, and
// a value set on purpose stays.
func TestPlanBuiltInReadAhead(t *testing.T) {
	t.Parallel()
	pol := policy.Default()
	pol.Adaptive = nil // defaults.readAheadAdaptive: false
	want := Want{Resolve: func(m *inventory.Mount) Desired {
		r := pol.Resolve(m)
		return Desired{Profile: r.Profile, Mode: r.Mode, Rule: r.Rule}
	}}
	root := fixtureRoot(t)
	inv := fixtureInventory()
	p, err := NewPlan(root, inv, want, defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var got []brief
	for _, b := range briefs(p) {
		if b.Kind == "readahead" {
			got = append(got, b)
		}
	}
	wantRA := []brief{
		{"readahead", "/sys/class/bdi/0:53/read_ahead_kb", "128", "15360"},
		{"readahead", "/sys/class/bdi/0:54/read_ahead_kb", "128", "960"},
	}
	if diff := cmp.Diff(wantRA, got); diff != "" {
		t.Errorf("read-ahead actions (-want +got):\n%s", diff)
	}

	writeFile(t, root, "sys/devices/virtual/bdi/0:53/read_ahead_kb", "2048\n")
	inv.Mounts[0].ReadAheadKB = intp(2048)
	p, err = NewPlan(root, inv, want, defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Actions {
		if a.Device == "0:53" {
			t.Errorf("a read-ahead of 2048 KiB set on purpose is changed: %+v", a)
		}
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "0:53 (/mnt/data, /srv/data copy) left at 2048 KiB") {
		t.Errorf("no note on the kept value: %q", p.Notes)
	}
}

// A mount missing from /etc/fstab gets a line to add by hand, built from mountinfo's
// source; a server that is not a host name or an address (a source holding a field and an
// option) gets no line and no mount command, only a note.
func TestPlanFstabLineRefusesBadServer(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	fstab := strings.Replace(fixtureFstab, "192.168.122.72:/export/tools\t/mnt/tools\tnfs\tsoft,rsize=65536,wsize=65536\t0\t0\n", "", 1)
	if err := os.WriteFile(root.Path("etc/fstab"), []byte(fstab), 0o644); err != nil {
		t.Fatal(err)
	}
	inv := fixtureInventory()
	for i := range inv.Mounts {
		if inv.Mounts[i].Device == "0:54" {
			inv.Mounts[i].Server = "srv:/x /mnt nfs sec=none 0 0\nsrv"
		}
	}
	want := fixtureWant()
	resolve := want.Resolve
	want.Resolve = func(m *inventory.Mount) Desired {
		c := *m
		c.Server = c.ServerAddr
		return resolve(&c)
	}
	opts := defaultOptions()
	opts.Fstab = true
	p, err := NewPlan(root, inv, want, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Remounts) != 1 || len(p.Remounts[0].Mounts) != 1 {
		t.Fatalf("remount groups = %+v, want one (tools)", p.Remounts)
	}
	if r := p.Remounts[0].Mounts[0]; len(r.FstabLines) != 0 || len(r.Commands) != 0 {
		t.Errorf("fstab lines %q, commands %q: want none for a bad server", r.FstabLines, r.Commands)
	}
	if !containsNote(p, "is not a host name or an IP address") {
		t.Errorf("no note about the server: %q", p.Notes)
	}
}

// A mount missing from /etc/fstab gets a line to add by hand that keeps the options it
// was mounted with (mountinfo's, less the addresses the kernel found), with the changes.
func TestPlanFstabLineKeepsMountOptions(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	fstab := strings.Replace(fixtureFstab, "192.168.122.72:/export/tools\t/mnt/tools\tnfs\tsoft,rsize=65536,wsize=65536\t0\t0\n", "", 1)
	if err := os.WriteFile(root.Path("etc/fstab"), []byte(fstab), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(root, fixtureInventory(), fixtureWant(), defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Remounts) != 1 || len(p.Remounts[0].Mounts) != 1 {
		t.Fatalf("remount groups = %+v, want one (tools)", p.Remounts)
	}
	want := []string{"192.168.122.72:/export/tools /mnt/tools nfs proto=tcp,retrans=2,timeo=600,vers=3,rsize=1048576,wsize=1048576,hard 0 0"}
	if diff := cmp.Diff(want, p.Remounts[0].Mounts[0].FstabLines); diff != "" {
		t.Errorf("fstab lines (-want +got):\n%s", diff)
	}
}
