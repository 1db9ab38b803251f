package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TestReadEFSProxy reads a host with two EFS file systems mounted by efs-utils through
// 127.0.0.1 (efs-proxy with TLS, and stunnel mode) and one loopback forwarder no helper
// owns: each is attributed from the state files, and none shares a client group.
func TestReadEFSProxy(t *testing.T) {
	t.Parallel()
	inv, err := Read(hostfs.Root("testdata/synthetic-efs-proxy"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings: %q", inv.Warnings)
	}
	want := map[string]struct {
		backend string
		proxy   *Proxy
		group   string
	}{
		"0:60": {"aws-efs", &Proxy{
			Kind: ProxyEFS, Port: 20049, TLS: boolp(true), FileSystemID: "fs-0123456789abcdef0",
			Upstream:    "us-east-1a.fs-0123456789abcdef0.efs.us-east-1.amazonaws.com",
			State:       "/var/run/efs/fs-0123456789abcdef0.mnt.efs.20049",
			ReadAheadKB: 15360,
		}, "tcp://127.0.0.1:20049/v4.1"},
		"0:61": {"aws-efs", &Proxy{
			Kind: ProxyEFSStunnel, Port: 20050, TLS: boolp(true), FileSystemID: "fs-0fedcba987654321f",
			Upstream:    "fs-0fedcba987654321f.efs.eu-west-1.amazonaws.com",
			State:       "/var/run/efs/fs-0fedcba987654321f.mnt.efs-legacy.20050",
			ReadAheadKB: 3840, // 15 x rsize 256 KiB, as efs-utils writes it
		}, "tcp://127.0.0.1:20050/v4.1"},
		"0:62": {"generic", &Proxy{Kind: ProxyLoopback, Port: 30049}, "tcp://127.0.0.1:30049/v4.1"},
	}
	if len(inv.Mounts) != len(want) {
		t.Fatalf("%d mounts, want %d", len(inv.Mounts), len(want))
	}
	for _, m := range inv.Mounts {
		w, ok := want[m.Device]
		if !ok {
			t.Errorf("unexpected mount %s", m.Device)
			continue
		}
		if m.Backend != w.backend {
			t.Errorf("%s: backend %q, want %q", m.Device, m.Backend, w.backend)
		}
		if diff := cmp.Diff(w.proxy, m.Proxy); diff != "" {
			t.Errorf("%s: proxy (-want +got):\n%s", m.Device, diff)
		}
		if m.ClientGroup != w.group {
			t.Errorf("%s: client group %q, want %q", m.Device, m.ClientGroup, w.group)
		}
		if m.Server != "127.0.0.1" || m.ServerAddr != "127.0.0.1" {
			t.Errorf("%s: server %q addr %q: the kernel's view must stay", m.Device, m.Server, m.ServerAddr)
		}
	}
	if len(inv.Groups) != 3 {
		t.Errorf("%d client groups, want 3 (one per port): %+v", len(inv.Groups), inv.Groups)
	}
	for _, tr := range inv.Transports {
		if tr.DstPort == 0 {
			t.Errorf("%s: dst_port not read", tr.Name)
		}
	}
}

// TestReadAZNFSStunnel reads Azure Files shares mounted with encryption in transit: AZNFS
// runs one stunnel per storage account, so the two shares of nfsacct01 share a port and
// a client group, and nfsacct02 has its own.
func TestReadAZNFSStunnel(t *testing.T) {
	t.Parallel()
	inv, err := Read(hostfs.Root("testdata/synthetic-aznfs-stunnel"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings: %q", inv.Warnings)
	}
	upstream := map[string]string{
		"0:70": "nfsacct01.file.core.windows.net",
		"0:71": "nfsacct01.file.core.windows.net",
		"0:72": "nfsacct02.file.core.windows.net",
	}
	for _, m := range inv.Mounts {
		if m.Backend != "azure-files" {
			t.Errorf("%s: backend %q, want azure-files", m.Device, m.Backend)
		}
		if m.Proxy == nil || m.Proxy.Kind != ProxyAZNFS || m.Proxy.Upstream != upstream[m.Device] || m.Proxy.TLS == nil || !*m.Proxy.TLS {
			t.Errorf("%s: proxy %+v, want aznfs-stunnel to %s over TLS", m.Device, m.Proxy, upstream[m.Device])
		}
		if m.Proxy != nil && m.Proxy.ReadAheadKB != 0 {
			t.Errorf("%s: helper read-ahead %d, want 0 (AZNFS' value is not read)", m.Device, m.Proxy.ReadAheadKB)
		}
	}
	if g := inv.Group("tcp://127.0.0.1:20049/v4.1"); g == nil || len(g.Devices) != 2 {
		t.Errorf("group of nfsacct01 = %+v, want devices 0:70 and 0:71", g)
	}
	if g := inv.Group("tcp://127.0.0.1:20050/v4.1"); g == nil || len(g.Devices) != 1 {
		t.Errorf("group of nfsacct02 = %+v, want device 0:72", g)
	}
}

// TestLoopbackNotProxied checks that a server on 127.0.0.1 at the NFS port (the lab's, any
// test server) is not taken for a proxy.
func TestLoopbackNotProxied(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"81 77 0:65 / /mnt/a rw - nfs4 127.0.0.1:/tmp rw,vers=4.1,rsize=262144,wsize=262144,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=127.0.0.1,addr=127.0.0.1",
		"81 77 0:65 / /mnt/a rw - nfs4 127.0.0.1:/tmp rw,vers=4.1,hard,proto=tcp,port=2049,addr=127.0.0.1",
		"81 77 0:65 / /mnt/a rw - nfs4 10.0.0.5:/tmp rw,vers=4.1,hard,proto=tcp,port=20049,addr=10.0.0.5",
	} {
		ms, _ := ParseMountInfo([]byte(line + "\n"))
		if len(ms) != 1 || ms[0].Proxy != nil {
			t.Errorf("%s: proxy %+v, want none", line, ms[0].Proxy)
		}
	}
	ms, _ := ParseMountInfo([]byte("81 77 0:65 / /mnt/a rw - nfs4 [::1]:/ rw,vers=4.1,hard,proto=tcp6,port=20100,addr=::1\n"))
	if len(ms) != 1 || ms[0].Proxy == nil || ms[0].Proxy.Port != 20100 {
		t.Errorf("::1 port 20100: proxy %+v, want loopback on 20100", ms[0].Proxy)
	}
}

// TestAttributeProxiesLimits checks what the state reader refuses: a state file behind a
// symbolic link, one larger than the cap, and a stale file on the same port whose mount
// point is not the mount's (two candidates: neither is taken).
func TestAttributeProxiesLimits(t *testing.T) {
	t.Parallel()
	mount := func(mp string) []Mount {
		ms, _ := ParseMountInfo([]byte("101 22 0:60 / " + mp + " rw - nfs4 127.0.0.1:/ rw,vers=4.1,rsize=1048576,hard,proto=tcp,port=20049,addr=127.0.0.1\n"))
		return ms
	}
	write := func(t *testing.T, root, name, text string) {
		t.Helper()
		p := filepath.Join(root, "run", "efs", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := `{"cmd": ["/usr/bin/efs-proxy", "x"], "mountpoint": "/mnt/efs"}`

	t.Run("symlink", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		write(t, root, "real", state)
		if err := os.Symlink("real", filepath.Join(root, "run", "efs", "fs-01234567.mnt.efs.20049")); err != nil {
			t.Fatal(err)
		}
		ms := mount("/mnt/efs")
		w := AttributeProxies(hostfs.Root(root), ms)
		if ms[0].Proxy.Kind != ProxyLoopback || len(w) != 1 {
			t.Errorf("proxy %+v, warnings %q: want the link refused with a warning", ms[0].Proxy, w)
		}
	})
	t.Run("too large", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		big := make([]byte, maxStateFile+1)
		for i := range big {
			big[i] = ' '
		}
		write(t, root, "fs-01234567.mnt.efs.20049", state+string(big))
		ms := mount("/mnt/efs")
		w := AttributeProxies(hostfs.Root(root), ms)
		if ms[0].Proxy.Kind != ProxyLoopback || len(w) != 1 {
			t.Errorf("proxy %+v, warnings %q: want the file refused with a warning", ms[0].Proxy, w)
		}
	})
	t.Run("stale", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		write(t, root, "fs-01234567.mnt.old.20049", `{"cmd": ["/usr/bin/efs-proxy"], "mountpoint": "/mnt/old"}`)
		write(t, root, "fs-89abcdef.mnt.older.20049", `{"cmd": ["/usr/bin/efs-proxy"], "mountpoint": "/mnt/older"}`)
		ms := mount("/mnt/efs")
		AttributeProxies(hostfs.Root(root), ms)
		if ms[0].Proxy.Kind != ProxyLoopback || ms[0].Backend != "generic" {
			t.Errorf("proxy %+v backend %s: two stale files must not attribute the mount", ms[0].Proxy, ms[0].Backend)
		}
		write(t, root, "fs-0badcafe.mnt.efs.20049", `{"cmd": ["/usr/bin/efs-proxy"], "mountpoint": "/mnt/efs"}`)
		AttributeProxies(hostfs.Root(root), ms)
		if ms[0].Proxy.FileSystemID != "fs-0badcafe" || ms[0].Backend != "aws-efs" {
			t.Errorf("proxy %+v backend %s: want the file of this mount point, fs-0badcafe", ms[0].Proxy, ms[0].Backend)
		}
	})
	t.Run("in progress", func(t *testing.T) {
		t.Parallel()
		// What the udev helper sees: the bdi appears while mount.nfs4 runs, before
		// efs-utils renames "~<name>" to "<name>".
		root := t.TempDir()
		write(t, root, "~fs-01234567.mnt.efs.20049", state)
		ms := mount("/mnt/efs")
		AttributeProxies(hostfs.Root(root), ms)
		if ms[0].Proxy.Kind != ProxyEFS || ms[0].Proxy.FileSystemID != "fs-01234567" || ms[0].Proxy.ReadAheadKB != 15360 {
			t.Errorf("proxy %+v: want efs-proxy to fs-01234567 with efs-utils' 15360 KiB", ms[0].Proxy)
		}
	})
	t.Run("readahead off", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		write(t, root, "fs-01234567.mnt.efs.20049", state)
		conf := filepath.Join(root, "etc", "amazon", "efs", "efs-utils.conf")
		if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conf, []byte("[mount]\noptimize_readahead = false\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ms := mount("/mnt/efs")
		AttributeProxies(hostfs.Root(root), ms)
		if ms[0].Proxy.Kind != ProxyEFS || ms[0].Proxy.ReadAheadKB != 0 {
			t.Errorf("proxy %+v: want efs-proxy with no helper read-ahead (optimize_readahead = false)", ms[0].Proxy)
		}
	})
}

