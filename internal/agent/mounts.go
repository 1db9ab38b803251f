package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// MountTable is the reconcile's read: /proc/<pid>/mountinfo (/proc/self for pid 0), and
// the proxy helpers' state when a mount goes through a loopback proxy
// (inventory.AttributeProxies): the NFS superblocks with what resolving the policy needs.
// Every ReadAheadKB is nil: the reconcile reads read-ahead itself, that of new superblocks
// first, so that a new mount is tuned after one mountinfo read, however many mounts the
// host has. It keeps the superblocks it read (inventory.MountInfoParser), so that a read
// builds only those whose lines changed: on a host of thousands of mounts the new one is
// tuned after a scan of the file, not a parse of every mount's options. inventory.Read also
// reads mountstats, nfsfs, sysctls, fstab and the udev rule directories; scrapes use it.
type MountTable struct {
	root hostfs.Root
	pid  int

	mu     sync.Mutex
	parser inventory.MountInfoParser
}

// NewMountTable returns the reconcile's read of the host at root, as seen by pid.
func NewMountTable(root hostfs.Root, pid int) *MountTable {
	return &MountTable{root: root, pid: pid}
}

// Read reads the mount table. Its Mounts share their Options and MountPoints with the
// next read's: read them, do not change them.
func (t *MountTable) Read(context.Context) (*inventory.Inventory, error) {
	p := t.root.Proc(procDir(t.pid), "mountinfo")
	b, err := hostfs.ReadSmall(p)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	t.mu.Lock()
	mounts, warnings := t.parser.Parse(b)
	t.mu.Unlock()
	warnings = append(warnings, inventory.AttributeProxies(t.root, mounts)...)
	return &inventory.Inventory{Mounts: mounts, Warnings: warnings}, nil
}

// ReadMountTable is one read of a new MountTable.
func ReadMountTable(root hostfs.Root, pid int) (*inventory.Inventory, error) {
	return NewMountTable(root, pid).Read(context.Background())
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
