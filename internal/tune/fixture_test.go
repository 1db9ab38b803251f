package tune

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// The fixture root is laid out like a Debian 12 (6.1) NFS client with two NFS superblocks,
// a bind mount of the first, and a local disk. The file formats are the kernel's:
// /proc/fs/nfsfs/volumes from fs/nfs/client.c, mountinfo from proc_pid_mountinfo(5), and bdi
// directories that are symlinks into /sys/devices/virtual/bdi as in sysfs.

const fixtureVolumes = `NV SERVER   PORT DEV          FSID                              FSC
v4 c0a87a47  801 0:53         c10a1819257f4d4d:a0d6372e2f44b4e3 no
v3 c0a87a48  801 0:54         2a:0                              no
`

const fixtureMountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
52 22 0:53 / /mnt/data rw,relatime shared:45 - nfs4 192.168.122.71:/export/data rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=192.168.122.1,local_lock=none,addr=192.168.122.71
53 22 0:53 / /srv/data\040copy rw,relatime shared:45 - nfs4 192.168.122.71:/export/data rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=192.168.122.1,local_lock=none,addr=192.168.122.71
54 22 0:54 / /mnt/tools rw,relatime shared:46 - nfs 192.168.122.72:/export/tools rw,vers=3,rsize=65536,wsize=65536,namlen=255,soft,proto=tcp,timeo=600,retrans=2,sec=sys,mountaddr=192.168.122.72,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,addr=192.168.122.72
`

const fixtureFstab = `# /etc/fstab: static file system information.
UUID=0b4e2c1a-8f0a-4c4e-9d8e-1f2a3b4c5d6e /               ext4    errors=remount-ro 0       1
192.168.122.71:/export/data  /mnt/data   nfs4  rw,hard,vers=4.2,_netdev  0 0
# tools share, keep soft for now
192.168.122.72:/export/tools	/mnt/tools	nfs	soft,rsize=65536,wsize=65536	0	0
this line is not understood by anyone
`

// fixtureRoot writes the fixture tree and returns its root.
func fixtureRoot(t *testing.T) hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"proc/fs/nfsfs/volumes":                      "" + fixtureVolumes,
		"proc/self/mountinfo":                        fixtureMountinfo,
		"proc/sys/sunrpc/tcp_slot_table_entries":     "2\n",
		"proc/sys/net/core/rmem_max":                 "212992\n",
		"proc/sys/net/core/wmem_max":                 "16777216\n",
		"proc/sys/net/ipv4/tcp_rmem":                 "4096\t131072\t6291456\n",
		"sys/devices/virtual/bdi/0:53/read_ahead_kb": "128\n",
		"sys/devices/virtual/bdi/0:54/read_ahead_kb": "128\n",
		"sys/devices/virtual/bdi/8:0/read_ahead_kb":  "128\n",
		"etc/fstab":                         fixtureFstab,
		"usr/lib/udev/rules.d/99-nfs.rules": `SUBSYSTEM=="bdi", ACTION=="add", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"` + "\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "sys/class/bdi"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"0:53", "0:54", "8:0"} {
		if err := os.Symlink("../../devices/virtual/bdi/"+dev, filepath.Join(dir, "sys/class/bdi", dev)); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.Root(dir)
}

func intp(n int) *int { return &n }

// fixtureInventory is what inventory.Read reports for the fixture root.
func fixtureInventory() *inventory.Inventory {
	return &inventory.Inventory{
		Mounts: []inventory.Mount{
			{
				Device: "0:53", MountPoints: []string{"/mnt/data", "/srv/data copy"},
				Server: "192.168.122.71", ServerAddr: "192.168.122.71", Export: "/export/data",
				FSType: "nfs4", Version: "4.2", ReadAheadKB: intp(128), RSize: 1048576, WSize: 1048576,
				Options:     map[string]string{"vers": "4.2", "rsize": "1048576", "wsize": "1048576", "hard": "", "proto": "tcp", "timeo": "600", "retrans": "2", "addr": "192.168.122.71"},
				ClientGroup: "192.168.122.71:2049/v4.2/tcp",
			},
			{
				Device: "0:54", MountPoints: []string{"/mnt/tools"},
				Server: "192.168.122.72", ServerAddr: "192.168.122.72", Export: "/export/tools",
				FSType: "nfs", Version: "3", ReadAheadKB: intp(128), RSize: 65536, WSize: 65536,
				Options:     map[string]string{"vers": "3", "rsize": "65536", "wsize": "65536", "soft": "", "proto": "tcp", "timeo": "600", "retrans": "2", "addr": "192.168.122.72"},
				ClientGroup: "192.168.122.72:2049/v3/tcp",
			},
		},
		ReadAhead: inventory.ReadAheadConfig{UdevRules: []inventory.UdevRule{{
			File: "/usr/lib/udev/rules.d/99-nfs.rules", Line: 1, Program: "/usr/libexec/nfsrahead",
			Text: `SUBSYSTEM=="bdi", ACTION=="add", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"`,
		}}},
	}
}

func boolp(b bool) *bool { return &b }

// fixtureWant is a policy with two rules: the data export gets 16384 KiB of read-ahead and
// 1 MiB transfers, the tools server 1024 KiB and hard mounts.
func fixtureWant() Want {
	return Want{
		Resolve: func(m *inventory.Mount) Desired {
			switch {
			case m.Server == "192.168.122.71" || strings.HasPrefix(m.Export, "/export/data"):
				return Desired{Mode: policy.ModeEnforce, Rule: "config rule 1", Profile: policy.Profile{
					Backend: "generic", Workload: "sequential-read", ReadAheadKB: 16384,
					Mount: policy.MountOptions{Vers: "4.2", RSize: 1048576, Hard: boolp(true)},
				}}
			case m.Server == "192.168.122.72":
				return Desired{Mode: policy.ModeEnforce, Rule: "config rule 2", Profile: policy.Profile{
					Backend: "generic", Workload: "static-tools", ReadAheadKB: 1024,
					Mount: policy.MountOptions{RSize: 1048576, WSize: 1048576, Hard: boolp(true)},
				}}
			}
			return Desired{Mode: policy.ModeEnforce, Profile: policy.Profile{Backend: "generic", Workload: "general", ReadAheadKB: 4096}}
		},
		Sysctls: map[string]int64{
			"sunrpc.tcp_slot_table_entries": 128,
			"net.core.rmem_max":             16777216,
			"net.core.wmem_max":             4194304, // below the host's value: never lowered
			"net.ipv4.tcp_rmem":             16777216,
		},
	}
}

// snapshot reads every regular file below root (following no symlinks), for before/after
// comparisons.
func snapshot(t *testing.T, root hostfs.Root) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(string(root), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(string(root), p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
			return nil
		}
		if !d.Type().IsRegular() {
			out[rel] = d.Type().String() // a FIFO: reading it would wait for a writer
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		out[rel] = fi.Mode().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readFixture(t *testing.T, root hostfs.Root, p string) string {
	t.Helper()
	b, err := os.ReadFile(root.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func defaultOptions() Options {
	return Options{Persist: PersistUdev, UdevCommand: "/usr/local/bin/nfstune udev-readahead"}
}
