package inventory

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// ReadOptions select whose view of the mounts Read takes.
type ReadOptions struct {
	// PID is the process whose mount namespace is read: 0 reads /proc/self/mountinfo,
	// /proc/self/mountstats and /proc/fs/nfsfs; any other value reads /proc/<pid>/mountinfo,
	// /proc/<pid>/mountstats and /proc/<pid>/net/nfsfs (e.g. 1 for the host's namespace
	// from a container that shares the host's PID namespace).
	PID int
	// SkipOperations leaves Stats.Operations empty: the per-op rows, about 70 lines per
	// NFSv4 mount, are cut from mountstats before parsing. Audit needs only the transports
	// and ages; metrics need the operations.
	SkipOperations bool
	// Logger, when set, gets at debug level how long each source took to read: where to
	// look when a read is slow.
	Logger *slog.Logger
}

// Read builds the inventory of NFS mounts under root. Only kernel pseudo-files under
// /proc and /sys and configuration under /etc (and the udev directories) are read; no
// path below a mount point is ever opened or stat'ed, so a dead hard mount cannot hang it.
//
// Sources: /proc/<pid>/mountinfo and mountstats (proc(5),
// https://docs.kernel.org/filesystems/proc.html), /proc/fs/nfsfs/{servers,volumes}
// (fs/nfs/client.c), /sys/class/bdi/<maj:min>/read_ahead_kb
// (https://docs.kernel.org/admin-guide/abi-stable.html, /sys/class/bdi), /proc/version and
// /proc/sys, /etc/fstab, /etc/nfsmount.conf, nfs.conf and the udev rules directories.
//
// The only error is an unreadable or unusable mountinfo: without it there is no
// inventory. Every other problem (a malformed mountstats entry, a missing bdi attribute,
// an unreadable fstab) drops just that datum and adds a line to Inventory.Warnings.
func Read(root hostfs.Root, opts ReadOptions) (*Inventory, error) {
	if opts.PID < 0 {
		return nil, fmt.Errorf("invalid pid %d", opts.PID)
	}
	procDir := "self"
	if opts.PID > 0 {
		procDir = strconv.Itoa(opts.PID)
	}
	inv := &Inventory{Sysctls: map[string]string{}}
	warn := func(w ...string) { inv.Warnings = append(inv.Warnings, w...) }
	done := stageTimer(opts.Logger)

	infoPath := root.Proc(procDir, "mountinfo")
	b, err := hostfs.ReadSmall(infoPath)
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	infos, w := parseMountInfo(b, nfsOnly)
	warn(w...)
	mounts := mountsFromInfo(infos)
	done("mountinfo")

	var nfsfsDir []string
	if opts.PID > 0 {
		nfsfsDir = []string{procDir, "net", "nfsfs"}
	} else {
		nfsfsDir = []string{"fs", "nfsfs"}
	}
	if len(mounts) > 0 {
		if b, err := hostfs.ReadSmall(root.Proc(append(nfsfsDir, "servers")...)); err == nil {
			inv.NFSServers, w = ParseNFSServers(bytes.NewReader(b))
			warn(w...)
		} else {
			warn(fmt.Sprintf("reading nfsfs servers: %v", err))
		}
		if b, err := hostfs.ReadSmall(root.Proc(append(nfsfsDir, "volumes")...)); err == nil {
			inv.NFSVolumes, w = ParseNFSVolumes(bytes.NewReader(b))
			warn(w...)
		} else {
			warn(fmt.Sprintf("reading nfsfs volumes: %v", err))
		}
		done("nfsfs")
	}

	var stats map[string]mountStatsEntry
	if len(mounts) > 0 {
		var entries []mountStatsEntry
		entries, w = readMountStats(root, opts, procDir)
		warn(w...)
		stats = statsByDevice(infos, entries)
		done("mountstats")
	}
	req := readRequested(root)
	warn(req.warnings...)
	done("fstab and nfsmount.conf")

	inv.Mounts = completeMounts(root, mounts, stats, inv.NFSVolumes, req, warn)
	inv.Groups = buildGroups(inv.Mounts)
	done("bdi read-ahead")
	inv.KernelRelease, w = readKernelRelease(root)
	warn(w...)
	inv.Sysctls = readSysctls(root)
	done("kernel version and sysctls")
	inv.ReadAhead, w = readReadAheadConfig(root)
	warn(w...)
	done("udev rules and nfs.conf")
	if len(mounts) > 0 {
		inv.Transports, w = readTransports(root)
		warn(w...)
		done("sunrpc transports")
	}
	return inv, nil
}

