package inventory

import (
	"bytes"
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
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
	groups := groupByDevice(infos)
	out := make([]Mount, 0, len(groups))
	for _, g := range groups {
		out = append(out, buildMount(g))
	}
	return out
}

// deviceEntries are the mountinfo entries of one superblock, in file order.
type deviceEntries struct {
	major, minor int
	infos        []*mountinfo.Info
}

// devNum is a device's major and minor numbers.
type devNum struct{ major, minor int }

// groupByDevice groups entries by device, sorted by device.
func groupByDevice(infos []*mountinfo.Info) []deviceEntries {
	byDev := make(map[devNum]int, len(infos))
	var groups []deviceEntries
	for _, in := range infos {
		dev := devNum{in.Major, in.Minor}
		i, ok := byDev[dev]
		if !ok {
			i = len(groups)
			byDev[dev] = i
			groups = append(groups, deviceEntries{major: in.Major, minor: in.Minor})
		}
		groups[i].infos = append(groups[i].infos, in)
	}
	slices.SortFunc(groups, func(a, b deviceEntries) int {
		return cmp.Or(cmp.Compare(a.major, b.major), cmp.Compare(a.minor, b.minor))
	})
	return groups
}

// buildMount is the Mount of one superblock's entries: the first entry's superblock and
// per-mount options, every entry's mount point.
func buildMount(g deviceEntries) Mount {
	first := g.infos[0]
	m := &Mount{Device: strconv.Itoa(g.major) + ":" + strconv.Itoa(g.minor), FSType: first.FSType}
	m.Server, m.Export = splitSource(first.Source)
	m.Options = parseOptionsWithRoom(first.VFSOptions, strings.Count(first.Options, ",")+1)
	m.MountPoints = make([]string, 0, len(g.infos))
	for _, in := range g.infos {
		m.MountPoints = append(m.MountPoints, in.Mountpoint)
	}
	// Sorted, then each mount point once: a path seen twice (a mount propagated into
	// another namespace) is one. Linear in the bind mounts of a superblock, where a
	// lookup per line was quadratic.
	sort.Strings(m.MountPoints)
	m.MountPoints = slices.Compact(m.MountPoints)
	mergePerMountOptions(m.Options, first.Options)
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
	return *m
}

// MountInfoParser is ParseMountInfo for a caller that reads one mountinfo file again and
// again, as the agent's reconcile does on every change of the mount table. It keeps each
// line's entry and each superblock's Mount with the entries it was built from, and parses
// again only the lines, and builds again only the superblocks, that changed: a host's
// 10,000th mount then costs the file's scan, not 10,000 parses, before it is tuned. Its
// results equal ParseMountInfo's. The Mounts it returns share their Options maps and
// MountPoints slices with its memory, so callers must not change them (each Proxy is a
// copy: AttributeProxies fills it in). Not safe for concurrent use.
type MountInfoParser struct {
	lines  map[string]*mountinfo.Info // by line; nil for a line of another file system
	mounts map[devNum]builtMount
}

// builtMount is a Mount with the entries it was built from: a later read whose entries for
// the device are these same ones (the same lines, so the same *Info) reuses it.
type builtMount struct {
	infos []*mountinfo.Info
	mount Mount
}

// Parse is ParseMountInfo.
func (p *MountInfoParser) Parse(b []byte) ([]Mount, []string) {
	infos, warnings := p.entries(b)
	groups := groupByDevice(infos)
	mounts := make(map[devNum]builtMount, len(groups))
	out := make([]Mount, 0, len(groups))
	for _, g := range groups {
		dev := devNum{g.major, g.minor}
		built, ok := p.mounts[dev]
		if !ok || !slices.Equal(built.infos, g.infos) {
			built = builtMount{infos: g.infos, mount: buildMount(g)}
		}
		mounts[dev] = built
		m := built.mount
		if m.Proxy != nil {
			proxy := *m.Proxy
			m.Proxy = &proxy
		}
		out = append(out, m)
	}
	p.mounts = mounts
	return out, warnings
}

// entries is parseMountInfo(b, nfsOnly) that parses only the lines the last call did not
// see. The new lines go to moby/sys/mountinfo together, and one by one when it rejects
// them together, so that, as in parseMountInfo, a bad line drops itself alone.
func (p *MountInfoParser) entries(b []byte) ([]*mountinfo.Info, []string) {
	type warning struct {
		line int
		text string
	}
	var (
		lines    = bytes.Split(b, []byte("\n"))
		parsed   = make([]*mountinfo.Info, len(lines))
		known    = make(map[string]*mountinfo.Info, len(lines))
		fresh    []int // indexes of the lines to parse
		warnings []warning
	)
	for n, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if in, ok := p.lines[string(line)]; ok {
			parsed[n], known[string(line)] = in, in
			continue
		}
		if badDevice(line) {
			dev, _ := thirdField(line)
			warnings = append(warnings, warning{n, fmt.Sprintf("mountinfo line %d dropped: bad device %q (want major:minor)", n+1, shorten(string(dev), 40))})
			continue
		}
		fresh = append(fresh, n)
	}
	if len(fresh) > 0 {
		batch := make([][]byte, len(fresh))
		for i, n := range fresh {
			batch[i] = lines[n]
		}
		got, err := mountinfo.GetMountsFromReader(bytes.NewReader(bytes.Join(batch, []byte("\n"))), nil)
		if err != nil || len(got) != len(fresh) {
			got = make([]*mountinfo.Info, len(fresh))
			for i, n := range fresh {
				one, err := mountinfo.GetMountsFromReader(bytes.NewReader(lines[n]), nil)
				if err != nil || len(one) != 1 {
					warnings = append(warnings, warning{n, fmt.Sprintf("mountinfo line %d dropped: %s", n+1, shorten(fmt.Sprint(err), 200))})
					continue
				}
				got[i] = one[0]
			}
		}
		for i, n := range fresh {
			if got[i] == nil {
				continue // dropped with a warning
			}
			in := got[i]
			if skip, _ := nfsOnly(in); skip {
				in = nil
			}
			parsed[n], known[string(lines[n])] = in, in
		}
	}
	p.lines = known
	infos := make([]*mountinfo.Info, 0, len(parsed))
	for _, in := range parsed {
		if in != nil {
			infos = append(infos, in)
		}
	}
	slices.SortFunc(warnings, func(a, b warning) int { return cmp.Compare(a.line, b.line) })
	var texts []string
	for _, w := range warnings {
		texts = append(texts, w.text)
	}
	return infos, texts
}

// mergePerMountOptions adds the per-mount options (mountinfo field 6, e.g. "ro,relatime")
// to the superblock options. A read-only mount point or superblock makes the result "ro".
func mergePerMountOptions(opts map[string]string, perMount string) {
	for o := range strings.SplitSeq(perMount, ",") {
		if o == "" {
			continue
		}
		k, v, _ := strings.Cut(o, "=")
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
