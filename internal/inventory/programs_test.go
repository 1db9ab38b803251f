package inventory

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/kubelet"
)

const (
	deletedPod = "5d7e4a12-0c3b-4e8f-9d21-6a7b8c9d0e1f"
	podVolume  = "/var/lib/kubelet/pods/" + deletedPod + "/volumes/kubernetes.io~nfs/pv-data"
	csiPodCG   = "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod8f3d2c1a_5b6e_4f70_9a81_2b3c4d5e6f70.slice/cri-containerd-" + containerID + ".scope\n"
)

// programsRoot is a host with NFS mount and unmount programs running, each process started
// 4000 ticks (40 s) after boot and the host up 100 s.
func programsRoot(t *testing.T) hostfs.Root {
	t.Helper()
	root := t.TempDir()
	for _, p := range []struct {
		fakeProc
		cmdline []string
	}{
		// kubelet's in-tree mount, stuck in the kernel on a server that does not answer.
		{fakeProc{pid: 10, comm: "mount.nfs4", state: "D", cgroup: "0::/system.slice/kubelet.service\n"},
			[]string{"/sbin/mount.nfs4", "10.0.0.9:/exports/a", podVolume, "-o", "rw,hard"}},
		// A CSI driver's mount by name, in its own pod, sleeping in userspace.
		{fakeProc{pid: 11, comm: "mount.nfs", state: "S", cgroup: csiPodCG},
			[]string{"mount.nfs", "[fd00::9]:/b", "/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount", "-o", "vers=3"}},
		// mount(8) calling the kernel itself: no helper installed.
		{fakeProc{pid: 12, comm: "mount", state: "D", cgroup: "0::/system.slice/kubelet.service\n"},
			[]string{"mount", "-t", "nfs4", "-o", "rw", "nfs.example.com:/c", "/mnt/c"}},
		// mount(8) of something else.
		{fakeProc{pid: 13, comm: "mount", state: "D", cgroup: "0::/\n"},
			[]string{"mount", "-t", "ext4", "/dev/sdb1", "/mnt/disk"}},
		// kubelet's unmount of the pod's volume.
		{fakeProc{pid: 14, comm: "umount", state: "D", cgroup: "0::/system.slice/kubelet.service\n"},
			[]string{"umount", podVolume}},
		// mount(8) waiting for the mount.nfs4 it runs, and umount(8) for its umount.nfs4:
		// one mount and one unmount in progress, each listed by its helper alone.
		{fakeProc{pid: 15, comm: "mount", state: "S", cgroup: "0::/user.slice\n"},
			[]string{"mount", "-t", "nfs4", "10.0.0.9:/d", "/mnt/d"}},
		{fakeProc{pid: 16, ppid: 15, comm: "mount.nfs4", state: "D", cgroup: "0::/user.slice\n"},
			[]string{"/sbin/mount.nfs4", "10.0.0.9:/d", "/mnt/d", "-o", "rw"}},
		{fakeProc{pid: 17, comm: "umount", state: "S", cgroup: "0::/user.slice\n"},
			[]string{"umount", "/mnt/e"}},
		{fakeProc{pid: 18, ppid: 17, comm: "umount.nfs4", state: "D", cgroup: "0::/user.slice\n"},
			[]string{"/sbin/umount.nfs4", "/mnt/e"}},
		// The sandbox of a running pod, and a process that is neither.
		{fakeProc{pid: 20, comm: "pause", state: "S", cgroup: csiPodCG}, []string{"/pause"}},
		{fakeProc{pid: 21, comm: "bash", state: "S", cgroup: "0::/user.slice\n"}, []string{"bash"}},
		// kubelet, with a root directory of its own.
		{fakeProc{pid: 22, comm: "kubelet", state: "S", cgroup: "0::/system.slice/kubelet.service\n"},
			[]string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--root-dir", "/data/kubelet"}},
	} {
		p.ns, p.mountinfo, p.root, p.cwd = hostNS, hostMountinfo, "/", "/"
		writeProc(t, root, p.fakeProc)
		cmd := strings.Join(p.cmdline, "\x00") + "\x00"
		if err := os.WriteFile(filepath.Join(root, "proc", strconv.Itoa(p.pid), "cmdline"), []byte(cmd), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "uptime"), []byte("100.00 180.00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return hostfs.Root(root)
}

func TestScanProcesses(t *testing.T) {
	root := programsRoot(t)
	got := ScanProcesses(context.Background(), root, ScanOptions{Pods: true})
	want := ProcessScan{
		Complete: true,
		Programs: []MountProgram{
			{PID: 10, Comm: "mount.nfs4", State: "D", Program: ProgramMount, Server: "10.0.0.9", Export: "/exports/a", Target: podVolume, Running: 60 * time.Second, VolumePod: deletedPod},
			{PID: 11, Comm: "mount.nfs", State: "S", Program: ProgramMount, Server: "fd00::9", Export: "/b", Target: "/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount", Running: 60 * time.Second, PodUID: podUID, ContainerID: containerID},
			{PID: 12, Comm: "mount", State: "D", Program: ProgramMount, Server: "nfs.example.com", Export: "/c", Target: "/mnt/c", Running: 60 * time.Second},
			{PID: 14, Comm: "umount", State: "D", Program: ProgramUnmount, Target: podVolume, Running: 60 * time.Second, VolumePod: deletedPod},
			{PID: 16, Comm: "mount.nfs4", State: "D", Program: ProgramMount, Server: "10.0.0.9", Export: "/d", Target: "/mnt/d", Running: 60 * time.Second},
			{PID: 18, Comm: "umount.nfs4", State: "D", Program: ProgramUnmount, Target: "/mnt/e", Running: 60 * time.Second},
		},
		PodProcesses: map[string]int{podUID: 2},
		KubeletRoots: []kubelet.Root{"/data/kubelet"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scan (-want +got):\n%s", diff)
	}
	if got := ScanProcesses(context.Background(), root, ScanOptions{}); got.PodProcesses != nil {
		t.Errorf("pods counted without ScanOptions.Pods: %v", got.PodProcesses)
	}
	short := ScanProcesses(context.Background(), root, ScanOptions{Pods: true, Limits: HolderLimits{MaxProcesses: 3}})
	if short.Complete || len(short.Warnings) != 1 || len(short.Programs) != 3 {
		t.Errorf("a scan stopped at 3 processes: complete %v, %d programs, warnings %q", short.Complete, len(short.Programs), short.Warnings)
	}
}

func TestReadMountPrograms(t *testing.T) {
	root := programsRoot(t)
	inv := &Inventory{Mounts: []Mount{{Device: "0:52", MountPoints: []string{podVolume}, Server: "10.0.0.9"}}}
	ReadBlocked(context.Background(), root, inv, HolderLimits{})
	if inv.Mounting != nil {
		t.Fatalf("no server stalled, yet mount programs listed: %+v", inv.Mounting)
	}
	inv.Stalled = []StalledServer{{Addr: "10.0.0.9"}}
	ReadBlocked(context.Background(), root, inv, HolderLimits{})
	var pids []int
	for _, p := range inv.Mounting {
		pids = append(pids, p.PID)
	}
	// Every stuck mount (the one sleeping in userspace has run past SlowMount), and the
	// unmount of a mount point of the inventory.
	if diff := cmp.Diff([]int{10, 11, 12, 14, 16}, pids); diff != "" {
		t.Errorf("mounting (-want +got):\n%s", diff)
	}
}

var mountProgramTests = []struct {
	comm, cmdline string
	want          MountProgram
	ok            bool
}{
	{"mount.nfs", "mount.nfs\x00srv:/x\x00/mnt\x00", MountProgram{Comm: "mount.nfs", Program: ProgramMount, Server: "srv", Export: "/x", Target: "/mnt"}, true},
	{"mount", "mount\x00-tnfs\x00srv:/x\x00/mnt\x00", MountProgram{Comm: "mount", Program: ProgramMount, Server: "srv", Export: "/x", Target: "/mnt"}, true},
	{"mount", "mount\x00--types=nfs4\x00-o\x00ro\x00srv:/\x00/mnt\x00", MountProgram{Comm: "mount", Program: ProgramMount, Server: "srv", Export: "/", Target: "/mnt"}, true},
	{"umount.nfs4", "/sbin/umount.nfs4\x00/mnt/x\x00-f\x00", MountProgram{Comm: "umount.nfs4", Program: ProgramUnmount, Target: "/mnt/x"}, true},
	{"mount", "mount\x00/dev/sda1\x00/mnt\x00", MountProgram{}, false},
	{"mount.nfs", "mount.nfs\x00srv\x00/mnt\x00", MountProgram{}, false},
	{"mount.nfs", "mount.nfs\x00srv:/x\x00", MountProgram{}, false},
	{"umount", "umount\x00-l\x00", MountProgram{}, false},
	{"umount", "", MountProgram{}, false},
}

func TestParseMountProgram(t *testing.T) {
	for _, tt := range mountProgramTests {
		got, ok := parseMountProgram(tt.comm, []byte(tt.cmdline))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseMountProgram(%q, %q) = %+v, %v; want %+v, %v", tt.comm, tt.cmdline, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseMountProgram(f *testing.F) {
	for _, tt := range mountProgramTests {
		f.Add(tt.comm, tt.cmdline)
	}
	f.Fuzz(func(t *testing.T, comm, cmdline string) { parseMountProgram(comm, []byte(cmdline)) })
}

// TestScanProcessesUnreadableCgroup: a live process whose cgroup cannot be read may be a
// pod's: counting pods, the scan is then incomplete. A zombie's is no loss.
func TestScanProcessesUnreadableCgroup(t *testing.T) {
	for _, tt := range []struct {
		state    string
		complete bool
	}{{"S", false}, {"Z", true}} {
		root := programsRoot(t)
		writeProc(t, string(root), fakeProc{pid: 30, comm: "app", state: tt.state, ns: hostNS, mountinfo: hostMountinfo, root: "/", cwd: "/"})
		cg := root.Proc("30", "cgroup")
		if err := os.Remove(cg); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(cg, 0o755); err != nil { // not a regular file: unreadable
			t.Fatal(err)
		}
		got := ScanProcesses(context.Background(), root, ScanOptions{Pods: true})
		if got.Complete != tt.complete {
			t.Errorf("state %s: complete = %v, want %v (warnings %q)", tt.state, got.Complete, tt.complete, got.Warnings)
		}
		if got := ScanProcesses(context.Background(), root, ScanOptions{}); !got.Complete {
			t.Errorf("state %s: a scan that counts no pod is incomplete: %q", tt.state, got.Warnings)
		}
	}
}

// TestScanProcessesOwnCgroupNamespace: an agent in a cgroup namespace of its own
// container sees its own pod's cgroup with no name. Its pod's processes count only when
// a sibling container (the sandbox) shows that the namespace's root is a container of a
// pod; another pod is counted by name as from anywhere.
func TestScanProcessesOwnCgroupNamespace(t *testing.T) {
	const (
		self    = "0b8e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
		other   = "7c6d5e4f-3a2b-4c1d-8e9f-a0b1c2d3e4f5"
		sandbox = "aa825dc642cb6eb9a060e54bf8d69288fbee4904a1b2c3d4e5f60718293a4b5c"
	)
	for _, tt := range []struct {
		name        string
		selfCgroup  string // the scanner's own, as it reads it
		withSandbox bool
		selfPod     string
		want        map[string]int
	}{
		{"namespace root with its sandbox", "0::/\n", true, self, map[string]int{self: 3, other: 1}},
		{"no sandbox beside it", "0::/\n", false, self, map[string]int{other: 1}},
		{"own pod not known", "0::/\n", true, "", map[string]int{other: 1}},
		{"not at a namespace's root", "0::/system.slice/nfstune.service\n", true, self, map[string]int{other: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			procs := []fakeProc{
				{pid: 40, comm: "nfstune", state: "S", cgroup: tt.selfCgroup},
				{pid: 41, comm: "nfstune", state: "S", cgroup: "0::/\n"},
				{pid: 42, comm: "app", state: "S", cgroup: "0::/../../pod" + other + "/" + containerID + "\n"},
				{pid: 43, comm: "kubelet", state: "S", cgroup: "0::/../../../../system.slice/kubelet.service\n"},
			}
			if tt.withSandbox {
				procs = append(procs, fakeProc{pid: 44, comm: "pause", state: "S", cgroup: "0::/../" + sandbox + "\n"})
			}
			for _, p := range procs {
				p.ns, p.mountinfo, p.root, p.cwd = hostNS, hostMountinfo, "/", "/"
				writeProc(t, root, p)
			}
			if err := os.Symlink("40", filepath.Join(root, "proc", "self")); err != nil {
				t.Fatal(err)
			}
			got := ScanProcesses(context.Background(), hostfs.Root(root), ScanOptions{Pods: true, SelfPod: tt.selfPod})
			if diff := cmp.Diff(tt.want, got.PodProcesses); diff != "" {
				t.Errorf("pod processes (-want +got):\n%s", diff)
			}
		})
	}
}
