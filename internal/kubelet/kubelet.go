// Package kubelet tells which pods use an NFS superblock from the paths kubelet mounts it
// on, without asking the API server: a pod's volumes live under
// <root>/pods/<pod UID>/volumes/<plugin>/<name>, and a CSI driver that stages a volume
// mounts it once per node under <root>/plugins/kubernetes.io/csi/<driver>/<sha256 of the
// volume handle>/globalmount before bind-mounting it into each pod. <root> is kubelet's
// --root-dir: /var/lib/kubelet, or another directory named kubelet (k0s, MicroK8s), which
// the package's functions take for it when labelling; a decision that acts on a mount uses
// Root, the one directory the node's kubelet has.
package kubelet

import (
	"path"
	"slices"
	"strings"
)

// NFSDriver is the driver reported for kubelet's in-tree NFS volume plugin.
const NFSDriver = "kubernetes.io/nfs"

// PodVolume is one pod's use of a superblock, as its mount paths tell it. A field is
// empty when no path tells it.
type PodVolume struct {
	// PodUID is the pod's metadata.uid.
	PodUID string
	// Volume is the pod's volume name: the directory of an in-tree NFS volume (the PV name
	// for a PV-backed one), or the volume of a subPath mount.
	Volume string
	// PV is the directory of a CSI volume: the PersistentVolume's name (the volume's name
	// for an inline ephemeral one).
	PV string
	// Driver is kubernetes.io/nfs for the in-tree plugin, or the CSI driver that staged
	// the superblock; drivers that mount without staging (NFS CSI) leave it empty.
	Driver string
}

// PodVolumes returns the pods that mountPoints (every mount point of one superblock)
// show using it, one per pod, sorted by UID. When a pod's paths disagree on a field (two
// volumes of one pod on the same superblock), the smallest value wins, so the result is
// the same at every scrape.
func PodVolumes(mountPoints []string) []PodVolume {
	var stagedBy string
	byPod := make(map[string]*PodVolume)
	for _, mp := range mountPoints {
		seg := strings.Split(strings.Trim(mp, "/"), "/")
		k := slices.Index(seg, "kubelet")
		if k < 0 {
			continue
		}
		if d, ok := csiDriver(seg[k+1:]); ok {
			stagedBy = least(stagedBy, d)
			continue
		}
		pv, ok := podPath(seg[k+1:])
		if !ok {
			continue
		}
		cur := byPod[pv.PodUID]
		if cur == nil {
			byPod[pv.PodUID] = &pv
			continue
		}
		cur.Volume = least(cur.Volume, pv.Volume)
		cur.PV = least(cur.PV, pv.PV)
		cur.Driver = least(cur.Driver, pv.Driver)
	}
	out := make([]PodVolume, 0, len(byPod))
	for _, pv := range byPod {
		if pv.Driver == "" && pv.PV != "" {
			pv.Driver = stagedBy
		}
		out = append(out, *pv)
	}
	slices.SortFunc(out, func(a, b PodVolume) int { return strings.Compare(a.PodUID, b.PodUID) })
	return out
}

// podPath parses the part of a mount point after kubelet's root directory:
//
//	pods/<uid>/volumes/kubernetes.io~nfs/<volume>
//	pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount
//	pods/<uid>/volume-subpaths/<volume>/<container>/<index>
func podPath(seg []string) (PodVolume, bool) {
	if len(seg) < 5 || seg[0] != "pods" || !isPodUID(seg[1]) {
		return PodVolume{}, false
	}
	pv := PodVolume{PodUID: seg[1]}
	switch {
	case len(seg) == 5 && seg[2] == "volumes" && seg[3] == "kubernetes.io~nfs":
		pv.Volume, pv.Driver = seg[4], NFSDriver
	case len(seg) == 6 && seg[2] == "volumes" && seg[3] == "kubernetes.io~csi" && seg[5] == "mount":
		pv.PV = seg[4]
	case len(seg) == 6 && seg[2] == "volume-subpaths":
		pv.Volume = seg[3]
	default:
		return PodVolume{}, false
	}
	return pv, true
}

// csiDriver parses a CSI staging path after kubelet's root directory,
// plugins/kubernetes.io/csi/<driver>/<volume handle hash>/globalmount, and returns the
// driver. The layout before Kubernetes 1.24, plugins/kubernetes.io/csi/pv/<pv>/globalmount,
// names no driver; it is recognised and gives "".
func csiDriver(seg []string) (string, bool) {
	if len(seg) != 6 || seg[0] != "plugins" || seg[1] != "kubernetes.io" || seg[2] != "csi" || seg[5] != "globalmount" {
		return "", false
	}
	if seg[3] == "pv" {
		return "", true
	}
	return seg[3], true
}

