package inventory

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// ErrNotNFS is returned when a device is not confirmed as an NFS superblock. Nothing may
// write its bdi then.
var ErrNotNFS = errors.New("not an NFS superblock")

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
		return fmt.Errorf("device %s: %w: not listed in /proc/fs/nfsfs/volumes", dev, ErrNotNFS)
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
	volumes, err := ReadVolumeDevices(root, pid)
	if err != nil {
		return m, fmt.Errorf("confirming %s is NFS: %w", dev, err)
	}
	return m, CheckNFS(dev, m, volumes)
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
	return VolumeDevices(b), nil
}
