package inventory

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/nfstune/nfstune/internal/hostfs"
)

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

// ParseMountInfo returns the NFS superblocks of a mountinfo file (proc_pid_mountinfo(5)),
// one per device with every mount point, sorted by device, with what mountinfo alone
// tells: type, server and export, options (the superblock's, with the first mount point's
// added), the address the client uses (addr=), the effective version, transfer sizes,
// nconnect, backend, client group, and whether a loopback proxy sits in front of the
// server (Proxy, kind ProxyLoopback until AttributeProxies names the helper). Lines the
// parser rejects are dropped with a warning. Read completes the mounts from mountstats,
// nfsfs, sysfs and the helpers' state; the agent's reconcile and the udev helper use
// ParseMountInfo and AttributeProxies, so all of nfstune sees a mount the same way.
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

// DeviceAt returns the device of the file system mounted on mountPoint in a mountinfo
// file, whatever its type, and false when nothing is mounted there. When several are
// stacked on one mount point, it is the top one, the one a path resolves to: a mount
// stacked on another is its child, so the top one is the parent of none of the others.
// The mount point is compared as written, after filepath.Clean; it is never opened.
func DeviceAt(b []byte, mountPoint string) (string, bool) {
	mountPoint = filepath.Clean(mountPoint)
	infos, _ := parseMountInfo(b, func(in *mountinfo.Info) (skip, stop bool) {
		return in.Mountpoint != mountPoint, false
	})
	parents := map[int]bool{}
	for _, in := range infos {
		parents[in.Parent] = true
	}
	for _, in := range slices.Backward(infos) {
		if !parents[in.ID] {
			return fmt.Sprintf("%d:%d", in.Major, in.Minor), true
		}
	}
	return "", false
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
		m.MountPoints = append(m.MountPoints, in.Mountpoint)
	}
	out := make([]Mount, 0, len(byDev))
	for dev, m := range byDev {
		// Sorted, then each mount point once: a path seen twice (a mount propagated into
		// another namespace) is one. Linear in the bind mounts of a superblock, where a
		// lookup per line was quadratic.
		sort.Strings(m.MountPoints)
		m.MountPoints = slices.Compact(m.MountPoints)
		mergePerMountOptions(m.Options, perMount[dev])
		m.ServerAddr = m.Options["addr"]
		m.Version = nfsVersion(m.FSType, m.Options)
		m.RSize = atoiOr0(m.Options["rsize"])
		m.WSize = atoiOr0(m.Options["wsize"])
		m.NConnect = atoiOr0(m.Options["nconnect"])
		m.TransportSecurity = transportSecurity(m.Options)
		m.Backend = DetectBackend(m.Server)
		if isLonghorn(m) {
			m.Backend = backendLonghorn
		}
		if port := loopbackPort(m); port > 0 {
			m.Proxy = &Proxy{Kind: ProxyLoopback, Port: port}
		}
		m.ClientGroup = groupKey(m)
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Mount) int { return CompareDevices(a.Device, b.Device) })
	return out
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