// TestRemountSpec: a proxied mount is mounted again through its helper, which picks the
// port itself; a forwarder no helper owns needs its port= back.
func TestRemountSpec(t *testing.T) {
	t.Parallel()
	efs, err := Read(hostfs.Root("testdata/synthetic-efs-proxy"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	az, err := Read(hostfs.Root("testdata/synthetic-aznfs-stunnel"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		m    *Mount
		want MountSpec
	}{
		{&efs.Mounts[0], MountSpec{Server: "fs-0123456789abcdef0", Export: "/", FSType: "efs", Set: map[string]string{"tls": ""}, Drop: []string{"port"}}},
		{&efs.Mounts[1], MountSpec{Server: "fs-0fedcba987654321f", Export: "/", FSType: "efs", Set: map[string]string{"tls": "", "stunnel": ""}, Drop: []string{"port"}}},
		{&efs.Mounts[2], MountSpec{Server: "127.0.0.1", Export: "/data", FSType: "nfs4", Set: map[string]string{"port": "30049"}}},
		{&az.Mounts[0], MountSpec{Server: "nfsacct01.file.core.windows.net", Export: "/nfsacct01/share1", FSType: "aznfs", Set: map[string]string{}, Drop: []string{"port"}}},
	} {
		if diff := cmp.Diff(tt.want, RemountSpec(tt.m)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.m.Device, diff)
		}
	}
	if !IsMountType(&efs.Mounts[0], "efs") || IsMountType(&efs.Mounts[0], "aznfs") || !IsMountType(&az.Mounts[0], "aznfs") || IsMountType(&efs.Mounts[2], "efs") {
		t.Error("IsMountType does not follow the helper")
	}
}

// TestClientGroupFromNFSFS: a superblock whose nfsfs row names another client than its
// port= (NFSv4.1 trunking detection gave it an existing client of the same server) is in
// that client's group: it shares that client's transports and nconnect.
func TestClientGroupFromNFSFS(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS("testdata/synthetic-efs-proxy")); err != nil {
		t.Fatal(err)
	}
	vols := filepath.Join(root, "proc", "fs", "nfsfs", "volumes")
	b, err := os.ReadFile(vols)
	if err != nil {
		t.Fatal(err)
	}
	// 0:62 asked port=30049 (0x7561) but uses the client on 2049 (0x801).
	edited := strings.Replace(string(b), "v4 7f000001 7561 0:62", "v4 7f000001  801 0:62", 1)
	if edited == string(b) {
		t.Fatal("fixture row of 0:62 not found")
	}
	if err := os.WriteFile(vols, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := Read(hostfs.Root(root), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range inv.Mounts {
		got[m.Device] = m.ClientGroup
	}
	want := map[string]string{
		"0:60": "tcp://127.0.0.1:20049/v4.1",
		"0:61": "tcp://127.0.0.1:20050/v4.1",
		"0:62": "tcp://127.0.0.1/v4.1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("client groups (-want +got):\n%s", diff)
	}
	if m := inv.ByMountPoint("/mnt/forwarded"); m == nil || m.Proxy == nil || m.Proxy.Port != 30049 || m.Proxy.BypassPort != 2049 {
		t.Errorf("want the proxy's port 30049 and the client's 2049 as bypass: %+v", m.Proxy)
	}
	for _, mp := range []string{"/mnt/efs", "/mnt/efs-legacy"} {
		if m := inv.ByMountPoint(mp); m.Proxy.BypassPort != 0 {
			t.Errorf("%s: bypass port %d on a mount that uses its proxy", mp, m.Proxy.BypassPort)
		}
	}
}