// stageTimer returns a function that logs, at debug level, the time since the previous
// call (or since stageTimer) under the stage's name.
func stageTimer(log *slog.Logger) func(stage string) {
	if log == nil {
		return func(string) {}
	}
	last := time.Now()
	return func(stage string) {
		now := time.Now()
		log.Debug("inventory read", "stage", stage, "elapsed", now.Sub(last))
		last = now
	}
}

// nfsOnly keeps the nfs and nfs4 entries of mountinfo.
var nfsOnly = mountinfo.FSTypeFilter("nfs", "nfs4")

// parseMountInfo returns the entries of a mountinfo file that filter keeps, through
// moby/sys/mountinfo. That parser fails the whole file on one malformed line, so when it
// does, the file is parsed again line by line and only the lines it rejects are dropped.
// It reads a device field such as "0:53/../.." as 0:0, which would merge unrelated mounts
// into one superblock, so lines whose device is not major:minor are dropped first.
func parseMountInfo(b []byte, filter mountinfo.FilterFunc) ([]*mountinfo.Info, []string) {
	lines := bytes.Split(b, []byte("\n"))
	if !slices.ContainsFunc(lines, badDevice) {
		infos, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), filter)
		if err == nil {
			return infos, nil
		}
	}
	var infos []*mountinfo.Info
	var warnings []string
	for n, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if badDevice(line) {
			dev, _ := thirdField(line)
			warnings = append(warnings, fmt.Sprintf("mountinfo line %d dropped: bad device %q (want major:minor)", n+1, shorten(string(dev), 40)))
			continue
		}
		got, err := mountinfo.GetMountsFromReader(bytes.NewReader(line), filter)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("mountinfo line %d dropped: %s", n+1, shorten(err.Error(), 200)))
			continue
		}
		infos = append(infos, got...)
	}
	return infos, warnings
}

// badDevice reports whether a mountinfo line has a third field that is not major:minor.
// Lines too short to have one are left to the parser, which rejects them.
func badDevice(line []byte) bool {
	dev, ok := thirdField(line)
	return ok && !hostfs.ValidDevice(string(dev))
}

// thirdField returns the third space-separated field of a mountinfo line without
// allocating; mountinfo escapes blanks inside fields.
func thirdField(line []byte) ([]byte, bool) {
	for range 2 {
		_, rest, ok := bytes.Cut(bytes.TrimLeft(line, " "), []byte(" "))
		if !ok {
			return nil, false
		}
		line = rest
	}
	dev, _, _ := bytes.Cut(bytes.TrimLeft(line, " "), []byte(" "))
	return dev, len(dev) > 0
}

// readMountStats returns the NFS entries of mountstats in the kernel's order, nil when the
// file is unreadable. The fast path hands the kernel file straight to procfs; if procfs
// rejects it (or /proc/self is not a link, as in a copied tree), the bytes go through the
// tolerant per-entry parser.
func readMountStats(root hostfs.Root, opts ReadOptions, procDir string) ([]mountStatsEntry, []string) {
	var entries []mountStatsEntry
	var warnings []string
	var mounts []*procfs.Mount
	err := errors.New("per-op rows skipped")
	if !opts.SkipOperations {
		mounts, err = procfsMountStats(root, opts.PID)
	}
	if err == nil {
		entries = make([]mountStatsEntry, 0, len(mounts))
		for _, m := range mounts {
			e := entryFromProcfs(statsChunk{}, m)
			if e.Stats != nil {
				e.XprtLines = len(e.Stats.Transports)
			}
			entries = append(entries, e)
			if isNFSType(e.FSType) && e.Stats == nil {
				warnings = append(warnings, fmt.Sprintf("mountstats entry for %q has no NFS statistics", e.MountPoint))
			}
		}
	} else {
		var b []byte
		if opts.SkipOperations {
			b, err = readStrippedFile(root.Proc(procDir, "mountstats"))
		} else {
			b, err = hostfs.ReadSmall(root.Proc(procDir, "mountstats"))
		}
		if err != nil {
			return nil, []string{fmt.Sprintf("reading mountstats: %v", err)}
		}
		entries, warnings = parseMountStats(b)
	}
	nfs := make([]mountStatsEntry, 0, len(entries))
	for _, e := range entries {
		if isNFSType(e.FSType) {
			nfs = append(nfs, e)
		}
	}
	return nfs, warnings
}

