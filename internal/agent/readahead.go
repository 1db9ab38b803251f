package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// errNotNFS is returned when a device is not confirmed as an NFS superblock; nothing is
// written then.
var errNotNFS = errors.New("not an NFS superblock")

// nfsVolumes returns the DEV column of /proc/<pid>/net/nfsfs/volumes (/proc/fs/nfsfs/volumes
// for pid 0): the bdi names of the NFS superblocks in that process's network namespace. Rows are "v%u %s %s %-12s %-33s %s"
// (fs/nfs/client.c nfs_volume_list_show) after a header starting with "NV"; columns are
// split on white space since their widths changed between kernels.
func nfsVolumes(root hostfs.Root, pid int) (map[string]bool, error) {
	p := root.Proc(procDir(pid), "net", "nfsfs", "volumes")
	if pid == 0 {
		p = root.Proc("fs", "nfsfs", "volumes")
	}
	b, err := hostfs.ReadSmall(p)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	return inventory.VolumeDevices(b), nil
}

// setReadAhead writes kb to /sys/class/bdi/<device>/read_ahead_kb in place and reads it
// back. It refuses unless mountinfo says nfs or nfs4, the device is anonymous (major 0)
// and the kernel lists it in nfsfs volumes, so a stale or crafted device number can never
// retune a block device.
func setReadAhead(root hostfs.Root, m *inventory.Mount, volumes map[string]bool, kb int) error {
	if m.FSType != "nfs" && m.FSType != "nfs4" {
		return fmt.Errorf("setting read-ahead of %s: %w: fstype %q", m.Device, errNotNFS, m.FSType)
	}
	if !strings.HasPrefix(m.Device, "0:") || !volumes[m.Device] {
		return fmt.Errorf("setting read-ahead of %s: %w: not an anonymous device listed in nfsfs volumes", m.Device, errNotNFS)
	}
	dir, err := root.BDI(m.Device)
	if err != nil {
		return fmt.Errorf("setting read-ahead: %w", err)
	}
	p := dir + "/read_ahead_kb"
	// No O_CREATE: sysfs attributes exist or the bdi is gone.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("setting %q to %d: %w", p, kb, err)
	}
	_, werr := f.Write([]byte(strconv.Itoa(kb) + "\n"))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("setting %q to %d: %w", p, kb, err)
	}
	got, err := hostfs.ReadInt(p)
	if err != nil {
		return fmt.Errorf("reading back %q: %w", p, err)
	}
	// The kernel keeps read-ahead in pages, so a value that is not a multiple of the page
	// size reads back rounded down.
	if got > int64(kb) || int64(kb)-got >= int64(os.Getpagesize()/1024) {
		return fmt.Errorf("reading back %q: got %d, wrote %d", p, got, kb)
	}
	return nil
}
