package agent

import (
	"errors"
	"fmt"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// errNotNFS is returned when a device is not confirmed as an NFS superblock; nothing is
// written then.
var errNotNFS = inventory.ErrNotNFS

// newVolumeListing returns the nfsfs volumes of the agent's network namespace for one
// pass, read when its first write needs them.
func (a *Agent) newVolumeListing() *inventory.VolumeListing {
	return inventory.NewVolumeListing(a.cfg.Root, a.cfg.PID)
}

// confirmNFS runs volumes.Check on m and counts a listing that cannot be read as a read
// error.
func (a *Agent) confirmNFS(volumes *inventory.VolumeListing, m *inventory.Mount) error {
	err := volumes.Check(m)
	if err != nil && !errors.Is(err, errNotNFS) {
		a.cfg.Metrics.Errors.WithLabelValues("read").Inc()
	}
	return err
}

// setReadAhead writes kb to /sys/class/bdi/<device>/read_ahead_kb through the guarded
// writer apply uses, after volumes confirms the device from this pass's mountinfo (m) and
// nfsfs volumes, so that a stale or crafted device number can never retune a block device.
func setReadAhead(root hostfs.Root, m *inventory.Mount, volumes *inventory.VolumeListing, kb int) error {
	if err := volumes.Check(m); err != nil {
		return fmt.Errorf("setting read-ahead: %w", err)
	}
	_, err := hostfs.SetReadAhead(root, m.Device, kb)
	return err
}