// statsByDevice pairs the NFS lines of mountinfo with the NFS entries of mountstats and
// returns the entries by device; nil when mountstats was unreadable. The kernel prints both
// files from the same walk of the mount namespace (fs/proc_namespace.c, show_mountinfo and
// show_vfsstat), so they list mounts in the same order. Pairing by order, not by mount
// point, gives each of two superblocks stacked on one mount point its own entry. Each line
// takes the next unpaired entry with its mount point and type, so a mount made or removed
// between the two reads leaves only that mount without statistics.
func statsByDevice(infos []*mountinfo.Info, entries []mountStatsEntry) map[string]mountStatsEntry {
	if entries == nil {
		return nil
	}
	out := make(map[string]mountStatsEntry, len(infos))
	next := 0
	for _, in := range infos {
		for k := next; k < len(entries); k++ {
			e := entries[k]
			if e.MountPoint != in.Mountpoint || e.FSType != in.FSType {
				continue
			}
			// A superblock on several mount points prints the same statistics under each.
			dev := fmt.Sprintf("%d:%d", in.Major, in.Minor)
			if _, ok := out[dev]; !ok {
				out[dev] = e
			}
			next = k + 1
			break
		}
	}
	return out
}

func readStrippedFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readStripped(f, hostfs.MaxSmall)
}

func procfsMountStats(root hostfs.Root, pid int) ([]*procfs.Mount, error) {
	pfs, err := procfs.NewFS(root.Proc())
	if err != nil {
		return nil, err
	}
	var p procfs.Proc
	if pid > 0 {
		p, err = pfs.Proc(pid)
	} else {
		p, err = pfs.Self()
	}
	if err != nil {
		return nil, err
	}
	return p.MountStats()
}

// requested is what /etc/fstab and /etc/nfsmount.conf ask for.
type requested struct {
	fstab    map[string]FstabEntry // by mount point
	conf     NFSMountConf
	confFile string
	warnings []string
}

