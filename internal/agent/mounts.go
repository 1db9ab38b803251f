package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// ReadMountTable is the reconcile's read: /proc/<pid>/mountinfo (/proc/self for pid 0)
// and nothing else, the NFS superblocks with what resolving the policy needs. Every
// ReadAheadKB is nil: the reconcile reads read-ahead itself, that of new superblocks first,
// so that a new mount is tuned after one mountinfo read, however many mounts the host
// has. inventory.Read also reads mountstats, nfsfs, sysctls, fstab and the udev rule
// directories; scrapes use it.
func ReadMountTable(root hostfs.Root, pid int) (*inventory.Inventory, error) {
	p := root.Proc(procDir(pid), "mountinfo")
	b, err := hostfs.ReadSmall(p)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	return &inventory.Inventory{Mounts: parseNFSMountInfo(b)}, nil
}

// readReadAhead returns a superblock's read_ahead_kb, or nil when it cannot be read
// (usually a superblock being unmounted: its bdi goes before its mountinfo line).
func readReadAhead(root hostfs.Root, device string) *int {
	dir, err := root.BDI(device)
	if err != nil {
		return nil
	}
	n, err := hostfs.ReadInt(dir + "/read_ahead_kb")
	if err != nil {
		return nil
	}
	v := int(n)
	return &v
}

// parseNFSMountInfo returns the nfs and nfs4 superblocks of a mountinfo file, one per
// device with every mount point, sorted by device. Lines are (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// mount ID, parent ID, major:minor, root, mount point, options, optional fields ending
// with "-", then fstype, source and super options. Malformed lines are skipped.
func parseNFSMountInfo(b []byte) []inventory.Mount {
	byDev := make(map[string]*inventory.Mount)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			continue
		}
		fstype, source := f[sep+1], f[sep+2]
		if (fstype != "nfs" && fstype != "nfs4") || !hostfs.ValidDevice(f[2]) {
			continue
		}
		mp := unescapeOctal(f[4])
		if m := byDev[f[2]]; m != nil {
			m.MountPoints = append(m.MountPoints, mp)
			continue
		}
		opts := map[string]string{}
		if sep+3 < len(f) {
			for _, o := range strings.Split(f[sep+3], ",") {
				k, v, _ := strings.Cut(o, "=")
				opts[k] = v
			}
		}
		server, export := splitSource(unescapeOctal(source))
		byDev[f[2]] = &inventory.Mount{
			Device:      f[2],
			MountPoints: []string{mp},
			Server:      server,
			ServerAddr:  opts["addr"],
			Export:      export,
			FSType:      fstype,
			Version:     opts["vers"],
			Backend:     inventory.DetectBackend(server),
			Options:     opts,
		}
	}
	out := make([]inventory.Mount, 0, len(byDev))
	for _, m := range byDev {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out
}

// splitSource splits "server:/export" and "[v6addr]:/export".
func splitSource(s string) (server, export string) {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]:"); i >= 0 {
			return s[:i+1], s[i+2:]
		}
	}
	if i := strings.Index(s, ":"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// unescapeOctal decodes the \ooo escapes the kernel writes for space, tab, newline and
// backslash in mount points and sources.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && isOctal(s, i+1) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string, i int) bool {
	if i+3 > len(s) {
		return false
	}
	for _, c := range []byte(s[i : i+3]) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return s[i] <= '3'
}
