package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// errEscape is returned when the benchmark path leaves the target mount: a symbolic link
// or another mount on the way would put fio's files on a different file system than the
// one the result is labelled with.
var errEscape = errors.New("leaves the mount")

// mkdirOnMount creates the directory name below t.Path, where t.Path is resolved from
// t.MountPoint one component at a time: no symbolic link is followed (O_NOFOLLOW) and no
// other mount is entered (each directory's st_dev is the mount point's), as openat2's
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV would, on any kernel. The new
// directory is checked the same way. It returns the directory's path.
func mkdirOnMount(t Target, name string, perm uint32) (string, error) {
	rel, err := filepath.Rel(t.MountPoint, t.Path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%q is not below mount point %q", t.Path, t.MountPoint)
	}
	// mountinfo prints mount points resolved, so the mount point itself has no links.
	fd, err := unix.Open(t.MountPoint, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: t.MountPoint, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return "", &os.PathError{Op: "stat", Path: t.MountPoint, Err: err}
	}
	dev := st.Dev
	done := t.MountPoint
	var comps []string
	if rel != "." {
		comps = strings.Split(rel, "/")
	}
	step := func(c string) error {
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		p := filepath.Join(done, c)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			var lst unix.Stat_t
			if unix.Fstatat(fd, c, &lst, unix.AT_SYMLINK_NOFOLLOW) == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK {
				return fmt.Errorf("%q is a symbolic link: the benchmark path %w %q", p, errEscape, t.MountPoint)
			}
		}
		if err != nil {
			return &os.PathError{Op: "open", Path: p, Err: err}
		}
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return &os.PathError{Op: "stat", Path: p, Err: err}
		}
		if st.Dev != dev {
			unix.Close(next)
			return fmt.Errorf("%q is another mount: the benchmark path %w %q", p, errEscape, t.MountPoint)
		}
		unix.Close(fd)
		fd, done = next, p
		return nil
	}
	defer func() { unix.Close(fd) }()
	for _, c := range comps {
		if err := step(c); err != nil {
			return "", err
		}
	}
	if err := unix.Mkdirat(fd, name, perm); err != nil {
		return "", &os.PathError{Op: "mkdir", Path: filepath.Join(done, name), Err: err}
	}
	if err := step(name); err != nil {
		return "", err
	}
	return done, nil
}
