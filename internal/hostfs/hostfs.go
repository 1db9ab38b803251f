// Package hostfs reads the host's kernel interfaces (/proc, /sys) and configuration files
// under a root prefix: "/" in production, a fixture tree in tests, the host's filesystem
// mounted at /host in a container. Readers build host paths with Root.Proc, Root.Sys and
// Root.Etc so that every read follows the root; the kernel paths spelled elsewhere are
// names shown to the user (tune's journal maps them back below the root) and render's
// hostPath volumes.
//
// It also holds the guarded writers every command uses: SetReadAhead for a bdi's
// read_ahead_kb, OpenNFSShutdown for an NFS superblock's shutdown attribute (nfstune shutdown)
// and ReplaceFile for configuration files (atomic, owner and mode kept, symbolic links
// refused).
//
// Nothing here stats or opens a path below an NFS mount point: every path is built from
// kernel pseudo-files and /etc, never from a mount point.
package hostfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// MaxSmall caps how much ReadSmall reads. mountstats on a host with thousands of mounts is a
// few MiB; anything larger is not a kernel pseudo-file we understand.
const MaxSmall = 64 << 20

// ErrTooLarge is returned by ReadFile and ReadSmall when a file exceeds their cap.
var ErrTooLarge = errors.New("file too large")

// Root is a host filesystem root: "/" in production, testdata/root in tests.
type Root string

// Path joins elem below the root.
func (r Root) Path(elem ...string) string {
	return filepath.Join(append([]string{string(r)}, elem...)...)
}

// Proc is the path of /proc/elem... below the root.
func (r Root) Proc(elem ...string) string { return r.Path(append([]string{"proc"}, elem...)...) }

// Sys is the path of /sys/elem... below the root.
func (r Root) Sys(elem ...string) string { return r.Path(append([]string{"sys"}, elem...)...) }

// Etc is the path of /etc/elem... below the root.
func (r Root) Etc(elem ...string) string { return r.Path(append([]string{"etc"}, elem...)...) }

// BDI is the directory of a backing device, /sys/class/bdi/<maj:min>. The device name is
// checked so that a crafted name cannot leave /sys/class/bdi.
func (r Root) BDI(device string) (string, error) {
	if !ValidDevice(device) {
		return "", fmt.Errorf("invalid device %q: want major:minor", device)
	}
	return r.Sys("class", "bdi", device), nil
}

// ValidDevice reports whether s is a decimal "major:minor" pair.
func ValidDevice(s string) bool {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	if _, err := strconv.ParseUint(maj, 10, 32); err != nil {
		return false
	}
	_, err := strconv.ParseUint(min, 10, 32)
	return err == nil
}

// ReadSmall reads a whole file of at most MaxSmall bytes (ReadFile). Pseudo-files in /proc
// and /sys report a size of 0 or 4096, so the size is never trusted.
func ReadSmall(path string) ([]byte, error) {
	return ReadFile(path, MaxSmall)
}

// MaxConfigSize caps a file the user names: a policy, chart values, a price list. A policy
// is a few rules; 256 KiB holds thousands.
const MaxConfigSize = 256 << 10

// ErrNotRegular is returned by Open for anything but a regular file: a FIFO would block
// the read until a writer comes, and a device such as /dev/zero never ends.
var ErrNotRegular = errors.New("not a regular file")

// Open opens a regular file for reading. It opens without blocking, so that a FIFO does
// not wait for a writer, then checks the type of the open descriptor (fstat), not of the
// path. Files in /proc and /sys are regular files (procfs and sysfs give their attributes
// S_IFREG, with a size of 0 or 4096). O_NONBLOCK changes nothing for a regular file's
// reads (open(2)).
func Open(path string) (*os.File, error) {
	return openRegular(path, 0)
}

// OpenNoFollow is Open that also refuses a final symbolic link (O_NOFOLLOW): for a file
// below a root other than "/", where an absolute link would be followed out of the host's
// tree into the reader's own.
func OpenNoFollow(path string) (*os.File, error) {
	return openRegular(path, syscall.O_NOFOLLOW)
}

func openRegular(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, fileType(fi.Mode()))}
	}
	return f, nil
}

// fileType names the type of a file that is not regular.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return m.Type().String()
}

// ReadFile reads a whole regular file (Open) of at most max bytes; a larger one is
// ErrTooLarge, and nothing past max+1 bytes is read.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	return readFile(f, path, max)
}

// ReadFileNoFollow is ReadFile through OpenNoFollow.
func ReadFileNoFollow(path string, max int64) ([]byte, error) {
	f, err := OpenNoFollow(path)
	if err != nil {
		return nil, err
	}
	return readFile(f, path, max)
}

// ReadDir lists a directory as os.ReadDir does (sorted by name), but opens it with
// O_DIRECTORY and without blocking: a FIFO where a directory is expected fails instead of
// waiting for a writer (os.ReadDir opens with a plain open(2)).
func ReadDir(path string) ([]fs.DirEntry, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}

func readFile(f *os.File, path string, max int64) ([]byte, error) {
	defer f.Close()
	b, err := readAll(f, max+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("reading %q: %w: larger than %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}

// readAll reads r to its end or to limit bytes, offering the first read a whole page. A
// seq_file in /proc fills at most one page per read(2) and starts each read with a new pass
// over its list, from the position where the last one stopped; /proc/fs/nfsfs/volumes
// counts that position in list entries, so an entry removed before it between two reads
// makes the next one skip a volume. A first read of a page (io.ReadAll offers 512 bytes)
// reads a listing of up to one page in one pass, under one hold of its lock. That page is
// a pooled buffer: a small attribute costs an allocation of its own size.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	first := pages.Get().(*[]byte)
	defer pages.Put(first)
	b := (*first)[:0]
	pooled := true
	var err error
	for int64(len(b)) < limit {
		if len(b) == cap(b) {
			b = slices.Grow(b, len(b))
			pooled = false
		}
		var n int
		n, err = r.Read(b[len(b):int(min(int64(cap(b)), limit))])
		b = b[:len(b)+n]
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if pooled {
		b = slices.Clone(b)
	}
	return b, err
}

// pages are readAll's first-page buffers.
var pages = sync.Pool{New: func() any {
	b := make([]byte, os.Getpagesize())
	return &b
}}

// ReadString reads a small attribute file and trims surrounding white space.
func ReadString(path string) (string, error) {
	b, err := ReadSmall(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ReadInt reads a small attribute file holding one decimal integer, such as read_ahead_kb.
func ReadInt(path string) (int64, error) {
	s, err := ReadString(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %q: %w", path, err)
	}
	return n, nil
}
