package inventory

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// ErrNotNFS is returned when a device is not confirmed as an NFS superblock. Nothing may
// write its bdi then.
var ErrNotNFS = errors.New("not an NFS superblock")

// ErrNotListed is the CheckNFS failure of a device that passes every test but the listing
// of /proc/fs/nfsfs/volumes read for it; it matches ErrNotNFS too.
var ErrNotListed = errors.New("not listed in /proc/fs/nfsfs/volumes")

// CheckNFS is the one test of "this device is an NFS superblock" that comes before any
// write to its bdi: mountinfo says nfs or nfs4 for it (m), the device is anonymous (major 0,
// block devices never are), and /proc/fs/nfsfs/volumes lists it (volumes, from
// VolumeDevices). m may be nil when mountinfo has no line for the device.
func CheckNFS(dev string, m *Mount, volumes map[string]bool) error {
	switch {
	case !hostfs.ValidDevice(dev) || !strings.HasPrefix(dev, "0:"):
		return fmt.Errorf("device %q: %w: not an anonymous (major 0) device", dev, ErrNotNFS)
	case m == nil:
		return fmt.Errorf("device %s: %w: no mountinfo line shows it", dev, ErrNotNFS)
	case !isNFSType(m.FSType):
		return fmt.Errorf("device %s: %w: mountinfo says %q, not nfs or nfs4", dev, ErrNotNFS, m.FSType)
	case !volumes[dev]:
		return fmt.Errorf("device %s: %w: %w", dev, ErrNotNFS, ErrNotListed)
	}
	return nil
}

