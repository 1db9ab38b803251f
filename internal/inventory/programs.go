package inventory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/kubelet"
)

// What a MountProgram does.
const (
	ProgramMount   = "mount"
	ProgramUnmount = "umount"
)

// MountProgram is a mount or unmount of NFS in progress on the host: mount.nfs or
// mount.nfs4 (or mount -t nfs, which calls the kernel itself when nfs-utils is missing),
// or umount, umount.nfs, umount.nfs4. A mount stuck on a server that does not answer has
// no superblock yet, so no holder scan finds it, and the server stays poisoned for that
// node: later mounts of it queue behind it. An unmount stuck on a mount point is kubelet
// (or someone) tearing a volume down.
type MountProgram struct {
	PID int `json:"pid"`
	// Comm and State are /proc/<pid>/stat's command name and state letter ("D": waiting
	// uninterruptibly in the kernel).
	Comm  string `json:"comm"`
	State string `json:"state"`
	// Program is ProgramMount or ProgramUnmount.
	Program string `json:"program"`
	// Server and Export are a mount's device argument, server:/export, as given on its
	// command line: a name or an address.
	Server string `json:"server,omitempty"`
	Export string `json:"export,omitempty"`
	// Target is the mount point argument.
	Target string `json:"target,omitempty"`
	// Running is how long the process has been running (/proc/<pid>/stat starttime
	// against /proc/uptime); 0 when unreadable.
	Running time.Duration `json:"running_ns"`
	// PodUID and ContainerID are the pod and container the program runs in (its cgroup);
	// empty for kubelet's own children, which run in kubelet's cgroup.
	PodUID      string `json:"pod_uid,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	// VolumePod is the pod whose volume Target is (kubelet's pod volume path), if any.
	VolumePod string `json:"volume_pod,omitempty"`
}

// SlowMount is how long a mount program may run before it counts as stuck though it is not
// in state D: mount.nfs retries a server that does not answer for two minutes, in userspace.
const SlowMount = 10 * time.Second

// Stuck reports whether the program waits in the kernel (state D) or has run longer than
// SlowMount.
func (p MountProgram) Stuck() bool { return p.State == "D" || p.Running >= SlowMount }

// ProcessScan is what ScanProcesses found.
type ProcessScan struct {
	// Programs are the NFS mount and unmount programs running, by PID.
	Programs []MountProgram `json:"programs,omitempty"`
	// PodProcesses counts, per pod UID, the processes running in the pod's cgroup; only
	// with ScanOptions.Pods. A running pod always has one: its sandbox's.
	PodProcesses map[string]int `json:"pod_processes,omitempty"`
	// KubeletRoots are the root directories of the kubelet processes running
	// (kubelet.RootFromCommandLine), sorted, each once, "" for a kubelet whose command
	// line could not be read or parsed; only with ScanOptions.Pods.
	KubeletRoots []kubelet.Root `json:"kubelet_roots,omitempty"`
	// Complete is false when a process was left out under the limits, or (with
	// ScanOptions.Pods) a live process's cgroup could not be read: then a pod or a program
	// may be missing.
	Complete bool     `json:"complete"`
	Warnings []string `json:"warnings,omitempty"`
}

// ScanOptions say what ScanProcesses reads besides each process's stat.
type ScanOptions struct {
	// Pods reads every process's cgroup to count the processes of each pod.
	Pods bool
	// SelfPod is the UID of the pod the scanner runs in, if any (the agent's --pod-uid).
	// With Pods, a scanner in a cgroup namespace of its own container sees its own pod's
	// cgroup with no name (kubelet.OwnPodCgroup): its own pod's processes are counted
	// under SelfPod when the scan finds a sibling container that shows where it is.
	SelfPod string
	// Limits bound the scan as they bound ReadHolders (MaxProcesses, MaxReads, Timeout).
	Limits HolderLimits
}

// ScanProcesses reads /proc/<pid>/stat of every process, and /proc/<pid>/cmdline of those
// whose command is an NFS mount or unmount program, and with opts.Pods every
// /proc/<pid>/cgroup and the command line of kubelet (for its --root-dir). It reads no
// other process's command line: cmdline takes the process's memory-map lock, which a
// process blocked in a page fault of an NFS file may hold; a mount or unmount program
// blocked in its system call does not, nor does kubelet, which maps no file of a volume.
// Nothing here needs CAP_SYS_PTRACE.
func ScanProcesses(ctx context.Context, root hostfs.Root, opts ScanOptions) ProcessScan {
	l := opts.Limits.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	out := ProcessScan{Complete: true}
	if opts.Pods {
		out.PodProcesses = map[string]int{}
	}
	entries, err := hostfs.ReadDir(root.Proc())
	if err != nil {
		out.Complete = false
		out.Warnings = append(out.Warnings, fmt.Sprintf("listing processes: %v", err))
		return out
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	uptime := readUptime(root)
	reads := 0
	parents := map[int]int{} // a program's parent, by the program's PID
	unreadCgroups := 0
	// In a cgroup namespace of its own container, the scanner's own pod has no name.
	inOwnNamespace := opts.Pods && opts.SelfPod != "" && cgroupV2Path(readSelfCgroup(root)) == "/"
	ownContainer, siblings := 0, 0
	for i, pid := range pids {
		if i >= l.MaxProcesses || reads >= l.MaxReads || ctx.Err() != nil {
			out.Complete = false
			out.Warnings = append(out.Warnings, fmt.Sprintf("processes: the scan stopped with %d of %d looked at (limits: %d processes, %d reads, %s)", i, len(pids), l.MaxProcesses, l.MaxReads, l.Timeout))
			break
		}
		dir := strconv.Itoa(pid)
		reads++
		st, ok := readProcStat(root.Proc(dir, "stat"))
		if !ok {
			continue // exited
		}
		var cgroup []byte
		if opts.Pods || isMountProgram(st.comm) {
			reads++
			var err error
			if cgroup, err = hostfs.ReadSmall(root.Proc(dir, "cgroup")); err != nil && opts.Pods && st.state != "Z" && st.state != "X" {
				if again, ok := readProcStat(root.Proc(dir, "stat")); ok && again.state != "Z" && again.state != "X" {
					// A pod's process whose cgroup cannot be read would count as none.
					unreadCgroups++
				}
			}
		}
		podUID, containerID := cgroupPod(cgroup)
		if opts.Pods && podUID != "" {
			out.PodProcesses[podUID]++
		}
		if inOwnNamespace && podUID == "" {
			own, sibling := kubelet.OwnPodCgroup(cgroupV2Path(cgroup))
			if own {
				ownContainer++
			}
			if sibling {
				siblings++
			}
		}
		if opts.Pods && st.comm == "kubelet" {
			reads++
			out.KubeletRoots = append(out.KubeletRoots, kubeletRoot(root, dir))
		}
		if !isMountProgram(st.comm) {
			continue
		}
		reads++
		b, err := hostfs.ReadSmall(root.Proc(dir, "cmdline"))
		if err != nil {
			continue
		}
		p, ok := parseMountProgram(st.comm, b)
		if !ok {
			continue
		}
		p.PID, p.State, p.PodUID, p.ContainerID = pid, st.state, podUID, containerID
		if uptime > 0 && st.startTicks > 0 {
			if run := uptime - time.Duration(st.startTicks)*time.Second/clockTicks; run > 0 {
				p.Running = run
			}
		}
		if uid, ok := kubelet.VolumePod(p.Target); ok {
			p.VolumePod = uid
		}
		parents[pid] = st.ppid
		out.Programs = append(out.Programs, p)
	}
	if siblings > 0 {
		out.PodProcesses[opts.SelfPod] += ownContainer + siblings
	}
	if unreadCgroups > 0 {
		out.Complete = false
		out.Warnings = append(out.Warnings, fmt.Sprintf("processes: the cgroup of %d could not be read; the pods they run in are not counted", unreadCgroups))
	}
	out.Programs = withoutHelperParents(out.Programs, parents)
	slices.Sort(out.KubeletRoots)
	out.KubeletRoots = slices.Compact(out.KubeletRoots)
	return out
}

// kubeletRoot reads the root directory of the kubelet process dir from its command line;
// "" when it cannot be told.
func kubeletRoot(root hostfs.Root, dir string) kubelet.Root {
	b, err := hostfs.ReadSmall(root.Proc(dir, "cmdline"))
	if err != nil {
		return ""
	}
	r, _ := kubelet.RootFromCommandLine(b)
	return r
}

// withoutHelperParents drops each program whose child is a program of the same kind on
// the same target: mount -t nfs4 runs mount.nfs4 and waits for it, umount runs
// umount.nfs4, and the two processes are one mount (or unmount) in progress, listed once,
// by the helper that does the work.
func withoutHelperParents(ps []MountProgram, parents map[int]int) []MountProgram {
	return slices.DeleteFunc(ps, func(p MountProgram) bool {
		return slices.ContainsFunc(ps, func(c MountProgram) bool {
			return parents[c.PID] == p.PID && c.Program == p.Program && c.Target == p.Target
		})
	})
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture nfstune runs on.
const clockTicks = 100

// procStat is what ScanProcesses needs of /proc/<pid>/stat.
type procStat struct {
	comm, state string
	ppid        int
	startTicks  int64
}

// readProcStat reads the command name, state, parent (field 4) and start time (field 22, in
// clock ticks since boot) of a /proc/<pid>/stat file.
func readProcStat(path string) (procStat, bool) {
	b, err := hostfs.ReadSmall(path)
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndex(s, ") ")
	if open < 0 || end < open || end+3 > len(s) {
		return procStat{}, false
	}
	st := procStat{comm: s[open+1 : end], state: s[end+2 : end+3]}
	// After the name: state is field 3, ppid field 4, starttime field 22.
	f := strings.Fields(s[end+2:])
	if len(f) > 1 {
		st.ppid, _ = strconv.Atoi(f[1])
	}
	if len(f) > 19 {
		st.startTicks, _ = strconv.ParseInt(f[19], 10, 64)
	}
	return st, true
}

// readUptime reads /proc/uptime's first field; 0 when unreadable.
func readUptime(root hostfs.Root) time.Duration {
	b, err := hostfs.ReadSmall(root.Proc("uptime"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// isMountProgram reports whether a command name (at most 15 characters, as the kernel
// keeps it) is one of the programs MountProgram describes.
func isMountProgram(comm string) bool {
	switch comm {
	case "mount.nfs", "mount.nfs4", "mount", "umount", "umount.nfs", "umount.nfs4":
		return true
	}
	return false
}

// optionsWithValue are the options of mount(8), umount(8) and mount.nfs that take the next
// argument as their value.
var optionsWithValue = map[string]bool{"-t": true, "-o": true, "-O": true, "-L": true, "-U": true, "-N": true, "--types": true, "--options": true}

// parseMountProgram reads a mount or unmount program's NUL-separated command line:
//
//	mount.nfs4 server:/export /mount/point -o rw,hard
//	mount -t nfs4 -o rw server:/export /mount/point
//	umount /mount/point
//
// mount(8) counts only with -t nfs or nfs4: it runs the kernel's mount itself when no
// mount.nfs helper is installed.
func parseMountProgram(comm string, cmdline []byte) (MountProgram, bool) {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) == 0 {
		return MountProgram{}, false
	}
	var pos []string
	fstype := ""
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case optionsWithValue[a]:
			if i+1 < len(args) && (a == "-t" || a == "--types") {
				fstype = args[i+1]
			}
			i++
		case strings.HasPrefix(a, "-t") && len(a) > 2:
			fstype = a[2:]
		case strings.HasPrefix(a, "--types="):
			fstype = strings.TrimPrefix(a, "--types=")
		case strings.HasPrefix(a, "-"):
		default:
			pos = append(pos, a)
		}
	}
	p := MountProgram{Comm: comm}
	switch comm {
	case "umount", "umount.nfs", "umount.nfs4":
		if len(pos) == 0 {
			return MountProgram{}, false
		}
		p.Program, p.Target = ProgramUnmount, pos[len(pos)-1]
		return p, true
	case "mount":
		if fstype != "nfs" && fstype != "nfs4" {
			return MountProgram{}, false
		}
	}
	if len(pos) < 2 {
		return MountProgram{}, false
	}
	server, export := splitSource(pos[0])
	if server == "" || !strings.HasPrefix(export, "/") {
		return MountProgram{}, false
	}
	p.Program, p.Server, p.Export, p.Target = ProgramMount, server, export, pos[1]
	return p, true
}

// ReadMountPrograms fills inv.Mounting with the NFS mount programs that are stuck
// (MountProgram.Stuck) and the unmount programs of inv's mount points, when a server is
// stalled: the one time a scan of every process's stat is worth its cost. It adds the
// scan's warnings.
func ReadMountPrograms(ctx context.Context, root hostfs.Root, inv *Inventory, limits HolderLimits) {
	inv.Mounting = nil
	if len(inv.Stalled) == 0 {
		return
	}
	scan := ScanProcesses(ctx, root, ScanOptions{Limits: limits})
	inv.Warnings = append(inv.Warnings, scan.Warnings...)
	points := map[string]bool{}
	for _, m := range inv.Mounts {
		for _, mp := range m.MountPoints {
			points[mp] = true
		}
	}
	for _, p := range scan.Programs {
		if p.Program == ProgramMount && p.Stuck() || p.Program == ProgramUnmount && points[p.Target] {
			inv.Mounting = append(inv.Mounting, p)
		}
	}
}

// readSelfCgroup reads the scanner's own cgroup file as the host's /proc shows it (self is
// the reader, in any PID namespace); nil when unreadable.
func readSelfCgroup(root hostfs.Root) []byte {
	b, err := hostfs.ReadSmall(root.Proc("self", "cgroup"))
	if err != nil {
		return nil
	}
	return b
}
