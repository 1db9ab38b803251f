package inventory

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/parallel"
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
	// Hostname is the node name the node's NFS mounts present, for a reader in a UTS
	// namespace of its own (the agent's pod, whose host name is the pod's); empty reads
	// /proc/sys/kernel/hostname.
	Hostname string
	// StatisticsOnly reads what judging a read-ahead change needs and nothing else: the
	// mount table, mountstats and each superblock's read-ahead. No nfsfs, fstab,
	// nfsmount.conf, sysctls, udev rules, sunrpc transports or tlshd: Inventory has only
	// Mounts (without what the user asked for) and Groups. The agent's read-ahead verdicts
	// read this after every write, while new mounts may be waiting for their own.
	StatisticsOnly bool
	// Logger, when set, gets at debug level how long each source took to read: where to
	// look when a read is slow.
	Logger *slog.Logger
}

// Read builds the inventory of NFS mounts under root. Only kernel pseudo-files under
// /proc and /sys, configuration under /etc (and the udev directories) and the state of
// the NFS proxy helpers (efs-utils, AZNFS) are read; no
// path below a mount point is ever opened or stat'ed, so a dead hard mount cannot hang it.
//
// Sources: /proc/<pid>/mountinfo and mountstats (proc(5),
// https://docs.kernel.org/filesystems/proc.html), /proc/fs/nfsfs/{servers,volumes}
// (fs/nfs/client.c), /sys/class/bdi/<maj:min>/read_ahead_kb
// (https://docs.kernel.org/admin-guide/abi-stable.html, /sys/class/bdi), /proc/version and
// /proc/sys, /etc/fstab, /etc/nfsmount.conf, nfs.conf and the udev rules directories; for a
// mount through a loopback proxy, the helpers' state (AttributeProxies).
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
	warn(AttributeProxies(root, mounts)...)
	done("proxy helpers")
	readAheads := startReadAheads(root, mounts)

	var nfsfsDir []string
	if opts.PID > 0 {
		nfsfsDir = []string{procDir, "net", "nfsfs"}
	} else {
		nfsfsDir = []string{"fs", "nfsfs"}
	}
	if len(mounts) > 0 && !opts.StatisticsOnly {
		if b, err := hostfs.ReadSmall(root.Proc(append(nfsfsDir, "servers")...)); err == nil {
			var err error
			inv.NFSServers, w, err = ParseNFSServers(bytes.NewReader(b))
			warn(w...)
			if err != nil {
				warn(fmt.Sprintf("reading %v", err))
			}
		} else {
			warn(fmt.Sprintf("reading nfsfs servers: %v", err))
		}
		if b, err := hostfs.ReadSmall(root.Proc(append(nfsfsDir, "volumes")...)); err == nil {
			var err error
			inv.NFSVolumes, w, err = ParseNFSVolumes(bytes.NewReader(b))
			warn(w...)
			if err != nil {
				warn(fmt.Sprintf("reading %v", err))
			}
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
	if opts.StatisticsOnly {
		inv.Mounts = completeMounts(mounts, readAheads(), stats, nil, requested{}, warn)
		inv.Groups = buildGroups(inv.Mounts)
		done("bdi read-ahead")
		return inv, nil
	}
	req := readRequested(root)
	warn(req.warnings...)
	if req.defaults.Mounter != nil || len(req.defaults.Files) > 0 {
		d := req.defaults
		inv.MountDefaults = &d
	}
	done("fstab and nfsmount.conf")

	inv.Mounts = completeMounts(mounts, readAheads(), stats, inv.NFSVolumes, req, warn)
	inv.Groups = buildGroups(inv.Mounts)
	done("bdi read-ahead")
	inv.KernelRelease, w = readKernelRelease(root)
	warn(w...)
	inv.Sysctls = readSysctls(root)
	inv.ClientIdentity = readClientIdentity(root, opts.Hostname)
	done("kernel version and sysctls")
	inv.ReadAhead, w = readReadAheadConfig(root)
	warn(w...)
	done("udev rules and nfs.conf")
	if len(mounts) > 0 {
		inv.Transports, w = readTransports(root)
		warn(w...)
		done("sunrpc transports")
	}
	if slices.ContainsFunc(inv.Mounts, func(m Mount) bool { return m.UsesTLS() }) {
		hs, w := ReadTLSHandshake(context.Background(), root, HolderLimits{})
		warn(w...)
		inv.TLSHandshake = &hs
		done("tlshd")
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

// startReadAheads starts reading the read-ahead of every mount from sysfs and returns a
// function that waits for the values, in the mounts' order. Each superblock's read-ahead
// is a file of its own, so a node with thousands of mounts has thousands of open and read
// calls to make: they run on every CPU while Read goes on with mountstats, whose reading
// keeps one CPU busy.
func startReadAheads(root hostfs.Root, mounts []Mount) (wait func() []readAheadValue) {
	values := make([]readAheadValue, len(mounts))
	done := make(chan struct{})
	go func() {
		defer close(done)
		parallel.Do(len(mounts), 0, minBDIReadsPerWorker, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				values[i] = readReadAheadKB(root, mounts[i].Device)
			}
		})
	}()
	return func() []readAheadValue {
		<-done
		return values
	}
}

// completeMounts adds to the mounts of ParseMountInfo what mountinfo does not tell: the
// server address from nfsfs volumes when there is no addr=, the client group from the
// client nfsfs says the superblock uses, read-ahead (startReadAheads, by index), the
// mountstats entry (by device, see statsByDevice) and the options the user asked for.
func completeMounts(mounts []Mount, readAheads []readAheadValue, stats map[string]mountStatsEntry,
	volumes []NFSVolume, req requested, warn func(...string)) []Mount {
	vols := map[string]NFSVolume{}
	for _, v := range volumes {
		vols[v.Device] = v
	}
	for i := range mounts {
		m := &mounts[i]
		dev := m.Device
		v, known := vols[dev]
		if m.ServerAddr == "" && v.Addr != "" {
			m.ServerAddr = v.Addr
			m.ClientGroup = groupKey(m)
		}
		if known && v.Port > 0 && v.Port != mountPort(m) {
			// The superblock uses another client than its port= says: NFSv4.1 trunking
			// detection (nfs4_discover_server_trunking) hands a new mount an existing
			// client of the same server, e.g. one reached without the proxy. nfsfs shows
			// the client in use (fs/nfs/client.c nfs_volume_list_show).
			port := ""
			if v.Port != nfsPort {
				port = strconv.Itoa(v.Port)
			}
			m.ClientGroup = groupKeyPort(m, port)
			if m.Proxy != nil {
				m.Proxy.BypassPort = v.Port
			}
		}
		if ra := readAheads[i]; ra.err != nil {
			warn(fmt.Sprintf("reading read_ahead_kb of %s: %v", dev, ra.err))
		} else {
			m.ReadAheadKB = ra.kb
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

// minBDIReadsPerWorker is the fewest read_ahead_kb files a worker of startReadAheads reads.
const minBDIReadsPerWorker = 128

// readAheadValue is a superblock's read_ahead_kb: nil kb for a device with no valid name
// (nothing is read), err when the file could not be read.
type readAheadValue struct {
	kb  *int
	err error
}

func readReadAheadKB(root hostfs.Root, dev string) readAheadValue {
	bdi, err := root.BDI(dev)
	if err != nil {
		return readAheadValue{}
	}
	v, err := hostfs.ReadInt(filepath.Join(bdi, "read_ahead_kb"))
	if err != nil {
		return readAheadValue{err: err}
	}
	kb := int(v)
	return readAheadValue{kb: &kb}
}

// mountPort is the port a mount asked for: its port= option, else the NFS port.
func mountPort(m *Mount) int {
	if p := atoiOr0(m.Options["port"]); p > 0 {
		return p
	}
	return nfsPort
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
