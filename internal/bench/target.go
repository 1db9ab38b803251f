package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// ErrNotNFS is returned when the benchmark path is not on an NFS mount.
var ErrNotNFS = errors.New("not an NFS mount")

// Target is the mount a benchmark runs on.
type Target struct {
	// Path is the directory the user named, cleaned.
	Path string
	// MountPoint is the mount point that holds Path, from mountinfo.
	MountPoint string
	FSType     string
	// Device is mountinfo's major:minor.
	Device string
	// NFS is the inventory entry when FSType is nfs or nfs4.
	NFS *inventory.Mount
}

// IsNFS reports whether fstype is the kernel NFS client.
func IsNFS(fstype string) bool { return fstype == "nfs" || fstype == "nfs4" }

// ResolveTarget finds the mount holding path. The file system type comes from mountinfo,
// never from stat'ing the path. path must be absolute; it is cleaned but symbolic links
// are not followed (that would touch the mount).
func ResolveTarget(root hostfs.Root, inv *inventory.Inventory, path string, allowNonNFS bool) (Target, error) {
	if !filepath.IsAbs(path) {
		return Target{}, fmt.Errorf("mount path %q must be absolute", path)
	}
	path = filepath.Clean(path)
	mi := root.Proc("self", "mountinfo")
	b, err := hostfs.ReadSmall(mi)
	if err != nil {
		return Target{}, fmt.Errorf("reading %q: %w", mi, err)
	}
	infos, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), nil)
	if err != nil {
		return Target{}, fmt.Errorf("parsing %q: %w", mi, err)
	}
	var best *mountinfo.Info
	for _, m := range infos {
		if !within(path, m.Mountpoint) {
			continue
		}
		// The longest mount point wins; among equal ones the last mounted (listed last)
		// is on top.
		if best == nil || len(m.Mountpoint) >= len(best.Mountpoint) {
			best = m
		}
	}
	if best == nil {
		return Target{}, fmt.Errorf("no mount holds %q in %q", path, mi)
	}
	t := Target{
		Path:       path,
		MountPoint: best.Mountpoint,
		FSType:     best.FSType,
		Device:     fmt.Sprintf("%d:%d", best.Major, best.Minor),
	}
	if !IsNFS(t.FSType) {
		if allowNonNFS {
			return t, nil
		}
		return t, fmt.Errorf("%q is on %s (%s mounted at %q): %w; pass --allow-non-nfs to benchmark it anyway",
			path, t.FSType, best.Source, t.MountPoint, ErrNotNFS)
	}
	if inv != nil {
		t.NFS = FindMount(inv, t.Device)
	}
	if t.NFS == nil {
		return t, fmt.Errorf("NFS mount %q (device %s) is not in the inventory", t.MountPoint, t.Device)
	}
	return t, nil
}

// FindMount returns the inventory's mount with device dev, or nil.
func FindMount(inv *inventory.Inventory, dev string) *inventory.Mount {
	for i := range inv.Mounts {
		if inv.Mounts[i].Device == dev {
			return &inv.Mounts[i]
		}
	}
	return nil
}

// within reports whether path is mountPoint or below it.
func within(path, mountPoint string) bool {
	if mountPoint == "/" {
		return true
	}
	return path == mountPoint || strings.HasPrefix(path, mountPoint+"/")
}

// FreeBytes returns the space available to unprivileged users on the file system holding
// path. It gives up after timeout: a hard NFS mount whose server is gone blocks statfs
// forever, and the blocked goroutine is left behind rather than the caller.
func FreeBytes(ctx context.Context, path string, timeout time.Duration) (uint64, error) {
	type res struct {
		free uint64
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		var st unix.Statfs_t
		err := unix.Statfs(path, &st)
		ch <- res{free: st.Bavail * uint64(st.Bsize), err: err}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case r := <-ch:
		if r.err != nil {
			return 0, fmt.Errorf("statfs %q: %w", path, r.err)
		}
		return r.free, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("statfs %q: no answer within %v (is the server reachable?): %w", path, timeout, ctx.Err())
	}
}

// withTimeout runs f in a goroutine and gives up after timeout, for file operations on a
// mount that may not answer.
func withTimeout(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer within %v: %w", what, timeout, ctx.Err())
	}
}
