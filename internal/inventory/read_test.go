package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moby/sys/mountinfo"

	"github.com/nfstune/nfstune/internal/hostfs"
)

func intp(v int) *int { return &v }

func boolp(v bool) *bool { return &v }

func TestReadMixed(t *testing.T) {
	t.Parallel()
	inv, err := Read(hostfs.Root("testdata/mixed"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantMounts := []Mount{
		{
			Device: "0:53", MountPoints: []string{"/mnt/share1", "/srv/projects"},
			Server: "nfsacct01.file.core.windows.net", ServerAddr: "10.1.0.4", Export: "/nfsacct01/share1",
			FSType: "nfs4", Version: "4.1", ReadAheadKB: intp(128), NConnect: 4, Connections: 4,
			RSize: 1048576, WSize: 1048576, Backend: "azure-files",
			Requested: &Requested{
				Source:  "/etc/nfsmount.conf:4, /etc/fstab:3",
				Options: map[string]string{"vers": "4.1", "nconnect": "4", "_netdev": "", "nofail": "", "hard": "", "timeo": "600"},
			},
			ClientGroup: "tcp://10.1.0.4/v4.1", TransportSecurity: "none",
		},
		{
			Device: "0:54", MountPoints: []string{"/mnt/with space"},
			Server: "nfsacct01.file.core.windows.net", ServerAddr: "10.1.0.4", Export: "/nfsacct01/share2",
			FSType: "nfs4", Version: "4.1", ReadAheadKB: intp(128), NConnect: 4, Connections: 4,
			RSize: 1048576, WSize: 1048576, Backend: "azure-files",
			Requested: &Requested{
				Source:  "/etc/nfsmount.conf:4, /etc/fstab:4",
				Options: map[string]string{"vers": "4.1", "nconnect": "8", "rsize": "1048576", "_netdev": "", "hard": "", "timeo": "600"},
			},
			ClientGroup: "tcp://10.1.0.4/v4.1", TransportSecurity: "none",
		},
		{
			Device: "0:60", MountPoints: []string{"/tools"},
			Server: "10.0.0.6", ServerAddr: "10.0.0.6", Export: "/srv/tools",
			FSType: "nfs", Version: "3", ReadAheadKB: intp(15360), Connections: 1,
			RSize: 65536, WSize: 65536, Backend: "generic",
			Requested: &Requested{
				Source: "/etc/nfsmount.conf:4, /etc/nfsmount.conf:9, /etc/fstab:5",
				Options: map[string]string{"ro": "", "vers": "3", "nocto": "", "actimeo": "600", "hard": "", "timeo": "600",
					"rsize": "65536", "wsize": "65536", "proto": "tcp"},
			},
			ClientGroup: "tcp://10.0.0.6/v3", TransportSecurity: "none",
		},
		{
			Device: "0:61", MountPoints: []string{"/efs"},
			Server: "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", ServerAddr: "172.31.5.5", Export: "/",
			FSType: "nfs4", Version: "4.1", Connections: 1, RSize: 1048576, WSize: 1048576, Backend: "aws-efs",
			Requested: &Requested{
				Source:  "/etc/nfsmount.conf:4, /etc/nfsmount.conf:14",
				Options: map[string]string{"hard": "", "timeo": "600", "nfsvers": "4.1"},
			},
			ClientGroup: "tcp://172.31.5.5/v4.1", TransportSecurity: "none",
		},
		{
			Device: "0:65", MountPoints: []string{"/mnt/v6"},
			Server: "fd00::5", ServerAddr: "fd00::5", Export: "/export",
			FSType: "nfs4", Version: "4.2", ReadAheadKB: intp(1024), Connections: 1, RSize: 524288, WSize: 524288,
			Backend: "generic",
			Requested: &Requested{
				Source:  "/etc/nfsmount.conf:4",
				Options: map[string]string{"hard": "", "timeo": "600"},
			},
			ClientGroup: "tcp6://[fd00::5]/v4.2", TransportSecurity: "none",
		},
	}
	if diff := cmp.Diff(wantMounts, inv.Mounts, cmpopts.IgnoreFields(Mount{}, "Options", "Stats")); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	wantGroups := []Group{
		{Key: "tcp6://[fd00::5]/v4.2", ServerAddr: "fd00::5", Version: "4.2", Proto: "tcp6", Devices: []string{"0:65"}, Connections: 1, SetBy: "0:65"},
		{Key: "tcp://10.0.0.6/v3", ServerAddr: "10.0.0.6", Version: "3", Proto: "tcp", Devices: []string{"0:60"}, Connections: 1, SetBy: "0:60"},
		// The shared client: share1 (older, age 86400 s) fixed nconnect=4; share2 asked for 8.
		{Key: "tcp://10.1.0.4/v4.1", ServerAddr: "10.1.0.4", Version: "4.1", Proto: "tcp", Devices: []string{"0:53", "0:54"}, NConnect: 4, Connections: 4, SetBy: "0:53"},
		{Key: "tcp://172.31.5.5/v4.1", ServerAddr: "172.31.5.5", Version: "4.1", Proto: "tcp", Devices: []string{"0:61"}, Connections: 1, SetBy: "0:61"},
	}
	if diff := cmp.Diff(wantGroups, inv.Groups); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("6.1.0-28-amd64", inv.KernelRelease); diff != "" {
		t.Errorf("kernel release (-want +got):\n%s", diff)
	}
	wantSysctls := map[string]string{
		"sunrpc.tcp_slot_table_entries":     "2",
		"sunrpc.tcp_max_slot_table_entries": "65536",
		"sunrpc.udp_slot_table_entries":     "16",
		"net.core.rmem_max":                 "212992",
		"net.core.wmem_max":                 "212992",
		"net.core.netdev_max_backlog":       "1000",
		"net.ipv4.tcp_rmem":                 "4096 131072 6291456",
		"net.ipv4.tcp_wmem":                 "4096 16384 4194304",
		"net.ipv4.tcp_window_scaling":       "1",
	}
	if diff := cmp.Diff(wantSysctls, inv.Sysctls); diff != "" {
		t.Errorf("sysctls (-want +got):\n%s", diff)
	}
	wantRA := ReadAheadConfig{
		UdevRules: []UdevRule{
			{
				File: "/etc/udev/rules.d/90-efs-readahead.rules", Line: 2,
				Text:        `SUBSYSTEM=="bdi", ACTION=="add",   PROGRAM="/bin/awk -v bdi=$kernel 'BEGIN{ret=1} {if ($4 == bdi) {ret=0}} END{exit ret}' /proc/fs/nfsfs/volumes",   ATTR{read_ahead_kb}="15360"`,
				ReadAheadKB: intp(15360),
			},
			{
				File: "/usr/lib/udev/rules.d/99-nfs.rules", Line: 1,
				Text:    `SUBSYSTEM=="bdi", ACTION=="add", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"`,
				Program: "/usr/libexec/nfsrahead",
			},
		},
		NFSRahead:     map[string]string{"nfs": "15000", "nfs4": "15360", "default": "128"},
		NFSRaheadFrom: map[string]string{"nfs": "/etc/nfs.conf:8", "nfs4": "/etc/nfs.conf.d/50-readahead.conf:1", "default": "/etc/nfs.conf:8"},
	}
	if diff := cmp.Diff(wantRA, inv.ReadAhead); diff != "" {
		t.Errorf("read-ahead config (-want +got):\n%s", diff)
	}
	wantWarnings := []string{
		"reading read_ahead_kb of 0:61: open testdata/mixed/sys/class/bdi/0:61/read_ahead_kb: no such file or directory",
		noSunrpcSysfs, // the tree holds no /sys/kernel/sunrpc
	}
	if diff := cmp.Diff(wantWarnings, inv.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}

	// Effective options: super options merged with the per-mount ones.
	tools := inv.ByMountPoint("/tools")
	if tools == nil {
		t.Fatal("ByMountPoint(/tools) = nil")
	}
	for k, v := range map[string]string{"ro": "", "nocto": "", "vers": "3", "relatime": "", "mountproto": "udp"} {
		if got, ok := tools.Options[k]; !ok || got != v {
			t.Errorf("/tools option %q = %q, %v; want %q", k, got, ok, v)
		}
	}
	if _, ok := tools.Options["rw"]; ok {
		t.Errorf("/tools has both ro and rw")
	}
	// Stats joined through the escaped mount point, with one transport per nconnect.
	sp := inv.ByMountPoint("/mnt/with space")
	if sp == nil || sp.Stats == nil {
		t.Fatalf("/mnt/with space: mount or stats missing: %+v", sp)
	}
	if got := len(sp.Stats.Transports); got != 4 {
		t.Errorf("/mnt/with space transports = %d, want 4", got)
	}
	if sp.Stats.Age != 3600*time.Second || sp.Stats.StatVersion != "1.1" {
		t.Errorf("/mnt/with space stats age %v statvers %q", sp.Stats.Age, sp.Stats.StatVersion)
	}
	if bind := inv.ByMountPoint("/srv/projects"); bind == nil || bind.Device != "0:53" {
		t.Errorf("bind mount /srv/projects: got %+v, want device 0:53", bind)
	}
	if g := inv.Group("tcp://10.1.0.4/v4.1"); g == nil || len(g.Devices) != 2 {
		t.Errorf("Group(tcp://10.1.0.4/v4.1) = %+v", g)
	}
	if inv.Group("nope") != nil || inv.ByMountPoint("/nope") != nil {
		t.Errorf("lookups of unknown keys must return nil")
	}
	if len(inv.NFSServers) != 4 || len(inv.NFSVolumes) != 5 {
		t.Errorf("nfsfs rows: %d servers, %d volumes; want 4, 5", len(inv.NFSServers), len(inv.NFSVolumes))
	}
}

func TestReadBrokenDropsOnlyBadEntries(t *testing.T) {
	t.Parallel()
	inv, err := Read(hostfs.Root("testdata/broken"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings := []string{
		"mountinfo line 15 dropped: parsing '206 21 0:75 garbage-without-separator' failed: not enough fields (4)",
		`mountstats entry for "/mnt/newkernel" dropped: error parsing file: Unrecognized NFS transport stats version: "1.2", protocol: tcp`,
		`mountstats entry for "/scratch" dropped: error parsing file: invalid NFS protocol "local" in stats 1.1 statement: [0 1 0 0 2211 2211 0 6633 0 12 1105 552]`,
		`mountstats entry for "/home" dropped: error parsing file: invalid NFS events stats: [41 7362 3 12 260 147 1250 2 0 3918]`,
		`mountstats entry for "/mnt/ops" dropped: error parsing file: invalid NFS per-operations stats: [READ: 4096 4096 0]`,
		noSunrpcSysfs,
	}
	if diff := cmp.Diff(wantWarnings, inv.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	type row struct {
		Device, MountPoint, Version string
		HasStats                    bool
		Connections                 int
	}
	var got []row
	for _, m := range inv.Mounts {
		got = append(got, row{m.Device, m.MountPoints[0], m.Version, m.Stats != nil, m.Connections})
	}
	want := []row{
		{"0:70", "/data", "4.2", true, 1},
		{"0:71", "/mnt/newkernel", "4.2", false, 1},
		{"0:72", "/scratch", "3", false, 1},
		{"0:73", "/home", "4.1", false, 1},
		{"0:74", "/mnt/ops", "4.2", false, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	// /data and /mnt/ops share a client; only /data has stats, so it is the one known age.
	if g := inv.Group("tcp://10.0.0.5/v4.2"); g == nil || g.SetBy != "0:70" || len(g.Devices) != 2 {
		t.Errorf("group tcp://10.0.0.5/v4.2 = %+v", g)
	}
	wantRA := ReadAheadConfig{Masked: []string{"/usr/lib/udev/rules.d/99-nfs.rules"}}
	if diff := cmp.Diff(wantRA, inv.ReadAhead); diff != "" {
		t.Errorf("read-ahead config (-want +got):\n%s", diff)
	}
}

// TestReadPIDMatchesSelf reads the same files through /proc/<pid> (where procfs parses the
// kernel file directly) and through /proc/self (the tolerant per-entry path) and wants
// the same inventory.
func TestReadPIDMatchesSelf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/mixed")); err != nil {
		t.Fatal(err)
	}
	pidDir := filepath.Join(dir, "proc", "4242")
	if err := os.MkdirAll(filepath.Join(pidDir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"mountinfo", "mountstats"} {
		if err := os.Rename(filepath.Join(dir, "proc", "self", f), filepath.Join(pidDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(dir, "proc", "fs", "nfsfs"), filepath.Join(pidDir, "net", "nfsfs")); err != nil {
		t.Fatal(err)
	}
	self, err := Read(hostfs.Root("testdata/mixed"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := Read(hostfs.Root(dir), ReadOptions{PID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(self, pid, cmpopts.IgnoreFields(Inventory{}, "Warnings")); diff != "" {
		t.Errorf("pid 4242 vs self (-self +pid):\n%s", diff)
	}
	if _, err := Read(hostfs.Root(dir), ReadOptions{}); err == nil {
		t.Errorf("Read without /proc/self/mountinfo: want error")
	}
	if _, err := Read(hostfs.Root(dir), ReadOptions{PID: -1}); err == nil {
		t.Errorf("Read with pid -1: want error")
	}
}

// TestReadNeverTouchesMountPoints lists mount points that would hang or fail if opened: a
// FIFO (open blocks until a writer appears) inside a directory nobody may enter. Read
// must finish and report them, having read nothing but /proc, /sys and /etc.
func TestReadNeverTouchesMountPoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/mixed")); err != nil {
		t.Fatal(err)
	}
	trap := filepath.Join(dir, "trap")
	if err := os.MkdirAll(trap, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(trap, "hung")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The same path under the root and on the real filesystem: neither may be touched.
	mountPoint := fifo
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(mountPoint)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, mountPoint), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(trap, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chmod(trap, 0o755); err != nil {
			t.Error(err)
		}
	})
	for _, f := range []string{"mountinfo", "mountstats"} {
		p := filepath.Join(dir, "proc", "self", f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.ReplaceAll(string(b), " /tools ", " "+mountPoint+" ")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan *Inventory, 1)
	go func() {
		inv, err := Read(hostfs.Root(dir), ReadOptions{})
		if err != nil {
			t.Error(err)
		}
		done <- inv
	}()
	select {
	case inv := <-done:
		if inv == nil {
			return
		}
		m := inv.ByMountPoint(mountPoint)
		if m == nil || m.Device != "0:60" || m.Stats == nil {
			t.Errorf("mount at %s: got %+v, want device 0:60 with stats", mountPoint, m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read blocked: it opened a mount point")
	}
}

// TestReadSkipOperations wants the same inventory without the per-op rows.
func TestReadSkipOperations(t *testing.T) {
	t.Parallel()
	full, err := Read(hostfs.Root("testdata/mixed"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lean, err := Read(hostfs.Root("testdata/mixed"), ReadOptions{SkipOperations: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, lean, cmpopts.IgnoreFields(Stats{}, "Operations")); diff != "" {
		t.Errorf("(-full +lean):\n%s", diff)
	}
	for _, m := range lean.Mounts {
		if m.Stats == nil || len(m.Stats.Operations) != 0 {
			t.Errorf("mount %s: stats %v with operations", m.Device, m.Stats != nil)
		}
	}
	if n := len(full.ByMountPoint("/tools").Stats.Operations); n != 22 {
		t.Errorf("full read: /tools has %d NFSv3 operations, want 22", n)
	}
}

func TestReadKernelReleaseFallback(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if r, w := readKernelRelease(hostfs.Root(root)); r != "" || len(w) != 1 {
		t.Errorf("empty root: release %q, warnings %q", r, w)
	}
	p := filepath.Join(root, "proc", "sys", "kernel")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "osrelease"), []byte("6.1.0-28-amd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, w := readKernelRelease(hostfs.Root(root)); r != "6.1.0-28-amd64" || len(w) != 0 {
		t.Errorf("osrelease only: release %q, warnings %q", r, w)
	}
}

// TestStatsByDevice checks the pairing of mountinfo lines with mountstats entries by order:
// stacked superblocks get their own entries, and a mount that appeared or went between the
// two reads costs only that mount.
func TestStatsByDevice(t *testing.T) {
	t.Parallel()
	info := func(minor int, mp, fstype string) *mountinfo.Info {
		return &mountinfo.Info{Major: 0, Minor: minor, Mountpoint: mp, FSType: fstype}
	}
	entry := func(mp, fstype string, age time.Duration) mountStatsEntry {
		return mountStatsEntry{MountPoint: mp, FSType: fstype, Stats: &Stats{Age: age}}
	}
	tests := []struct {
		name    string
		infos   []*mountinfo.Info
		entries []mountStatsEntry
		want    map[string]time.Duration // device -> age of the entry paired with it
	}{
		{
			name:    "stacked on one mount point",
			infos:   []*mountinfo.Info{info(50, "/a", "nfs"), info(51, "/a", "nfs4"), info(52, "/a", "nfs4")},
			entries: []mountStatsEntry{entry("/a", "nfs", 1), entry("/a", "nfs4", 2), entry("/a", "nfs4", 3)},
			want:    map[string]time.Duration{"0:50": 1, "0:51": 2, "0:52": 3},
		},
		{
			name:    "one superblock on two mount points",
			infos:   []*mountinfo.Info{info(50, "/a", "nfs4"), info(50, "/b", "nfs4"), info(51, "/c", "nfs4")},
			entries: []mountStatsEntry{entry("/a", "nfs4", 1), entry("/b", "nfs4", 1), entry("/c", "nfs4", 2)},
			want:    map[string]time.Duration{"0:50": 1, "0:51": 2},
		},
		{
			name:    "unmounted between the reads",
			infos:   []*mountinfo.Info{info(50, "/a", "nfs4"), info(51, "/a", "nfs4"), info(52, "/b", "nfs4")},
			entries: []mountStatsEntry{entry("/a", "nfs4", 1), entry("/b", "nfs4", 3)},
			want:    map[string]time.Duration{"0:50": 1, "0:52": 3},
		},
		{
			name:    "mounted between the reads",
			infos:   []*mountinfo.Info{info(50, "/a", "nfs4"), info(52, "/b", "nfs4")},
			entries: []mountStatsEntry{entry("/a", "nfs4", 1), entry("/new", "nfs4", 2), entry("/a", "nfs4", 4), entry("/b", "nfs4", 3)},
			want:    map[string]time.Duration{"0:50": 1, "0:52": 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]time.Duration{}
			for dev, e := range statsByDevice(tt.infos, tt.entries) {
				got[dev] = e.Stats.Age
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pairs (-want +got):\n%s", diff)
			}
		})
	}
	if got := statsByDevice([]*mountinfo.Info{info(50, "/a", "nfs4")}, nil); got != nil {
		t.Errorf("unreadable mountstats: got %v, want nil", got)
	}
}

// stackedRoot is a tree recorded from the lab kernel with two superblocks stacked on one
// mount point: NFSv3 below (1 MiB written), NFSv4.1 with nconnect=2 above (3 MiB written).
const stackedRoot = "testdata/lab-6.1.0-50-amd64-stacked"

// TestReadLabStacked wants each of two superblocks stacked on one mount point to carry its
// own mountstats entry, and each client group its own mount.
func TestReadLabStacked(t *testing.T) {
	t.Parallel()
	inv, err := Read(hostfs.Root(stackedRoot), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Warnings) > 0 {
		t.Errorf("warnings: %q", inv.Warnings)
	}
	type figures struct {
		Device, Version, ClientGroup string
		MountPoints                  []string
		Connections                  int
		Age                          time.Duration
		WriteTotal, Sends            uint64
	}
	var got []figures
	for _, m := range inv.Mounts {
		f := figures{Device: m.Device, Version: m.Version, ClientGroup: m.ClientGroup, MountPoints: m.MountPoints, Connections: m.Connections}
		if m.Stats != nil {
			f.Age, f.WriteTotal = m.Stats.Age, m.Stats.Bytes.WriteTotal
			for _, x := range m.Stats.Transports {
				f.Sends += x.Sends
			}
		}
		got = append(got, f)
	}
	want := []figures{
		{Device: "0:63", Version: "3", ClientGroup: "tcp://127.0.0.1/v3", MountPoints: []string{"/mnt/lab/stacked"},
			Connections: 1, Age: 33 * time.Second, WriteTotal: 1 << 20, Sends: 16},
		{Device: "0:65", Version: "4.1", ClientGroup: "tcp://127.0.0.2/v4.1", MountPoints: []string{"/mnt/lab/stacked"},
			Connections: 2, Age: 19 * time.Second, WriteTotal: 3 << 20, Sends: 24 + 16},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	var groups []string
	for _, g := range inv.Groups {
		groups = append(groups, g.Key+" "+strings.Join(g.Devices, ",")+" "+g.SetBy)
	}
	if diff := cmp.Diff([]string{"tcp://127.0.0.1/v3 0:63 0:63", "tcp://127.0.0.2/v4.1 0:65 0:65"}, groups); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}

// TestReadStatisticsOnly: the verdicts' read has every superblock's statistics and
// read-ahead as the full read has them, and reads none of the configuration.
func TestReadStatisticsOnly(t *testing.T) {
	t.Parallel()
	root := hostfs.Root("testdata/mixed")
	full, err := Read(root, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := Read(root, ReadOptions{StatisticsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Mounts) != len(full.Mounts) {
		t.Fatalf("%d mounts, the full read has %d", len(stats.Mounts), len(full.Mounts))
	}
	for i, m := range stats.Mounts {
		f := full.Mounts[i]
		if m.Device != f.Device || m.RSize != f.RSize || !reflect.DeepEqual(m.ReadAheadKB, f.ReadAheadKB) || !reflect.DeepEqual(m.Stats, f.Stats) {
			t.Errorf("mount %s: device, rsize, read-ahead or statistics differ from the full read's", f.Device)
		}
		if f.Stats == nil {
			t.Errorf("mount %s: the fixture has no statistics to compare", f.Device)
		}
		if m.Requested != nil {
			t.Errorf("mount %s: fstab and nfsmount.conf read: %+v", m.Device, m.Requested)
		}
	}
	if stats.MountDefaults != nil || stats.NFSServers != nil || stats.Transports != nil || len(stats.Sysctls) != 0 ||
		!reflect.DeepEqual(stats.ReadAhead, ReadAheadConfig{}) || stats.KernelRelease != "" {
		t.Errorf("configuration read: defaults %v, servers %v, transports %v, sysctls %v, read-ahead rules %+v, kernel %q",
			stats.MountDefaults, stats.NFSServers, stats.Transports, stats.Sysctls, stats.ReadAhead, stats.KernelRelease)
	}
}
