package inventory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/kubelet"
)

// How a Holder uses a superblock (Holder.Via).
const (
	ViaFD   = "fd"   // an open file descriptor on it
	ViaCwd  = "cwd"  // its working directory is on it
	ViaRoot = "root" // its root directory is on it
)

// Holder is a process that uses an NFS superblock through an open file, its working
// directory or its root: when the server stops answering, it is the process that blocks
// (hard mount) or gets errors (soft mount, or nfstune shutdown). Everything comes from
// /proc/<pid> (proc(5)); nothing inside the mount is touched.
type Holder struct {
	PID int `json:"pid"`
	// Comm is the command name of /proc/<pid>/stat.
	Comm string `json:"comm"`
	// State is the state letter of /proc/<pid>/stat, the main thread's: "D" waits
	// uninterruptibly (a hard mount's RPC), "S" sleeps interruptibly.
	State string `json:"state"`
	// BlockedThreads counts the threads in state D (/proc/<pid>/task/*/stat): a
	// multi-threaded program can have a worker blocked while its main thread sleeps.
	BlockedThreads int `json:"blocked_threads"`
	// Via lists how the process uses the superblock: ViaFD, ViaCwd, ViaRoot.
	Via []string `json:"via"`
	// FDs counts its open file descriptors on the superblock.
	FDs int `json:"fds,omitempty"`
	// PodUID and ContainerID are the Kubernetes pod and container the process runs in,
	// from the kubelet-named cgroup of /proc/<pid>/cgroup (kubelet.CgroupPod); empty
	// outside a pod.
	PodUID      string `json:"pod_uid,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
}

// HolderLimits bound the work of ReadHolders; a zero field takes its default. Any local
// process can open thousands of files, so the scan has a bound of its own whatever the
// host holds: what it could not look at within the bounds is counted, never guessed.
type HolderLimits struct {
	// MaxProcesses is how many processes of /proc are looked at (default 100,000).
	// A process whose mount namespace has none of the devices costs one readlink.
	MaxProcesses int
	// MaxFDs is how many file descriptors of one process are looked at (default 4,096).
	MaxFDs int
	// MaxReads is how many files and links of /proc/<pid> one scan reads in all
	// (default 100,000, about a second at the 9 us an fdinfo read takes).
	MaxReads int
	// Timeout bounds one scan's time (default 2 s), within the caller's context.
	Timeout time.Duration
}

// The default HolderLimits.
const (
	DefaultMaxProcesses = 100_000
	DefaultMaxFDs       = 4096
	DefaultMaxReads     = 100_000
	DefaultHolderScan   = 2 * time.Second
)

// ReadHolders returns, per device ("major:minor" of an NFS superblock), the processes
// that hold it open, have their working directory or root on it, sorted by PID; and
// warnings for what it could not read or left out under limits. It reads only /proc:
// the mount table of each mount namespace and root once (/proc/<pid>/mountinfo, keyed by
// the /proc/<pid>/ns/mnt and root links); then, for processes in a namespace where a
// device is mounted, the mnt_id of /proc/<pid>/fdinfo/<fd> (Linux 3.15 and later), which
// names the mount of an open file exactly; the /proc/<pid>/cwd and root links, whose text
// the kernel formats from memory and which are mapped to the process's own mount table by
// the longest mount point (a path the kernel marks " (deleted)" by the path it had:
// deviceOfLink; one it cannot reach is left out); /proc/<pid>/stat and task/*/stat for
// the state; and /proc/<pid>/cgroup.
//
// Memory maps are not read: /proc/<pid>/maps waits on the lock that a process blocked in
// a page fault may hold. A process blocked in open() or stat() of a path on the mount
// holds no file there yet: it is found only when its working directory or root is on the
// mount. Processes it may not inspect (ptrace access: CAP_SYS_PTRACE for other users' and
// for those with more capabilities) are counted in a warning.
//
// The scan stops at limits.MaxReads reads, at limits.Timeout, or when ctx ends, whichever
// comes first; a warning then says so and counts the processes left out.
func ReadHolders(ctx context.Context, root hostfs.Root, devices []string, limits HolderLimits) (map[string][]Holder, []string) {
	scan := readHolders(ctx, root, devices, limits)
	return scan.holders, scan.warnings
}

// withDefaults returns l with each zero field set to its default.
func (l HolderLimits) withDefaults() HolderLimits {
	if l.MaxProcesses <= 0 {
		l.MaxProcesses = DefaultMaxProcesses
	}
	if l.MaxFDs <= 0 {
		l.MaxFDs = DefaultMaxFDs
	}
	if l.MaxReads <= 0 {
		l.MaxReads = DefaultMaxReads
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultHolderScan
	}
	return l
}

// readHolders is ReadHolders, and also counts the processes it could not inspect or left
// out under the limits: the holders it returns are a lower bound when that is not 0.
func readHolders(ctx context.Context, root hostfs.Root, devices []string, limits HolderLimits) holderScan {
	limits = limits.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	out := make(map[string][]Holder)
	if len(devices) == 0 {
		return holderScan{holders: out}
	}
	want := make(map[string]bool, len(devices))
	for _, d := range devices {
		want[d] = true
	}
	entries, err := hostfs.ReadDir(root.Proc())
	if err != nil {
		return holderScan{holders: out, warnings: []string{fmt.Sprintf("listing processes: %v", err)}}
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	var warnings []string
	skipped := 0
	if len(pids) > limits.MaxProcesses {
		skipped = len(pids) - limits.MaxProcesses
		warnings = append(warnings, fmt.Sprintf("processes: looked at %d of %d (limit); holders among the others are not listed", limits.MaxProcesses, len(pids)))
		pids = pids[:limits.MaxProcesses]
	}
	r := holderReader{ctx: ctx, root: root, want: want, maxFDs: limits.MaxFDs, readsLeft: limits.MaxReads, tables: map[string]*nsMounts{}}
	looked := 0
	for _, pid := range pids {
		if r.stopped() {
			break
		}
		r.process(pid, out)
		looked++
	}
	if left := len(pids) - looked + r.unfinished; left > 0 {
		skipped += left
		warnings = append(warnings, fmt.Sprintf("processes: the scan stopped %s with %d of %d looked at whole; holders among the others are not listed", r.why(limits), looked-r.unfinished, len(pids)))
	}
	if r.denied > 0 {
		warnings = append(warnings, fmt.Sprintf("processes: %d could not be inspected (permission denied: reading other processes' fdinfo takes CAP_SYS_PTRACE); holders among them are not listed", r.denied))
	}
	if r.unreadable > 0 {
		warnings = append(warnings, fmt.Sprintf("processes: %d could not be inspected (their mountinfo or fdinfo could not be read); holders among them are not listed", r.unreadable))
	}
	if r.fdCapped > 0 {
		warnings = append(warnings, fmt.Sprintf("processes: %d have more than %d open files; only the first %d of each were looked at", r.fdCapped, r.maxFDs, r.maxFDs))
	}
	for dev := range out {
		sort.Slice(out[dev], func(i, j int) bool { return out[dev][i].PID < out[dev][j].PID })
	}
	uninspected := skipped + r.denied + r.unreadable
	return holderScan{holders: out, warnings: warnings, uninspected: uninspected, incomplete: uninspected > 0 || r.fdCapped > 0}
}

// holderReader is the state of one ReadHolders scan.
type holderReader struct {
	ctx    context.Context
	root   hostfs.Root
	want   map[string]bool
	maxFDs int
	// readsLeft counts down the files and links the scan may still read (MaxReads).
	readsLeft int
	// unfinished counts the processes whose files the scan stopped in.
	unfinished int
	// tables caches each mount namespace's table, keyed by the ns/mnt and root links.
	tables   map[string]*nsMounts
	denied   int
	fdCapped int
	// unreadable counts the live processes whose mount table or open files could not be
	// read for another reason than permission.
	unreadable int
}

// read counts one read of the scan and reports whether it may go on.
func (r *holderReader) read() bool {
	r.readsLeft--
	return r.readsLeft >= 0
}

// stopped reports whether the scan is over its reads or its time.
func (r *holderReader) stopped() bool {
	return r.readsLeft <= 0 || r.ctx.Err() != nil
}

// why says which bound stopped the scan.
func (r *holderReader) why(limits HolderLimits) string {
	if r.readsLeft <= 0 {
		return fmt.Sprintf("at %d reads of /proc (limit)", limits.MaxReads)
	}
	if errors.Is(r.ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("after %s (limit)", limits.Timeout)
	}
	return "when interrupted"
}

// nsMounts is what a mount table tells about the wanted devices.
type nsMounts struct {
	// byID maps the mount ID of each mount of a wanted device to the device.
	byID map[int]string
	// devices are the wanted devices mounted in the namespace.
	devices map[string]bool
	// points are every mount point with its device, in mountinfo order, to map a cwd or
	// root path to its mount; nil when no wanted device is mounted.
	points []mountPoint
}

type mountPoint struct {
	path, device string
}

// process adds pid to out for each wanted device it uses. A process that exits meanwhile
// is skipped without a warning.
func (r *holderReader) process(pid int, out map[string][]Holder) {
	dir := strconv.Itoa(pid)
	r.read() // the ns/mnt and root links, as one
	// mountinfo names mount points below the process's root, so a table is shared by the
	// processes of one namespace with one root.
	rootPath, rootErr := os.Readlink(r.root.Proc(dir, "root"))
	ns, nsErr := os.Readlink(r.root.Proc(dir, "ns", "mnt"))
	if errors.Is(rootErr, fs.ErrPermission) || errors.Is(nsErr, fs.ErrPermission) {
		// Its fds, cwd and root are guarded by the same ptrace check: not ours to read.
		r.denied++
		return
	}
	key := "pid:" + dir // no namespace link (old kernel, exiting process): its own table
	if nsErr == nil && rootErr == nil {
		key = ns + " " + rootPath
	}
	t, ok := r.tables[key]
	if !ok {
		var err error
		if t, err = r.readTable(dir); err != nil {
			// Too large, not a regular file, unreadable: its mounts are not known, so it
			// may hold any device. Only a process that exited meanwhile is no loss.
			if r.alive(dir) {
				r.unreadable++
			}
			return
		}
		r.tables[key] = t
	}
	if len(t.byID) == 0 {
		return
	}
	uses := map[string]*Holder{}
	use := func(dev, via string) {
		h := uses[dev]
		if h == nil {
			h = &Holder{PID: pid}
			uses[dev] = h
		}
		if via == ViaFD {
			h.FDs++
		}
		for _, v := range h.Via {
			if v == via {
				return
			}
		}
		h.Via = append(h.Via, via)
	}
	denied := r.fds(dir, t, use)
	for _, via := range []string{ViaCwd, ViaRoot} {
		p, err := os.Readlink(r.root.Proc(dir, via))
		denied = denied || errors.Is(err, fs.ErrPermission)
		if err != nil || rootErr != nil {
			continue
		}
		if dev := t.deviceOfLink(p, rootPath); dev != "" {
			use(dev, via)
		}
	}
	if denied {
		r.denied++
	}
	if len(uses) == 0 {
		return
	}
	comm, state := readStat(r.root.Proc(dir, "stat"))
	if state == "" {
		return // exited
	}
	blocked := r.blockedThreads(dir)
	var podUID, containerID string
	if b, err := hostfs.ReadSmall(r.root.Proc(dir, "cgroup")); err == nil {
		podUID, containerID = cgroupPod(b)
	}
	for dev, h := range uses {
		h.Comm, h.State, h.BlockedThreads = comm, state, blocked
		h.PodUID, h.ContainerID = podUID, containerID
		out[dev] = append(out[dev], *h)
	}
}

// readTable reads /proc/<dir>/mountinfo.
func (r *holderReader) readTable(dir string) (*nsMounts, error) {
	b, err := hostfs.ReadSmall(r.root.Proc(dir, "mountinfo"))
	if err != nil {
		return nil, err
	}
	return parseNSMounts(b, r.want), nil
}

// parseNSMounts reads the mount ID, device and mount point of each mountinfo line
// (proc_pid_mountinfo(5)), through the same parser as the inventory (parseMountInfo); it
// keeps the mount points only when a wanted device is there.
func parseNSMounts(b []byte, want map[string]bool) *nsMounts {
	t := &nsMounts{byID: map[int]string{}, devices: map[string]bool{}}
	infos, _ := parseMountInfo(b, nil)
	points := make([]mountPoint, 0, len(infos))
	for _, in := range infos {
		dev := fmt.Sprintf("%d:%d", in.Major, in.Minor)
		if want[dev] {
			t.byID[in.ID] = dev
			t.devices[dev] = true
		}
		points = append(points, mountPoint{path: in.Mountpoint, device: dev})
	}
	if len(t.byID) > 0 {
		t.points = points
	}
	return t
}

// deviceOf returns the wanted device that path lies on: the mount with the longest mount
// point containing path, the last mounted on a tie (it hides the others); "" when that
// mount is not a wanted device or path is empty.
func (t *nsMounts) deviceOf(path string) string {
	if path == "" {
		return ""
	}
	best, bestLen := "", -1
	for _, p := range t.points {
		if !underPath(path, p.path) || len(p.path) < bestLen {
			continue
		}
		best, bestLen = p.device, len(p.path)
	}
	if !t.devices[best] {
		return ""
	}
	return best
}

// deletedSuffix is what the kernel appends to the path of a directory that has been
// removed (d_path); a live directory can have it in its name too.
const deletedSuffix = " (deleted)"

// deviceOfLink returns the wanted device that a cwd or root link's text p lies on, p being
// mapped below the process's root rootPath (relativeTo). A text ending in " (deleted)" is
// either a live directory of that name or a removed directory, whose text is its last path:
// it is mapped as it reads first, and when that gives no wanted device, without the
// suffix. A removed directory was on the mount its last path lies on, so it is found too,
// the mount's own root (removed on the server) included; the cost is that a live directory
// "x (deleted)" next to a mount point "x" of a wanted device, on another file system,
// makes its process a holder it is not: an extra name in the list, never a missing one.
func (t *nsMounts) deviceOfLink(p, rootPath string) string {
	if dev := t.deviceOf(relativeTo(p, rootPath)); dev != "" {
		return dev
	}
	if trimmed, ok := strings.CutSuffix(p, deletedSuffix); ok {
		return t.deviceOf(relativeTo(trimmed, rootPath))
	}
	return ""
}

// underPath reports whether path is mount point mp or below it.
func underPath(path, mp string) bool {
	if mp == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == mp || strings.HasPrefix(path, mp+"/")
}

// relativeTo returns the cwd or root link text p as a path under the process's root
// rootPath (both as the reader sees them), which is how the process's own mountinfo
// names mount points; "" for a link text that is not a path (an unreachable directory,
// a pipe).
func relativeTo(p, rootPath string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	if rootPath == "/" || rootPath == "" {
		return p
	}
	if p == rootPath {
		return "/"
	}
	if rest, ok := strings.CutPrefix(p, rootPath+"/"); ok {
		return "/" + rest
	}
	return p
}

// fds calls use for every open file of the process on a wanted mount, by the mnt_id line
// of /proc/<dir>/fdinfo/<fd>. It reports whether the process's fds were not ours to read.
func (r *holderReader) fds(dir string, t *nsMounts, use func(dev, via string)) (denied bool) {
	d, err := os.OpenFile(r.root.Proc(dir, "fdinfo"), os.O_RDONLY|syscall.O_DIRECTORY, 0) // a FIFO fails, not blocks
	if err != nil {
		return r.fdsUnread(dir, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(r.maxFDs + 1)
	if err != nil && !errors.Is(err, io.EOF) && len(names) == 0 {
		return r.fdsUnread(dir, err)
	}
	if len(names) > r.maxFDs {
		r.fdCapped++
		names = names[:r.maxFDs]
	}
	for i, fd := range names {
		if !r.read() || i%64 == 63 && r.ctx.Err() != nil {
			r.unfinished++ // the scan stops at the next process
			return false
		}
		b, err := hostfs.ReadSmall(r.root.Proc(dir, "fdinfo", fd))
		if err != nil {
			continue // closed meanwhile
		}
		if id, ok := fdinfoMountID(b); ok {
			if dev, ok := t.byID[id]; ok {
				use(dev, ViaFD)
			}
		}
	}
	return false
}

// fdsUnread accounts for a process whose fdinfo directory could not be read: denied
// (reported by the caller), gone (no loss), or unreadable for another reason (counted).
func (r *holderReader) fdsUnread(dir string, err error) (denied bool) {
	if errors.Is(err, fs.ErrPermission) {
		return true
	}
	if r.alive(dir) {
		r.unreadable++
	}
	return false
}

// alive reports whether the process still runs: it has a stat, and is neither a zombie
// nor dead (a zombie has released its files, working directory and root, and the kernel
// shows it no mount table: proc(5)).
func (r *holderReader) alive(dir string) bool {
	_, state := readStat(r.root.Proc(dir, "stat"))
	return state != "" && state != "Z" && state != "X"
}

// blockedThreads counts the threads of the process in state D.
func (r *holderReader) blockedThreads(dir string) int {
	tids, err := hostfs.ReadDir(r.root.Proc(dir, "task"))
	if err != nil {
		return 0
	}
	n := 0
	for _, tid := range tids {
		if _, state := readStat(r.root.Proc(dir, "task", tid.Name(), "stat")); state == "D" {
			n++
		}
	}
	return n
}

// fdinfoMountID returns the mnt_id line of an fdinfo file ("pos:\t0\nflags:\t0100000\n
// mnt_id:\t42\n...").
func fdinfoMountID(b []byte) (int, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
			id, err := strconv.Atoi(strings.TrimSpace(v))
			return id, err == nil
		}
	}
	return 0, false
}

// readStat returns the command name and state letter of a /proc/<pid>/stat file
// ("42 (cat) D 1 ..."); both empty when it cannot be read. The name may hold spaces and
// parentheses: it ends at the last ") ".
func readStat(path string) (comm, state string) {
	b, err := hostfs.ReadSmall(path)
	if err != nil {
		return "", ""
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndex(s, ") ")
	if open < 0 || end < open || end+3 > len(s) {
		return "", ""
	}
	return s[open+1 : end], s[end+2 : end+3]
}

// cgroupPod returns the pod and container of the first /proc/<pid>/cgroup line whose path
// kubelet named (kubelet.CgroupPod); the cgroup v2 line and any v1 controller's are equally
// good.
func cgroupPod(b []byte) (podUID, containerID string) {
	for _, l := range cgroupLines(b) {
		if uid, cid := kubelet.CgroupPod(l.path); uid != "" {
			return uid, cid
		}
	}
	return "", ""
}

// cgroupLine is one line of /proc/<pid>/cgroup: "hierarchy-ID:controllers:path"
// (cgroups(7)); the cgroup v2 line is "0::<path>".
type cgroupLine struct{ hierarchy, controllers, path string }

func cgroupLines(b []byte) []cgroupLine {
	var out []cgroupLine
	for _, line := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			out = append(out, cgroupLine{parts[0], parts[1], parts[2]})
		}
	}
	return out
}

// cgroupV2Path returns the path of the cgroup v2 line of a /proc/<pid>/cgroup file, "" when
// it has none (a cgroup v1 host).
func cgroupV2Path(b []byte) string {
	for _, l := range cgroupLines(b) {
		if l.hierarchy == "0" && l.controllers == "" {
			return l.path
		}
	}
	return ""
}

// BlockedMount is a superblock whose server is not answering (Inventory.Stalled), with
// the processes that use it: they block on it (hard) or get errors (soft).
type BlockedMount struct {
	Device      string   `json:"device"`
	MountPoints []string `json:"mountpoints"`
	// ServerAddr is the stalled server's address.
	ServerAddr string `json:"server_addr"`
	// Holders are the processes using the superblock, by PID (ReadHolders).
	Holders []Holder `json:"holders"`
	// Uninspected counts the processes of the host that could not be inspected
	// (permission denied) or were left out under HolderLimits: when it is not 0, Holders
	// may miss some. It is the same for every mount of one ReadBlocked.
	Uninspected int `json:"uninspected"`
	// Incomplete is set when Holders may miss some: a process could not be inspected, was
	// left out under HolderLimits (the scan's reads or time ran out), or had more open
	// files than were looked at.
	Incomplete bool `json:"incomplete"`
}

// ReadBlocked fills inv.Blocked with every mount of a server in inv.Stalled and the
// processes using it (ReadHolders), and adds ReadHolders' warnings. It reads /proc only
// when a server is stalled: scanning every process's files is the one costly part, and
// only a dead server needs it. The scan is bounded (HolderLimits): it returns within
// limits.Timeout, or sooner when ctx ends.
//
// It also fills inv.Mounting (ReadMountPrograms): a mount stuck on a stalled server has no
// superblock for the holder scan to find.
func ReadBlocked(ctx context.Context, root hostfs.Root, inv *Inventory, limits HolderLimits) {
	inv.Blocked = nil
	ReadMountPrograms(ctx, root, inv, limits)
	if len(inv.Stalled) == 0 {
		return
	}
	inv.Blocked = stalledMounts(inv)
	devices := make([]string, len(inv.Blocked))
	for i, b := range inv.Blocked {
		devices[i] = b.Device
	}
	setBlocked(inv, readHolders(ctx, root, devices, limits))
}

// stalledMounts returns, with no holders yet, the mounts whose server inv.Stalled lists:
// the same address and, behind a local proxy, the same port (StalledServer.Reaches).
func stalledMounts(inv *Inventory) []BlockedMount {
	var out []BlockedMount
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		if slices.ContainsFunc(inv.Stalled, func(s StalledServer) bool { return s.Reaches(m) }) {
			out = append(out, BlockedMount{Device: m.Device, MountPoints: m.MountPoints, ServerAddr: m.serverAddr(), Holders: []Holder{}})
		}
	}
	return out
}

// SampleBlocked is SampleStalls followed by ReadBlocked, with the processes read while the
// stall window runs: for the mounts of every server with a transport that looks stuck in
// first, at the cost of a scan that may turn out unneeded when the server answers. On a
// host where that scan takes most of a second, the audit still returns within about the
// window. When ctx ends first, it returns ctx's error (SampleStalls) and inv.Stalled and
// inv.Blocked are not to be trusted. It fills inv.Mounting as ReadBlocked does.
func SampleBlocked(ctx context.Context, root hostfs.Root, inv *Inventory, first TransportSample, window time.Duration, limits HolderLimits) error {
	inv.Blocked = nil
	suspect := map[string]bool{}
	looksStuck := suspects(first.Transports)
	for _, t := range first.Transports {
		if looksStuck[t.Name] && t.DstAddr != "" {
			suspect[t.DstAddr] = true
		}
	}
	var devices []string
	for i := range inv.Mounts {
		if suspect[inv.Mounts[i].serverAddr()] {
			devices = append(devices, inv.Mounts[i].Device)
		}
	}
	if window <= 0 || len(devices) == 0 {
		if err := SampleStalls(ctx, root, inv, first, window); err != nil {
			return err
		}
		ReadBlocked(ctx, root, inv, limits)
		return nil
	}
	scanned := make(chan holderScan, 1)
	go func() { scanned <- readHolders(ctx, root, devices, limits) }()
	if err := SampleStalls(ctx, root, inv, first, window); err != nil {
		return err
	}
	scan := <-scanned
	ReadMountPrograms(ctx, root, inv, limits)
	inv.Blocked = stalledMounts(inv)
	if len(inv.Blocked) == 0 {
		return nil
	}
	setBlocked(inv, scan)
	return nil
}

// holderScan is what one readHolders scan found.
type holderScan struct {
	holders     map[string][]Holder
	warnings    []string
	uninspected int
	// incomplete is set when a process was left out or not looked at whole.
	incomplete bool
}

// setBlocked fills the holders of inv.Blocked from a scan that covered their devices.
func setBlocked(inv *Inventory, scan holderScan) {
	inv.Warnings = append(inv.Warnings, scan.warnings...)
	for i := range inv.Blocked {
		if h := scan.holders[inv.Blocked[i].Device]; h != nil {
			inv.Blocked[i].Holders = h
		}
		inv.Blocked[i].Uninspected = scan.uninspected
		inv.Blocked[i].Incomplete = scan.incomplete
	}
}

// serverAddr is the address the mount's transports connect to: the addr= option, or
// the server name of the mount source when there is none.
func (m *Mount) serverAddr() string {
	if m.ServerAddr != "" {
		return m.ServerAddr
	}
	return m.Server
}
