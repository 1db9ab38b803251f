package hostfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrSymlink is returned when a file to write, or a directory on its way, is a symbolic
// link: following it could put a configuration file or the journal anywhere on the host.
var ErrSymlink = errors.New("symbolic link")

// FileAttr are the permission bits and owner of a file.
type FileAttr struct {
	Perm fs.FileMode
	UID  int
	GID  int
}

// splitRel cleans a path relative to the root ("/etc/fstab" or "etc/fstab") into its
// components; "." and ".." never survive cleaning below "/".
func splitRel(rel string) []string {
	clean := strings.TrimPrefix(path.Clean("/"+rel), "/")
	if clean == "" {
		return nil
	}
	return strings.Split(clean, "/")
}

func (r Root) base() string {
	if r == "" {
		return "."
	}
	return string(r)
}

// OpenDir opens the directory rel below the root without following a symbolic link in any
// component below the root; the root itself may be one (/host in a container). With
// mkdirPerm non-zero, missing directories are created with it.
func (r Root) OpenDir(rel string, mkdirPerm fs.FileMode) (*os.File, error) {
	fd, err := unix.Open(r.base(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: r.base(), Err: err}
	}
	done := "/"
	for _, c := range splitRel(rel) {
		next, err := openDirAt(fd, c)
		if errors.Is(err, unix.ENOENT) && mkdirPerm != 0 {
			if err = unix.Mkdirat(fd, c, uint32(mkdirPerm.Perm())); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDirAt(fd, c)
			}
		}
		if err != nil {
			err = r.explainAt(fd, path.Join(done, c), err)
			unix.Close(fd)
			return nil, err
		}
		unix.Close(fd)
		fd, done = next, path.Join(done, c)
	}
	return os.NewFile(uintptr(fd), r.Path(rel)), nil
}

func openDirAt(dirfd int, name string) (int, error) {
	return unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// explainAt turns the error of opening name (relative to the root, for messages) into a
// clear one when the entry is a symbolic link.
func (r Root) explainAt(dirfd int, name string, err error) error {
	base := path.Base(name)
	var st unix.Stat_t
	if unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		target := make([]byte, 4096)
		n, _ := unix.Readlinkat(dirfd, base, target)
		return fmt.Errorf("%q is a %w to %q; nfstune does not write through links (use the real path)", name, ErrSymlink, target[:n])
	}
	return &fs.PathError{Op: "open", Path: name, Err: err}
}

// statAt reads the attributes of name in dirfd without following a link. It returns
// fs.ErrNotExist for a missing file and ErrSymlink for a link.
func (r Root) statAt(dirfd int, rel, name string) (FileAttr, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return FileAttr{}, &fs.PathError{Op: "stat", Path: rel, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return FileAttr{}, r.explainAt(dirfd, rel, unix.ELOOP)
	default:
		return FileAttr{}, fmt.Errorf("%q is not a regular file", rel)
	}
	return FileAttr{Perm: fs.FileMode(st.Mode).Perm(), UID: int(st.Uid), GID: int(st.Gid)}, nil
}

// Attr returns the permission bits and owner of the regular file rel, refusing a symbolic
// link as the file or as any directory on its way (ErrSymlink). A missing file or directory
// gives an error matching fs.ErrNotExist.
func (r Root) Attr(rel string) (FileAttr, error) {
	d, err := r.OpenDir(path.Dir("/"+rel), 0)
	if err != nil {
		return FileAttr{}, err
	}
	defer d.Close()
	return r.statAt(int(d.Fd()), "/"+strings.TrimPrefix(rel, "/"), path.Base("/"+rel))
}

// ReplaceFile replaces the file rel with data so that a crash leaves the old or the new
// file, never a mix: a temporary file in the same directory is written, given perm and
// the owner of the file it replaces, fsync'd and renamed over rel, and the directory is
// fsync'd. Missing directories are created (0755). A symbolic link as the file or as a
// directory on its way is refused with ErrSymlink.
func (r Root) ReplaceFile(rel string, data []byte, perm fs.FileMode) error {
	return r.replaceFile(rel, data, perm, nil)
}

// ReplaceFileAttr is ReplaceFile with the owner given rather than kept, e.g. to give a
// backup the owner of the file it copies.
func (r Root) ReplaceFileAttr(rel string, data []byte, attr FileAttr) error {
	return r.replaceFile(rel, data, attr.Perm, &attr)
}

func (r Root) replaceFile(rel string, data []byte, perm fs.FileMode, owner *FileAttr) error {
	rel = "/" + strings.TrimPrefix(rel, "/")
	if err := r.writeFileAt(rel, data, perm, owner); err != nil {
		return fmt.Errorf("writing %q: %w", rel, err)
	}
	return nil
}

func (r Root) writeFileAt(rel string, data []byte, perm fs.FileMode, owner *FileAttr) error {
	name := path.Base(rel)
	if name == "/" {
		return fmt.Errorf("not a file")
	}
	d, err := r.OpenDir(path.Dir(rel), 0o755)
	if err != nil {
		return err
	}
	defer d.Close()
	dirfd := int(d.Fd())
	old, err := r.statAt(dirfd, rel, name)
	switch {
	case err == nil:
		if owner == nil {
			owner = &old
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".nfstune-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: path.Join(path.Dir(rel), tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			// Best effort: the step that failed has the error to return, and a temporary
			// file left behind is harmless (hidden, a random name, never renamed in place).
			_ = unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if owner != nil {
		// Before the chmod: chown clears the set-user-ID and set-group-ID bits.
		if err := f.Chown(owner.UID, owner.GID); err != nil {
			return fmt.Errorf("keeping owner %d:%d: %w", owner.UID, owner.GID, err)
		}
	}
	if err := f.Chmod(perm.Perm()); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		return &fs.PathError{Op: "rename", Path: rel, Err: err}
	}
	renamed = true
	return syncFile(d)
}

// RemoveFile removes the file rel and fsyncs its directory; a missing file or directory is
// not an error. A symbolic link on the way is refused; a link as the file itself is removed
// (the link, not its target).
func (r Root) RemoveFile(rel string) error {
	rel = "/" + strings.TrimPrefix(rel, "/")
	d, err := r.OpenDir(path.Dir(rel), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing %q: %w", rel, err)
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), path.Base(rel), 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing %q: %w", rel, err)
	}
	return syncFile(d)
}

func syncFile(d *os.File) error {
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %q: %w", d.Name(), err)
	}
	return nil
}
