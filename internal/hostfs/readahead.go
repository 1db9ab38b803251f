package hostfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrOverwritten says that read_ahead_kb, read back right after SetReadAhead wrote it, held
// neither the value written nor that value in whole pages. The kernel stores any value
// (mm/backing-dev.c read_ahead_kb_store), so another writer changed it in between: udev's
// nfsrahead, say, which writes once when an NFS superblock's bdi appears.
var ErrOverwritten = errors.New("another writer changed it right after this write")

// MinReadAheadKB is the smallest read-ahead nfstune writes: one page. The kernel keeps
// read_ahead_kb in whole pages (mm/backing-dev.c read_ahead_kb_store: kb >> (PAGE_SHIFT -
// 10)), so 1 to 3 KiB would be stored as 0, read-ahead off.
const MinReadAheadKB = 4

// SetReadAhead writes kb to /sys/class/bdi/<device>/read_ahead_kb in place and returns
// the value read back. It is the one writer of read_ahead_kb; callers confirm first
// that device is an NFS superblock (inventory.ConfirmNFS).
//
// The attribute is opened without O_CREAT below /sys with os.OpenRoot, so that a crafted
// device name or a link cannot leave /sys (the bdi entries themselves are links into
// /sys/devices/virtual/bdi), and the attribute itself must not be a link. The kernel keeps
// read-ahead in pages (mm/backing-dev.c read_ahead_kb_store: kb >> (PAGE_SHIFT - 10)), so
// the value read back may be kb rounded down to a multiple of the page size: 1001 reads
// back 1000 with 4 KiB pages (Documentation/ABI/stable/sysfs-class-bdi). A kb from 1 to
// MinReadAheadKB-1 is refused, since the kernel would turn read-ahead off; 0 is written, as
// revert restores a read-ahead someone had turned off.
func SetReadAhead(r Root, device string, kb int) (int, error) {
	if !ValidDevice(device) {
		return 0, fmt.Errorf("setting read-ahead: invalid device %q: want major:minor", device)
	}
	if kb < 0 {
		return 0, fmt.Errorf("setting read-ahead of %s: negative value %d", device, kb)
	}
	if kb > 0 && kb < MinReadAheadKB {
		return 0, fmt.Errorf("setting read-ahead of %s: %d KiB is below one page (%d KiB), which the kernel stores as 0, read-ahead off", device, kb, MinReadAheadKB)
	}
	shown := "/sys/class/bdi/" + device + "/read_ahead_kb"
	// O_TRUNC does nothing on sysfs; it keeps a test fixture's plain file exact.
	f, err := openBDIAttr(r, device, unix.O_WRONLY|unix.O_TRUNC)
	if err != nil {
		return 0, fmt.Errorf("setting %q to %d: %w", shown, kb, err)
	}
	_, werr := f.Write([]byte(strconv.Itoa(kb) + "\n"))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return 0, fmt.Errorf("setting %q to %d: %w", shown, kb, err)
	}
	f, err = openBDIAttr(r, device, unix.O_RDONLY)
	if err != nil {
		return 0, fmt.Errorf("reading back %q: %w", shown, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("reading back %q: %w", shown, err)
	}
	got, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("reading back %q: %w", shown, err)
	}
	if !pageRounded(kb, got, os.Getpagesize()/1024) {
		return got, fmt.Errorf("setting %q to %d: read back %d: %w", shown, kb, got, ErrOverwritten)
	}
	return got, nil
}

// pageRounded reports whether got is want rounded down to whole pages of pageKB KiB.
func pageRounded(want, got, pageKB int) bool {
	if pageKB < 1 {
		pageKB = 1
	}
	return got <= want && want-got < pageKB
}

// openBDIAttr opens read_ahead_kb of a bdi confined to /sys (openSysAttr).
func openBDIAttr(r Root, device string, flag int) (*os.File, error) {
	return openSysAttr(r, "class/bdi/"+device, "read_ahead_kb", flag)
}

// openSysAttr opens the attribute name of the directory dir below /sys, confined to /sys:
// the directory is resolved with os.Root (links may be followed only while they stay
// inside /sys), the attribute is opened with O_NOFOLLOW and never created.
func openSysAttr(r Root, dir, name string, flag int) (*os.File, error) {
	sys, err := os.OpenRoot(r.Sys())
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	d, err := sys.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	fd, err := unix.Openat(int(d.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a %w", name, ErrSymlink)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), r.Sys(dir, name)), nil
}