func readRequested(root hostfs.Root) requested {
	r := requested{fstab: map[string]FstabEntry{}, confFile: "/etc/nfsmount.conf"}
	if b, err := hostfs.ReadSmall(root.Etc("fstab")); err == nil {
		entries, w := ParseFstab(bytes.NewReader(b))
		r.warnings = append(r.warnings, w...)
		for _, e := range entries {
			if _, dup := r.fstab[e.MountPoint]; !dup {
				r.fstab[e.MountPoint] = e
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.warnings = append(r.warnings, fmt.Sprintf("reading fstab: %v", err))
	}
	if b, err := hostfs.ReadSmall(root.Etc("nfsmount.conf")); err == nil {
		var w []string
		r.conf, w = ParseNFSMountConf(bytes.NewReader(b), r.confFile)
		r.warnings = append(r.warnings, w...)
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.warnings = append(r.warnings, fmt.Sprintf("reading nfsmount.conf: %v", err))
	}
	return r
}

// forMount merges what the configuration asks for one mount, lowest precedence first, as
// mount.nfs applies it: nfsmount.conf global options, the [Server] section, the
// [MountPoint] section, then the fstab line. Nil when nothing applies.
func (r requested) forMount(server string, mountPoints []string) *Requested {
	opts := map[string]string{}
	var sources []string
	add := func(m map[string]string, src string) {
		for k, v := range m {
			opts[k] = v
		}
		sources = append(sources, src)
	}
	if g := r.conf.Global; g != nil {
		add(mountOptions(g), fmt.Sprintf("%s:%d", r.confFile, g.Line))
	}
	if s := r.conf.Servers[server]; s != nil {
		add(mountOptions(s), fmt.Sprintf("%s:%d", r.confFile, s.Line))
	}
	for _, mp := range mountPoints {
		if s := r.conf.MountPoints[mp]; s != nil {
			add(mountOptions(s), fmt.Sprintf("%s:%d", r.confFile, s.Line))
			break
		}
	}
	for _, mp := range mountPoints {
		if e, ok := r.fstab[mp]; ok {
			add(e.Options, fmt.Sprintf("/etc/fstab:%d", e.Line))
			break
		}
	}
	if len(sources) == 0 {
		return nil
	}
	return &Requested{Source: strings.Join(sources, ", "), Options: opts}
}

// ParseMountInfo returns the NFS superblocks of a mountinfo file (proc_pid_mountinfo(5)),
// one per device with every mount point, sorted by device, with what mountinfo alone
// tells: type, server and export, options (the superblock's, with the first mount point's
// added), the address the client uses (addr=), the effective version, transfer sizes,
// nconnect, backend and client group. Lines the parser rejects are dropped with a warning.
// Read completes the mounts from mountstats, nfsfs and sysfs; the agent's reconcile and
// the udev helper use ParseMountInfo alone, so all of nfstune sees a mount the same way.
func ParseMountInfo(b []byte) ([]Mount, []string) {
	infos, warnings := parseMountInfo(b, nfsOnly)
	return mountsFromInfo(infos), warnings
}

// MountOfDevice returns the superblock dev of a mountinfo file as ParseMountInfo would,
// whatever its file system type (the udev helper refuses a non-NFS one at once), or nil
// when no line shows dev.
func MountOfDevice(b []byte, dev string) *Mount {
	infos, _ := parseMountInfo(b, func(in *mountinfo.Info) (skip, stop bool) {
		return fmt.Sprintf("%d:%d", in.Major, in.Minor) != dev, false
	})
	if ms := mountsFromInfo(infos); len(ms) > 0 {
		return &ms[0]
	}
	return nil
}

// mountsFromInfo builds one Mount per device from mountinfo entries.
func mountsFromInfo(infos []*mountinfo.Info) []Mount {
	byDev := map[string]*Mount{}
	perMount := map[string]string{}
	for _, in := range infos {
		dev := fmt.Sprintf("%d:%d", in.Major, in.Minor)
		m, ok := byDev[dev]
		if !ok {
			m = &Mount{Device: dev, FSType: in.FSType}
			m.Server, m.Export = splitSource(in.Source)
			m.Options = parseOptions(in.VFSOptions)
			byDev[dev] = m
			perMount[dev] = in.Options
		}
		if !slices.Contains(m.MountPoints, in.Mountpoint) {
			m.MountPoints = append(m.MountPoints, in.Mountpoint)
		}
	}
	out := make([]Mount, 0, len(byDev))
	for dev, m := range byDev {
		sort.Strings(m.MountPoints)
		mergePerMountOptions(m.Options, perMount[dev])
		m.ServerAddr = m.Options["addr"]
		m.Version = nfsVersion(m.FSType, m.Options)
		m.RSize = atoiOr0(m.Options["rsize"])
		m.WSize = atoiOr0(m.Options["wsize"])
		m.NConnect = atoiOr0(m.Options["nconnect"])
		m.Backend = DetectBackend(m.Server)
		m.ClientGroup = groupKey(m)
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Mount) int { return CompareDevices(a.Device, b.Device) })
	return out
}

// completeMounts adds to the mounts of ParseMountInfo what mountinfo does not tell: the
// server address from nfsfs volumes when there is no addr=, read-ahead from sysfs, the
// mountstats entry (by device, see statsByDevice) and the options the user asked for.
func completeMounts(root hostfs.Root, mounts []Mount, stats map[string]mountStatsEntry,
	volumes []NFSVolume, req requested, warn func(...string)) []Mount {
	volAddr := map[string]string{}
	for _, v := range volumes {
		volAddr[v.Device] = v.Addr
	}
	for i := range mounts {
		m := &mounts[i]
		dev := m.Device
		if m.ServerAddr == "" && volAddr[dev] != "" {
			m.ServerAddr = volAddr[dev]
			m.ClientGroup = groupKey(m)
		}
		if bdi, err := root.BDI(dev); err == nil {
			if v, err := hostfs.ReadInt(filepath.Join(bdi, "read_ahead_kb")); err == nil {
				ra := int(v)
				m.ReadAheadKB = &ra
			} else {
				warn(fmt.Sprintf("reading read_ahead_kb of %s: %v", dev, err))
			}
		}
		if stats != nil {
			if e, ok := stats[dev]; ok {
				m.Stats = e.Stats
				m.Connections = e.XprtLines
			} else {
				warn(fmt.Sprintf("no mountstats entry for %s (%s)", dev, strings.Join(m.MountPoints, ", ")))
			}
		}
		m.Requested = req.forMount(m.Server, m.MountPoints)
	}
	return mounts
}

// mergePerMountOptions adds the per-mount options (mountinfo field 6, e.g. "ro,relatime")
// to the superblock options. A read-only mount point or superblock makes the result "ro".
func mergePerMountOptions(opts map[string]string, perMount string) {
	for k, v := range parseOptions(perMount) {
		if _, ok := opts[k]; !ok {
			opts[k] = v
		}
	}
	if _, ro := opts["ro"]; ro {
		delete(opts, "rw")
	}
}

// splitSource splits "server:/export" and "[v6addr]:/export".
func splitSource(src string) (server, export string) {
	if strings.HasPrefix(src, "[") {
		if i := strings.Index(src, "]:"); i > 0 {
			return src[1:i], src[i+2:]
		}
	}
	if i := strings.IndexByte(src, ':'); i >= 0 {
		return src[:i], src[i+1:]
	}
	return src, ""
}

// nfsVersion is the effective version from vers= (and minorversion= on kernels that print
// "vers=4,minorversion=1"); "4" alone is 4.0.
func nfsVersion(fstype string, opts map[string]string) string {
	v := opts["vers"]
	if v == "" {
		v = opts["nfsvers"]
	}
	if v == "" && fstype == "nfs4" {
		v = "4"
	}
	if v == "4" {
		if minor := opts["minorversion"]; minor != "" {
			return "4." + minor
		}
		return "4.0"
	}
	return v
}

// groupKey names the kernel NFS client a mount uses: "<proto>://<addr>[:port]/v<version>",
// e.g. "tcp://10.0.0.5/v4.1" or "tcp://[fd00::5]:2049/v3". The port appears only when the
// mount names one.
func groupKey(m *Mount) string {
	proto := m.Options["proto"]
	if proto == "" {
		proto = "tcp"
	}
	addr := m.ServerAddr
	if addr == "" {
		addr = m.Server
	}
	host := addr
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() {
		host = "[" + addr + "]"
	}
	if p := m.Options["port"]; p != "" && p != "0" {
		host = net.JoinHostPort(addr, p)
	}
	return fmt.Sprintf("%s://%s/v%s", proto, host, m.Version)
}

func buildGroups(mounts []Mount) []Group {
	idx := map[string]int{}
	var groups []Group
	var ages []float64
	for _, m := range mounts {
		i, ok := idx[m.ClientGroup]
		if !ok {
			proto := m.Options["proto"]
			if proto == "" {
				proto = "tcp"
			}
			addr := m.ServerAddr
			if addr == "" {
				addr = m.Server
			}
			groups = append(groups, Group{Key: m.ClientGroup, ServerAddr: addr, Version: m.Version, Proto: proto})
			ages = append(ages, -1)
			i = len(groups) - 1
			idx[m.ClientGroup] = i
		}
		g := &groups[i]
		g.Devices = append(g.Devices, m.Device)
		g.NConnect = max(g.NConnect, m.NConnect)
		g.Connections = max(g.Connections, m.Connections)
		if m.Stats != nil && m.Stats.Age.Seconds() > ages[i] {
			ages[i] = m.Stats.Age.Seconds()
			g.SetBy = m.Device
		}
	}
	slices.SortFunc(groups, func(a, b Group) int { return cmp.Compare(a.Key, b.Key) })
	return groups
}

// CompareDevices orders "major:minor" numerically.
func CompareDevices(a, b string) int {
	amaj, amin, _ := strings.Cut(a, ":")
	bmaj, bmin, _ := strings.Cut(b, ":")
	if c := cmp.Compare(atoiOr0(amaj), atoiOr0(bmaj)); c != 0 {
		return c
	}
	if c := cmp.Compare(atoiOr0(amin), atoiOr0(bmin)); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

func atoiOr0(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// readKernelRelease returns the release field of /proc/version
// ("Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) ..."), or
// /proc/sys/kernel/osrelease when /proc/version is missing or unparsable.
func readKernelRelease(root hostfs.Root) (string, []string) {
	s, err := hostfs.ReadString(root.Proc("version"))
	if err == nil {
		if r := parseKernelRelease(s); r != "" {
			return r, nil
		}
	}
	r, err2 := hostfs.ReadString(root.Proc("sys", "kernel", "osrelease"))
	if err2 == nil && r != "" {
		return r, nil
	}
	if err == nil {
		err = fmt.Errorf("unexpected /proc/version %q", shorten(s, 80))
	}
	return "", []string{fmt.Sprintf("reading kernel version: %v", err)}
}

func parseKernelRelease(s string) string {
	f := strings.Fields(s)
	if len(f) >= 3 && f[0] == "Linux" && f[1] == "version" {
		return f[2]
	}
	return ""
}

// nfsSysctls are the sysctls that bound NFS client throughput: RPC slot tables (set before
// the first mount to a server) and TCP buffers and queues.
func nfsSysctls() []string {
	return []string{
		"sunrpc.tcp_slot_table_entries",
		"sunrpc.tcp_max_slot_table_entries",
		"sunrpc.udp_slot_table_entries",
		"net.core.rmem_max",
		"net.core.wmem_max",
		"net.core.rmem_default",
		"net.core.wmem_default",
		"net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem",
		"net.core.netdev_max_backlog",
		"net.ipv4.tcp_window_scaling",
		"net.ipv4.tcp_timestamps",
		"net.ipv4.tcp_sack",
		"net.ipv4.tcp_slow_start_after_idle",
		"net.ipv4.tcp_congestion_control",
	}
}

// readSysctls reads each of nfsSysctls from /proc/sys; white space runs in multi-value
// sysctls ("4096\t131072\t6291456") become one space. Unreadable ones are left out.
func readSysctls(root hostfs.Root) map[string]string {
	out := map[string]string{}
	for _, name := range nfsSysctls() {
		s, err := hostfs.ReadString(root.Proc(append([]string{"sys"}, strings.Split(name, ".")...)...))
		if err != nil {
			continue
		}
		out[name] = strings.Join(strings.Fields(s), " ")
	}
	return out
}

// readReadAheadConfig gathers the udev rules touching bdi read_ahead_kb and the
// [nfsrahead] section of nfs.conf, read the way nfsrahead reads it: /usr/etc/nfs.conf,
// /usr/etc/nfs.conf.d/*.conf, /etc/nfs.conf, /etc/nfs.conf.d/*.conf, later files
// overriding earlier ones, includes followed.
func readReadAheadConfig(root hostfs.Root) (ReadAheadConfig, []string) {
	var c ReadAheadConfig
	var warnings []string
	c.UdevRules, c.Masked = readUdevRules(root)
	read := func(p string) ([]byte, error) { return hostfs.ReadSmall(root.Path(p)) }
	for _, dir := range []string{"/usr/etc", "/etc"} {
		files := []string{path.Join(dir, "nfs.conf")}
		if matches, err := filepath.Glob(root.Path(dir, "nfs.conf.d", "*.conf")); err == nil {
			sort.Strings(matches)
			for _, m := range matches {
				files = append(files, path.Join(dir, "nfs.conf.d", filepath.Base(m)))
			}
		}
		for _, f := range files {
			if _, err := read(f); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					warnings = append(warnings, fmt.Sprintf("reading %s: %v", f, err))
				}
				continue
			}
			secs, w := readNFSConfFile(read, f, 0)
			warnings = append(warnings, w...)
			for _, s := range secs {
				if s.Name != "nfsrahead" {
					continue
				}
				for k, v := range s.Keys {
					if c.NFSRahead == nil {
						c.NFSRahead = map[string]string{}
						c.NFSRaheadFrom = map[string]string{}
					}
					c.NFSRahead[k] = v
					c.NFSRaheadFrom[k] = fmt.Sprintf("%s:%d", s.File, s.Line)
				}
			}
		}
	}
	return c, warnings
}

// ByMountPoint returns the mount shown at path, or nil.
func (inv Inventory) ByMountPoint(p string) *Mount {
	for i := range inv.Mounts {
		if slices.Contains(inv.Mounts[i].MountPoints, p) {
			return &inv.Mounts[i]
		}
	}
	return nil
}

// Group returns the client group with the given key, or nil.
func (inv Inventory) Group(key string) *Group {
	for i := range inv.Groups {
		if inv.Groups[i].Key == key {
			return &inv.Groups[i]
		}
	}
	return nil
}