// isPodUID accepts the UIDs kubelet names pod directories with: a UUID, or the 32 hex
// digits of a static pod's hash.
func isPodUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f':
		case r == '-' && len(s) == 36 && (i == 8 || i == 13 || i == 18 || i == 23):
		default:
			return false
		}
	}
	return true
}

// least returns the smaller of two values, ignoring an empty one.
func least(a, b string) string {
	if a == "" || (b != "" && b < a) {
		return b
	}
	return a
}

// VolumePod returns the pod UID when mountPoint is one of kubelet's pod volume paths
// (podPath's layouts, below a directory named kubelet).
func VolumePod(mountPoint string) (string, bool) {
	seg := strings.Split(strings.Trim(mountPoint, "/"), "/")
	k := slices.Index(seg, "kubelet")
	if k < 0 {
		return "", false
	}
	pv, ok := podPath(seg[k+1:])
	return pv.PodUID, ok
}

// IsStaging reports whether mountPoint is a CSI driver's staging path (globalmount), which
// kubelet mounts once per node for the pods of the node that use the volume.
func IsStaging(mountPoint string) bool {
	_, ok := StagingDriver(mountPoint)
	return ok
}

// StagingDriver returns the CSI driver of a staging path (empty for the layout before
// Kubernetes 1.24, which names none), and whether mountPoint is one.
func StagingDriver(mountPoint string) (string, bool) {
	seg := strings.Split(strings.Trim(mountPoint, "/"), "/")
	k := slices.Index(seg, "kubelet")
	if k < 0 {
		return "", false
	}
	return csiDriver(seg[k+1:])
}

// DefaultRoot is kubelet's --root-dir when the flag is not given (kubelet's
// cmd/kubelet/app/options: defaultRootDir).
const DefaultRoot = "/var/lib/kubelet"

// Root is the kubelet root directory a node actually has: the agent's --kubelet-root-dir,
// or kubelet's own --root-dir (RootFromCommandLine). Unlike VolumePod and IsStaging, which
// take any directory named kubelet for it (good enough for a label), its methods accept
// only paths below this one directory: a decision that cuts a mount must not take
// /srv/kubelet/pods/... or /home/x/kubelet/plugins/... for a pod's volume.
type Root string

// VolumePod returns the pod UID when mountPoint is one of kubelet's pod volume paths below
// r (podPath's layouts).
func (r Root) VolumePod(mountPoint string) (string, bool) {
	seg, ok := r.below(mountPoint)
	if !ok {
		return "", false
	}
	pv, ok := podPath(seg)
	return pv.PodUID, ok
}

// IsStaging reports whether mountPoint is a CSI driver's staging path (globalmount) below r.
func (r Root) IsStaging(mountPoint string) bool {
	seg, ok := r.below(mountPoint)
	if !ok {
		return false
	}
	_, ok = csiDriver(seg)
	return ok
}

// below returns the segments of mountPoint after r, and false when r is not an absolute
// clean path or mountPoint is not below it.
func (r Root) below(mountPoint string) ([]string, bool) {
	root := string(r)
	if !strings.HasPrefix(root, "/") || path.Clean(root) != root || root == "/" {
		return nil, false
	}
	rest, ok := strings.CutPrefix(mountPoint, root+"/")
	if !ok || path.Clean("/"+rest) != "/"+rest {
		return nil, false
	}
	return strings.Split(rest, "/"), true
}

// RootFromCommandLine returns the root directory of a kubelet process from its
// NUL-separated command line (/proc/<pid>/cmdline): the value of --root-dir (as
// "--root-dir=DIR", "--root-dir DIR", or with one dash, as Go's flag package and cobra's
// pflag accept), else DefaultRoot. A command line kubelet's flag parsing would reject
// (--root-dir with no value, a relative or unclean path) gives false: the root is then
// not known.
func RootFromCommandLine(cmdline []byte) (Root, bool) {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	dir, found := "", false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "root-dir" {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", false
			}
			i++
			value = args[i]
		}
		dir, found = value, true // the last one wins, as in flag parsing
	}
	if !found {
		return DefaultRoot, true
	}
	if !strings.HasPrefix(dir, "/") || path.Clean(dir) != dir || dir == "/" {
		return "", false
	}
	return Root(dir), true
}
