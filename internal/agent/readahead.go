package agent

import (
	"fmt"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// errNotNFS is returned when a device is not confirmed as an NFS superblock; nothing is
// written then.
var errNotNFS = inventory.ErrNotNFS

// nfsVolumes returns the devices of /proc/<pid>/net/nfsfs/volumes (/proc/fs/nfsfs/volumes
// for pid 0): the bdi names of the NFS superblocks in that process's network namespace.
func nfsVolumes(root hostfs.Root, pid int) (map[string]bool, error) {
	return inventory.ReadVolumeDevices(root, pid)
}

// setReadAhead writes kb to /sys/class/bdi/<device>/read_ahead_kb through the guarded
// writer apply uses, after inventory.CheckNFS confirms the device from this reconcile's
// mountinfo (m) and nfsfs volumes, so that a stale or crafted device number can never
// retune a block device.
func setReadAhead(root hostfs.Root, m *inventory.Mount, volumes map[string]bool, kb int) error {
	if err := inventory.CheckNFS(m.Device, m, volumes); err != nil {
		return fmt.Errorf("setting read-ahead: %w", err)
	}
	_, err := hostfs.SetReadAhead(root, m.Device, kb)
	return err
}
