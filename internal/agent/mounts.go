package agent

import (
	"fmt"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// ReadMountTable is the reconcile's read: /proc/<pid>/mountinfo (/proc/self for pid 0),
// and the proxy helpers' state when a mount goes through a loopback proxy
// (inventory.AttributeProxies): the NFS superblocks with what resolving the policy needs. Every
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
	mounts, warnings := inventory.ParseMountInfo(b)
	warnings = append(warnings, inventory.AttributeProxies(root, mounts)...)
	return &inventory.Inventory{Mounts: mounts, Warnings: warnings}, nil
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
