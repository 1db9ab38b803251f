package inventory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// The host's mount table: an NFS superblock 0:52 at /mnt/data, a bind of it at
// /srv/projects, a local filesystem mounted below /mnt/data, and 0:60 (healthy, not
// asked for) at /mnt/other.
const hostMountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:52 / /mnt/data rw,relatime shared:10 - nfs4 server:/data rw,vers=4.1
41 22 0:52 /projects /srv/projects rw,relatime shared:10 - nfs4 server:/data rw,vers=4.1
42 40 0:30 / /mnt/data/scratch rw,relatime - tmpfs tmpfs rw
43 22 0:60 / /mnt/other rw,relatime - nfs4 server:/other rw,vers=4.1
44 22 0:53 / /mnt/with\040space rw,relatime - nfs server:/v3 rw,vers=3
`

// A container's mount table: the same superblock at /data under the container's root.
const containerMountinfo = `900 880 0:70 / / rw,relatime - overlay overlay rw
901 900 0:52 / /data rw,relatime - nfs4 server:/data rw,vers=4.1
`

// A process chrooted into /srv/jail sees its mounts below the new root.
const jailMountinfo = `22 1 8:1 /srv/jail / rw,relatime shared:1 - ext4 /dev/sda1 rw
45 22 0:52 / /mnt rw,relatime shared:10 - nfs4 server:/data rw,vers=4.1
`

const (
	hostNS      = "mnt:[4026531841]"
	containerNS = "mnt:[4026532900]"
	podUID      = "8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70"
	containerID = "4b825dc642cb6eb9a060e54bf8d69288fbee4904a1b2c3d4e5f60718293a4b5c"
)

// fakeProc is one process of a fixture /proc.
type fakeProc struct {
	pid           int
	ppid          int // 1 when 0
	comm, state   string
	ns, mountinfo string
	cwd, root     string
	fdMounts      []int    // mnt_id of each open fd
	threads       []string // states of the other threads
	cgroup        string
}

// writeProc lays p out under root/proc/<pid> as the kernel shows it.
func writeProc(t *testing.T, root string, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, "proc", fmt.Sprint(p.pid))
	file := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(name, target string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	ppid := p.ppid
	if ppid == 0 {
		ppid = 1
	}
	stat := func(pid int, state string) string {
		return fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 4000 5619712 229 18446744073709551615\n", pid, p.comm, state, ppid, pid, pid)
	}
	file("stat", stat(p.pid, p.state))
	file(fmt.Sprintf("task/%d/stat", p.pid), stat(p.pid, p.state))
	for i, s := range p.threads {
		file(fmt.Sprintf("task/%d/stat", p.pid+1+i), stat(p.pid+1+i, s))
	}
	file("mountinfo", p.mountinfo)
	link("ns/mnt", p.ns)
	link("cwd", p.cwd)
	link("root", p.root)
	file("cgroup", p.cgroup)
	if err := os.MkdirAll(filepath.Join(dir, "fdinfo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for fd, id := range p.fdMounts {
		file(fmt.Sprintf("fdinfo/%d", fd), fmt.Sprintf("pos:\t0\nflags:\t0100000\nmnt_id:\t%d\nino:\t%d\n", id, 1000+fd))
	}
}

func holdersRoot(t *testing.T) hostfs.Root {
	root := t.TempDir()
	for _, p := range []fakeProc{
		// Reads a file of the superblock through the bind mount, and one on the tmpfs
		// below /mnt/data; its cwd is the NFS mount.
		{pid: 100, comm: "cat", state: "D", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/mnt/data/sub",
			fdMounts: []int{22, 41, 42}, cgroup: "0::/user.slice/user-0.slice/session-1.scope\n"},
		// Only its cwd is on the tmpfs mounted inside the NFS mount: not a holder.
		{pid: 101, comm: "bash", state: "S", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/mnt/data/scratch/x",
			fdMounts: []int{22, 22, 22}, cgroup: "0::/user.slice\n"},
		// A container (systemd cgroup driver) with the superblock at /data; its main
		// thread sleeps while a worker waits on the server.
		{pid: 200, comm: "java worker", state: "S", ns: containerNS, mountinfo: containerMountinfo, root: "/", cwd: "/data",
			fdMounts: []int{900, 901, 901}, threads: []string{"D", "S", "D"},
			cgroup: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/cri-containerd-" + containerID + ".scope\n"},
		// Chrooted into /srv/jail, its cwd on the superblock mounted at /srv/jail/mnt.
		{pid: 300, comm: "jailed", state: "D", ns: hostNS, mountinfo: jailMountinfo, root: "/srv/jail", cwd: "/srv/jail/mnt/x",
			cgroup: "12:memory:/kubepods/besteffort/pod" + podUID + "/" + containerID + "\n0::/\n"},
		// Uses 0:60 and the escaped mount point of 0:53, neither asked for in the first
		// case.
		{pid: 400, comm: "idle", state: "S", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/mnt/with space/d",
			fdMounts: []int{43}, cgroup: "0::/\n"},
		// Its working directory was removed, or is a live one named "old (deleted)": the
		// link reads the same, and either is on the mount.
		{pid: 500, comm: "gone", state: "S", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/mnt/data/old (deleted)",
			cgroup: "0::/\n"},
		// Its working directory is the root of the mount, removed on the server.
		{pid: 501, comm: "rootgone", state: "D", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/mnt/data (deleted)",
			cgroup: "0::/\n"},
		// A removed directory of the root file system.
		{pid: 502, comm: "local", state: "S", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/home/x (deleted)",
			cgroup: "0::/\n"},
	} {
		writeProc(t, root, p)
	}
	// Entries of /proc that are not processes.
	for _, name := range []string{"self", "sys", "fs"} {
		if err := os.MkdirAll(filepath.Join(root, "proc", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.Root(root)
}

func TestReadHolders(t *testing.T) {
	root := holdersRoot(t)
	got, warnings := ReadHolders(context.Background(), root, []string{"0:52", "0:53"}, HolderLimits{})
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	want := map[string][]Holder{
		"0:52": {
			{PID: 100, Comm: "cat", State: "D", BlockedThreads: 1, Via: []string{ViaFD, ViaCwd}, FDs: 1},
			{PID: 200, Comm: "java worker", State: "S", BlockedThreads: 2, Via: []string{ViaFD, ViaCwd}, FDs: 2, PodUID: podUID, ContainerID: containerID},
			{PID: 300, Comm: "jailed", State: "D", BlockedThreads: 1, Via: []string{ViaCwd}, PodUID: podUID, ContainerID: containerID},
			{PID: 500, Comm: "gone", State: "S", Via: []string{ViaCwd}},
			{PID: 501, Comm: "rootgone", State: "D", BlockedThreads: 1, Via: []string{ViaCwd}},
		},
		"0:53": {
			{PID: 400, Comm: "idle", State: "S", Via: []string{ViaCwd}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadHolders (-want +got):\n%s", diff)
	}
}

func TestReadHoldersLimits(t *testing.T) {
	root := holdersRoot(t)
	got, warnings := ReadHolders(context.Background(), root, []string{"0:52"}, HolderLimits{MaxProcesses: 2, MaxFDs: 2})
	// Processes 100 and 101 only, and of 100's three fds the first two.
	if n := len(got["0:52"]); n != 1 || got["0:52"][0].PID != 100 {
		t.Errorf("holders with MaxProcesses 2: %+v", got)
	}
	for _, w := range []string{"looked at 2 of 8", "more than 2 open files"} {
		if !strings.Contains(strings.Join(warnings, "\n"), w) {
			t.Errorf("no warning %q in %q", w, warnings)
		}
	}
}

func TestReadHoldersNone(t *testing.T) {
	root := holdersRoot(t)
	got, warnings := ReadHolders(context.Background(), root, []string{"0:99"}, HolderLimits{})
	if len(got) != 0 || len(warnings) != 0 {
		t.Errorf("an unmounted device: %v, %q", got, warnings)
	}
	got, warnings = ReadHolders(context.Background(), hostfs.Root(t.TempDir()), []string{"0:52"}, HolderLimits{})
	if len(got) != 0 || len(warnings) != 1 {
		t.Errorf("no /proc: %v, %q", got, warnings)
	}
}

var relativeTests = []struct{ link, root, want string }{
	{"/mnt/data", "/", "/mnt/data"},
	{"/srv/jail/mnt", "/srv/jail", "/mnt"},
	{"/srv/jail", "/srv/jail", "/"},
	{"/srv/jailbreak", "/srv/jail", "/srv/jailbreak"},
	{"/mnt/data (deleted)", "/", "/mnt/data (deleted)"},
	{"pipe:[1234]", "/", ""},
}

// TestDeviceOfLink: a link text ending in " (deleted)" maps as it reads first (a live
// directory, or a mount point, of that name), then without the suffix (a removed
// directory, by the path it had).
func TestDeviceOfLink(t *testing.T) {
	t.Parallel()
	mi := hostMountinfo + "45 22 0:52 / /mnt/x\\040(deleted) rw,relatime - nfs4 server:/data rw,vers=4.1\n" +
		"46 22 0:61 / /mnt/y rw,relatime - nfs4 server:/y rw,vers=4.1\n"
	tab := parseNSMounts([]byte(mi), map[string]bool{"0:52": true, "0:53": true})
	for link, want := range map[string]string{
		"/mnt/data/x (deleted)":     "0:52", // live "x (deleted)" or removed "x": on the mount
		"/mnt/data (deleted)":       "0:52", // the mount's root, removed on the server
		"/mnt/x (deleted)":          "0:52", // a mount point of that name
		"/mnt/x (deleted)/sub":      "0:52",
		"/mnt/y (deleted)":          "", // a removed directory of 0:61, not wanted
		"/home/old (deleted)":       "",
		"/mnt/with space (deleted)": "0:53",
	} {
		if got := tab.deviceOfLink(link, "/"); got != want {
			t.Errorf("deviceOfLink(%q) = %q, want %q", link, got, want)
		}
	}
}

func TestRelativeTo(t *testing.T) {
	for _, tt := range relativeTests {
		if got := relativeTo(tt.link, tt.root); got != tt.want {
			t.Errorf("relativeTo(%q, %q) = %q, want %q", tt.link, tt.root, got, tt.want)
		}
	}
}

func TestReadStat(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ content, comm, state string }{
		{"42 (cat) D 1 42", "cat", "D"},
		{"42 (a) (b) ) S 1 42", "a) (b) ", "S"},
		{"42 (cat", "", ""},
		{"", "", ""},
	} {
		p := filepath.Join(dir, "stat")
		if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if comm, state := readStat(p); comm != tt.comm || state != tt.state {
			t.Errorf("readStat(%q) = %q, %q; want %q, %q", tt.content, comm, state, tt.comm, tt.state)
		}
	}
}

func TestReadBlocked(t *testing.T) {
	root := holdersRoot(t)
	inv := &Inventory{
		Mounts: []Mount{
			{Device: "0:52", MountPoints: []string{"/mnt/data", "/srv/projects"}, Server: "files.example", ServerAddr: "10.0.0.1"},
			{Device: "0:53", MountPoints: []string{"/mnt/with space"}, Server: "10.0.0.2"},
			{Device: "0:60", MountPoints: []string{"/mnt/other"}, Server: "other.example", ServerAddr: "10.0.0.1"},
			{Device: "0:61", MountPoints: []string{"/mnt/fine"}, ServerAddr: "10.0.0.9"},
		},
	}
	ReadBlocked(context.Background(), root, inv, HolderLimits{})
	if inv.Blocked != nil {
		t.Fatalf("no server stalled, yet blocked: %+v", inv.Blocked)
	}
	inv.Stalled = []StalledServer{{Addr: "10.0.0.1"}, {Addr: "10.0.0.2"}}
	ReadBlocked(context.Background(), root, inv, HolderLimits{})
	got := map[string][]int{}
	for _, b := range inv.Blocked {
		pids := []int{}
		for _, h := range b.Holders {
			pids = append(pids, h.PID)
		}
		got[b.Device+" "+b.ServerAddr] = pids
	}
	want := map[string][]int{"0:52 10.0.0.1": {100, 200, 300, 500, 501}, "0:53 10.0.0.2": {400}, "0:60 10.0.0.1": {400}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocked (-want +got):\n%s", diff)
	}
	if inv.Blocked[0].Uninspected != 0 {
		t.Errorf("every fixture process is readable, yet %d uninspected", inv.Blocked[0].Uninspected)
	}
	// Four of the six processes left out: the holders are a lower bound, and say so.
	ReadBlocked(context.Background(), root, inv, HolderLimits{MaxProcesses: 2})
	for _, b := range inv.Blocked {
		if b.Uninspected != 6 || !b.Incomplete {
			t.Errorf("%s: %d uninspected with 2 of 8 processes looked at (incomplete %v), want 6", b.Device, b.Uninspected, b.Incomplete)
		}
	}
}

// TestSampleBlocked: a transport to 10.0.0.1 holds a request through the window, so the
// processes using that server's mounts, read while the window ran, are the blocked ones.
func TestSampleBlocked(t *testing.T) {
	root := holdersRoot(t)
	dir := root.Sys("kernel", "sunrpc", "xprt-switches", "switch-0", "xprt-0-tcp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"dstaddr":    "10.0.0.1\n",
		"xprt_state": "state= CONNECTED BOUND\n",
		"xprt_info":  "last_used=4294916354\npending_q_len=1\nbacklog_q_len=0\nsending_q_len=0\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	newInv := func() *Inventory {
		return &Inventory{Mounts: []Mount{
			{Device: "0:52", MountPoints: []string{"/mnt/data"}, ServerAddr: "10.0.0.1"},
			{Device: "0:53", MountPoints: []string{"/mnt/with space"}, ServerAddr: "10.0.0.2"},
		}}
	}
	inv := newInv()
	if err := SampleBlocked(context.Background(), root, inv, SampleTransports(root), 50*time.Millisecond, HolderLimits{}); err != nil {
		t.Fatal(err)
	}
	if len(inv.Stalled) != 1 || len(inv.Blocked) != 1 || inv.Blocked[0].Device != "0:52" {
		t.Fatalf("stalled %+v, blocked %+v; want 10.0.0.1 and its mount 0:52", inv.Stalled, inv.Blocked)
	}
	var pids []int
	for _, h := range inv.Blocked[0].Holders {
		pids = append(pids, h.PID)
	}
	if diff := cmp.Diff([]int{100, 200, 300, 500, 501}, pids); diff != "" {
		t.Errorf("holders of 0:52 (-want +got):\n%s", diff)
	}
	// No window: nothing is sampled, and no process is read.
	inv = newInv()
	if err := SampleBlocked(context.Background(), root, inv, SampleTransports(root), 0, HolderLimits{}); err != nil {
		t.Fatal(err)
	}
	if inv.Stalled != nil || inv.Blocked != nil {
		t.Errorf("with no window: stalled %+v, blocked %+v", inv.Stalled, inv.Blocked)
	}
}

// TestReadBlockedByPort: of two file systems behind local proxies on 127.0.0.1, only the
// mount of the stalled port is blocked; the other is neither listed nor scanned.
func TestReadBlockedByPort(t *testing.T) {
	ms, _ := ParseMountInfo([]byte("101 22 0:60 / /mnt/a rw - nfs4 127.0.0.1:/ rw,vers=4.1,hard,proto=tcp,port=20049,addr=127.0.0.1\n" +
		"102 22 0:61 / /mnt/b rw - nfs4 127.0.0.1:/ rw,vers=4.1,hard,proto=tcp,port=20050,addr=127.0.0.1\n"))
	inv := &Inventory{Mounts: ms, Stalled: []StalledServer{{Addr: "127.0.0.1", Port: 20049, Transports: []string{"switch-1/xprt-2-tcp"}}}}
	ReadBlocked(context.Background(), hostfs.Root(t.TempDir()), inv, HolderLimits{})
	if len(inv.Blocked) != 1 || inv.Blocked[0].Device != "0:60" {
		t.Errorf("blocked = %+v, want only 0:60 (port 20049)", inv.Blocked)
	}
}

// TestReadHoldersBounded: 20 processes with 100 open files each, a scan allowed 500
// reads: it stops at the cap, says so, and counts the processes it did not look at whole
// as uninspected, so that the list is marked incomplete. A scan whose context has ended
// looks at nothing and says so too.
func TestReadHoldersBounded(t *testing.T) {
	dir := t.TempDir()
	fds := make([]int, 100)
	for i := range fds {
		fds[i] = 22
	}
	fds[len(fds)-1] = 40 // the last fd of each is on the NFS mount
	for pid := 1000; pid < 1020; pid++ {
		writeProc(t, dir, fakeProc{pid: pid, comm: "opener", state: "S", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/",
			fdMounts: fds, cgroup: "0::/\n"})
	}
	root := hostfs.Root(dir)
	inv := &Inventory{Mounts: []Mount{{Device: "0:52", MountPoints: []string{"/mnt/data"}, ServerAddr: "10.0.0.1"}}, Stalled: []StalledServer{{Addr: "10.0.0.1"}}}
	start := time.Now()
	ReadBlocked(context.Background(), root, inv, HolderLimits{MaxReads: 500})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("a scan capped at 500 reads took %s", took)
	}
	if len(inv.Blocked) != 1 {
		t.Fatalf("blocked = %+v", inv.Blocked)
	}
	b := inv.Blocked[0]
	// 500 reads cover 4 processes whole (1 + 100 reads each) and stop in the fifth, which
	// is a holder if its fd on the mount came early in the directory.
	if !b.Incomplete || b.Uninspected != 16 || len(b.Holders) < 4 || len(b.Holders) > 5 {
		t.Errorf("incomplete %v, %d uninspected, %d holders; want incomplete, 16 and 4 or 5", b.Incomplete, b.Uninspected, len(b.Holders))
	}
	if !strings.Contains(strings.Join(inv.Warnings, "\n"), "the scan stopped at 500 reads of /proc (limit) with 4 of 20 looked at whole") {
		t.Errorf("warnings = %q", inv.Warnings)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, warnings := ReadHolders(ctx, root, []string{"0:52"}, HolderLimits{})
	if len(got["0:52"]) != 0 || !strings.Contains(strings.Join(warnings, "\n"), "stopped when interrupted with 0 of 20 looked at") {
		t.Errorf("after the context ended: %v, %q", got, warnings)
	}
	got, _ = ReadHolders(context.Background(), root, []string{"0:52"}, HolderLimits{})
	if len(got["0:52"]) != 20 {
		t.Errorf("unbounded: %d holders, want 20", len(got["0:52"]))
	}
}

// TestReadHoldersUnreadableMountinfo: a live process whose mountinfo cannot be read (too
// large, not a regular file, unreadable) or whose fdinfo cannot be listed was not
// inspected: it is counted, and the scan is incomplete. A zombie, which shows no mount
// table, is not.
func TestReadHoldersUnreadableMountinfo(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
		state string
		want  int
	}{
		{name: "too large", want: 1, spoil: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "mountinfo"), make([]byte, hostfs.MaxSmall+1), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "not a regular file", want: 1, spoil: func(t *testing.T, dir string) {
			replaceWithDir(t, filepath.Join(dir, "mountinfo"))
		}},
		{name: "fdinfo not a directory", want: 1, spoil: func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "fdinfo")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "fdinfo"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "zombie", state: "Z", want: 0, spoil: func(t *testing.T, dir string) {
			replaceWithDir(t, filepath.Join(dir, "mountinfo"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			state := tt.state
			if state == "" {
				state = "S"
			}
			writeProc(t, root, fakeProc{pid: 600, comm: "hidden", state: state, ns: "mnt:[4026532999]", mountinfo: hostMountinfo, root: "/", cwd: "/", cgroup: "0::/\n"})
			writeProc(t, root, fakeProc{pid: 601, comm: "cat", state: "D", ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/mnt/data", cgroup: "0::/\n"})
			tt.spoil(t, filepath.Join(root, "proc", "600"))
			scan := readHolders(context.Background(), hostfs.Root(root), []string{"0:52"}, HolderLimits{})
			if scan.uninspected != tt.want || scan.incomplete != (tt.want > 0) {
				t.Errorf("uninspected %d, incomplete %v; want %d, %v (warnings %q)", scan.uninspected, scan.incomplete, tt.want, tt.want > 0, scan.warnings)
			}
			if len(scan.holders["0:52"]) != 1 || scan.holders["0:52"][0].PID != 601 {
				t.Errorf("holders = %+v; want pid 601", scan.holders)
			}
		})
	}
}

// replaceWithDir replaces the file p with a directory.
func replaceWithDir(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}