// ConfirmNFS reads /proc/<pid>/mountinfo and the nfsfs volumes of that process's network
// namespace now and runs CheckNFS on dev, for a writer that planned earlier: a device
// number is reused as soon as its superblock is gone, by any file system. pid 0 is this
// process, as in ReadOptions. It returns the mount as mountinfo shows it. An error that
// does not match ErrNotNFS means the files could not be read.
func ConfirmNFS(root hostfs.Root, pid int, dev string) (*Mount, error) {
	procDir := "self"
	if pid > 0 {
		procDir = strconv.Itoa(pid)
	}
	b, err := hostfs.ReadSmall(root.Proc(procDir, "mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("confirming %s is NFS: %w", dev, err)
	}
	m := MountOfDevice(b, dev)
	if m == nil || !isNFSType(m.FSType) {
		return m, CheckNFS(dev, m, nil)
	}
	return m, NewVolumeListing(root, pid).Check(m)
}

// VolumeListing checks devices against one read of /proc/<pid>/net/nfsfs/volumes
// (/proc/fs/nfsfs/volumes for pid 0), made at the first Check, for a writer that confirms
// several devices in one pass.
type VolumeListing struct {
	root   hostfs.Root
	pid    int
	devs   map[string]bool // nil until read
	reread bool
}

// NewVolumeListing returns a VolumeListing of pid's network namespace, not read yet.
func NewVolumeListing(root hostfs.Root, pid int) *VolumeListing {
	return &VolumeListing{root: root, pid: pid}
}

// Check runs CheckNFS on m against the listing. A device the listing lacks is checked once
// more against a fresh read, at most once per VolumeListing: a listing longer than a page is
// read in several passes of the kernel's list, and a superblock that goes away between two
// of them makes the next skip a volume (hostfs.ReadFile). An error that does not match
// ErrNotNFS means the listing could not be read.
func (v *VolumeListing) Check(m *Mount) error {
	if v.devs == nil {
		if err := v.read(m.Device); err != nil {
			return err
		}
	}
	err := CheckNFS(m.Device, m, v.devs)
	if errors.Is(err, ErrNotListed) && !v.reread {
		v.reread = true
		if err := v.read(m.Device); err != nil {
			return err
		}
		err = CheckNFS(m.Device, m, v.devs)
	}
	if errors.Is(err, ErrNotListed) {
		err = fmt.Errorf("%w (%d volumes in its last read)", err, len(v.devs))
	}
	return err
}

func (v *VolumeListing) read(dev string) error {
	devs, err := ReadVolumeDevices(v.root, v.pid)
	if err != nil {
		v.devs = map[string]bool{}
		return fmt.Errorf("confirming %s is NFS: %w", dev, err)
	}
	v.devs = devs
	return nil
}

// ReadVolumeDevices reads the devices of /proc/<pid>/net/nfsfs/volumes (/proc/fs/nfsfs/volumes
// for pid 0) with VolumeDevices.
func ReadVolumeDevices(root hostfs.Root, pid int) (map[string]bool, error) {
	p := root.Proc("fs", "nfsfs", "volumes")
	if pid > 0 {
		p = root.Proc(strconv.Itoa(pid), "net", "nfsfs", "volumes")
	}
	b, err := hostfs.ReadSmall(p)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	devs, err := volumeDevices(b)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	return devs, nil
}

// ErrSuperblockChanged means the device no longer shows the superblock that was read
// earlier: it was unmounted and its device number given to another one, maybe of the same
// export.
var ErrSuperblockChanged = errors.New("the device shows another superblock")

// SuperblockID is what tells one NFS superblock from a later one given the same device
// number (an anonymous device number is reused as soon as its superblock is gone): its
// source, the mount IDs of the mountinfo lines showing it, and its age in mountstats,
// read at ReadAt.
type SuperblockID struct {
	Device string `json:"device"`
	// Source is "server:export" as mountinfo shows it.
	Source string `json:"source"`
	// MountIDs are the mount IDs (mountinfo field 1) of the lines showing the device.
	// The kernel reuses a freed mount ID too, so they are compared along with the age.
	MountIDs []int `json:"mount_ids"`
	// AgeSeconds is the "age:" of the superblock's mountstats entry, whole seconds since
	// it was mounted (nfs_server mount_time); nil when mountstats has no entry for it.
	AgeSeconds *int64 `json:"age_seconds,omitempty"`
	// ReadAt is when it was read.
	ReadAt time.Time `json:"read_at"`
}

// ageSlack absorbs the whole seconds of mountstats' age: two reads of one superblock
// differ from the time between them by less than this.
const ageSlack = 2 * time.Second

// ReadSuperblockID confirms, as ConfirmNFS does for pid's mount namespace (0: this
// process, as in ReadOptions), that dev is an NFS superblock, and reads its SuperblockID
// from /proc/<pid>/mountinfo and mountstats. It returns the mount as mountinfo shows it now.
func ReadSuperblockID(root hostfs.Root, pid int, dev string) (*SuperblockID, *Mount, error) {
	at := time.Now()
	procDir := "self"
	if pid > 0 {
		procDir = strconv.Itoa(pid)
	}
	b, err := hostfs.ReadSmall(root.Proc(procDir, "mountinfo"))
	if err != nil {
		return nil, nil, fmt.Errorf("confirming %s is NFS: %w", dev, err)
	}
	m := MountOfDevice(b, dev)
	if m == nil || !isNFSType(m.FSType) {
		return nil, m, CheckNFS(dev, m, nil)
	}
	if err := NewVolumeListing(root, pid).Check(m); err != nil {
		return nil, m, err
	}
	id := &SuperblockID{Device: dev, Source: m.Server + ":" + m.Export, ReadAt: at}
	infos, _ := parseMountInfo(b, nfsOnly)
	for _, in := range infos {
		if fmt.Sprintf("%d:%d", in.Major, in.Minor) == dev {
			id.MountIDs = append(id.MountIDs, in.ID)
		}
	}
	entries, _ := readMountStats(root, ReadOptions{SkipOperations: true}, procDir)
	if e, ok := statsByDevice(infos, entries)[dev]; ok && e.Stats != nil {
		age := int64(e.Stats.Age / time.Second)
		id.AgeSeconds = &age
	}
	return id, m, nil
}

// Same returns nil when now, read later, is the superblock id names, and an error matching
// ErrSuperblockChanged when it is not: another source; none of id's mount IDs left; or an
// age that grew by less than the time between the reads (a superblock mounted since). A
// superblock mounted again within ageSlack of its first mount, on freed mount IDs, passes:
// nothing in /proc tells the two apart then.
func (id *SuperblockID) Same(now *SuperblockID) error {
	changed := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w: %s", id.Device, ErrSuperblockChanged, fmt.Sprintf(format, a...))
	}
	switch {
	case now.Device != id.Device:
		return changed("device %s read instead", now.Device)
	case now.Source != id.Source:
		return changed("it now shows %s, not %s", now.Source, id.Source)
	case !slices.ContainsFunc(now.MountIDs, func(n int) bool { return slices.Contains(id.MountIDs, n) }):
		return changed("mount IDs %v now, %v before", now.MountIDs, id.MountIDs)
	}
	if id.AgeSeconds != nil && now.AgeSeconds != nil {
		elapsed := now.ReadAt.Sub(id.ReadAt)
		before, after := time.Duration(*id.AgeSeconds)*time.Second, time.Duration(*now.AgeSeconds)*time.Second
		if after+ageSlack < before+elapsed {
			return changed("mounted %s ago, but the superblock read %s ago was mounted %s before that", after, elapsed.Round(time.Millisecond), before)
		}
	}
	return nil
}
