package hostfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// NFSShutdownAttr is the kernel path of the shutdown attribute of the NFS superblock
// device: /sys/fs/nfs/<major:minor>/shutdown (Linux 6.6, "NFS: add sysfs shutdown knob").
// It is the name shown to the user and journaled; reads and writes go below the root.
func NFSShutdownAttr(device string) string { return "/sys/fs/nfs/" + device + "/shutdown" }

// ReadNFSShutdown reads /sys/fs/nfs/<device>/shutdown: false while the superblock works,
// true once it has been shut down. An error matching fs.ErrNotExist means the kernel has
// no such attribute for device: before Linux 6.6, or not an NFS superblock of this
// network namespace.
func ReadNFSShutdown(r Root, device string) (bool, error) {
	if !ValidDevice(device) {
		return false, fmt.Errorf("reading %s: invalid device %q: want major:minor", NFSShutdownAttr("<dev>"), device)
	}
	f, err := openSysAttr(r, "fs/nfs/"+device, "shutdown", unix.O_RDONLY)
	if err != nil {
		return false, fmt.Errorf("reading %q: %w", NFSShutdownAttr(device), err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return false, fmt.Errorf("reading %q: %w", NFSShutdownAttr(device), err)
	}
	switch v := strings.TrimSpace(string(b)); v {
	case "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("reading %q: unexpected value %q, want 0 or 1", NFSShutdownAttr(device), v)
	}
}

// NFSShutdownKnob is the shutdown attribute of one NFS superblock, open for writing. The
// open file stays bound to the superblock it was opened on: once that superblock is gone,
// a write through it fails (the kernel answers ENODEV for a removed sysfs attribute), even
// when its device number already names another superblock.
type NFSShutdownKnob struct {
	root   Root
	device string
	f      *os.File
}

// OpenNFSShutdown opens /sys/fs/nfs/<device>/shutdown for writing; Shutdown writes it.
// It is the one opener for writing of the attribute; callers confirm first that device is
// an NFS superblock (inventory.ConfirmNFS), and again after the open, which binds the
// write to the superblock seen then, and journal the shutdown.
//
// As SetReadAhead, it opens the attribute confined to /sys (os.Root), refuses a link and
// never creates it: on a kernel without the attribute it fails with fs.ErrNotExist.
func OpenNFSShutdown(r Root, device string) (*NFSShutdownKnob, error) {
	if !ValidDevice(device) {
		return nil, fmt.Errorf("shutting down: invalid device %q: want major:minor", device)
	}
	// No O_TRUNC: opening changes nothing, in sysfs or in a test fixture's plain file.
	f, err := openSysAttr(r, "fs/nfs/"+device, "shutdown", unix.O_WRONLY)
	if err != nil {
		return nil, fmt.Errorf("writing 1 to %q: %w", NFSShutdownAttr(device), err)
	}
	return &NFSShutdownKnob{root: r, device: device, f: f}, nil
}

// Shutdown writes 1 through the open attribute and reads the attribute back. The kernel
// then fails every outstanding and future request of that superblock with EIO, so that
// the processes blocked on a dead server return and the file system can be unmounted; it
// cannot be undone (the kernel accepts only 1) and lasts until the superblock is gone.
// It closes the knob.
func (k *NFSShutdownKnob) Shutdown() error {
	shown := NFSShutdownAttr(k.device)
	_, werr := k.f.Write([]byte("1\n"))
	cerr := k.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("writing 1 to %q: %w", shown, err)
	}
	down, err := ReadNFSShutdown(k.root, k.device)
	if err != nil {
		return err
	}
	if !down {
		return fmt.Errorf("writing 1 to %q: it reads back 0", shown)
	}
	return nil
}

// Close closes the attribute without writing; closing twice is harmless.
func (k *NFSShutdownKnob) Close() error {
	if k.f == nil {
		return nil
	}
	err := k.f.Close()
	k.f = nil
	return err
}
