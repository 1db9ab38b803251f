package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// ErrNoReadAhead means the udev helper has no value to set: the bdi is not an NFS superblock,
// the policy has no read-ahead for it or observes it, or it is already at least as large.
// The helper then exits non-zero so that udev does not write the attribute.
var ErrNoReadAhead = errors.New("no read-ahead to set")

// UdevOptions bound the udev helper.
type UdevOptions struct {
	// Wait is the longest time to wait for the mountinfo entry; udev runs the helper while
	// the mount is being set up, before the entry exists. Default 1s.
	Wait time.Duration
	// Poll is the time between two reads of mountinfo. Default 15ms.
	Poll time.Duration
	// Exact sets the profile value even when the bdi's value is already larger, or (for a
	// target derived from rsize) was set on purpose.
	Exact bool
}

// UdevReadAhead computes the read_ahead_kb for a new bdi, for the udev rule's PROGRAM. It
// polls /proc/self/mountinfo (then /proc/1/mountinfo) for the superblock's entry for at most
// opts.Wait, resolves the policy for its server, export and mount point, and returns the
// profile's value. If no entry appears in time but /proc/fs/nfsfs/volumes lists the device,
// the policy is resolved from the server address and NFS version found there.
func UdevReadAhead(ctx context.Context, root hostfs.Root, dev string, resolve func(*inventory.Mount) Desired, opts UdevOptions) (int, *inventory.Mount, error) {
	if !isAnonDevice(dev) {
		return 0, nil, fmt.Errorf("%w: %q is not an anonymous device", ErrNoReadAhead, dev)
	}
	if opts.Wait <= 0 {
		opts.Wait = time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 15 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	m := findMount(root, dev)
	for m == nil && ctx.Err() == nil {
		t := time.NewTimer(opts.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
			m = findMount(root, dev)
		}
	}
	if m != nil && !isNFSType(m.FSType) {
		return 0, m, fmt.Errorf("%w: %s is %s, not NFS", ErrNoReadAhead, dev, m.FSType)
	}
	if m == nil {
		b, err := hostfs.ReadSmall(root.Proc("fs", "nfsfs", "volumes"))
		if err == nil {
			m = mountFromVolumes(b, dev)
		}
		if m == nil {
			return 0, nil, fmt.Errorf("%w: no NFS mount of %s appeared within %s", ErrNoReadAhead, dev, opts.Wait)
		}
	}
	d := resolve(m)
	if d.Mode == policy.ModeObserve {
		return 0, m, fmt.Errorf("%w: %s is in observe mode", ErrNoReadAhead, dev)
	}
	want := d.Profile.ReadAheadKB
	if want <= 0 {
		return 0, m, fmt.Errorf("%w: the profile of %s has no read-ahead", ErrNoReadAhead, dev)
	}
	if want < hostfs.MinReadAheadKB {
		return 0, m, fmt.Errorf("%w: the profile of %s wants %d KiB, below one page (%d KiB), which the kernel stores as 0, read-ahead off", ErrNoReadAhead, dev, want, hostfs.MinReadAheadKB)
	}
	if dir, err := root.BDI(dev); err == nil {
		if cur, err := hostfs.ReadInt(dir + "/read_ahead_kb"); err == nil && !d.Profile.ReadAheadChange(int(cur), m.RSize, opts.Exact) {
			return 0, m, fmt.Errorf("%w: %s already has %d KiB, the profile wants %d", ErrNoReadAhead, dev, cur, want)
		}
	}
	return want, m, nil
}

// findMount looks for dev in the mountinfo of this process, then of PID 1, with the
// service behind a loopback proxy attributed (inventory.AttributeProxies).
func findMount(root hostfs.Root, dev string) *inventory.Mount {
	for _, pid := range []string{"self", "1"} {
		if b, err := hostfs.ReadSmall(root.Proc(pid, "mountinfo")); err == nil {
			if m := inventory.MountOfDevice(b, dev); m != nil {
				ms := []inventory.Mount{*m}
				inventory.AttributeProxies(root, ms)
				return &ms[0]
			}
		}
	}
	return nil
}

// mountFromVolumes builds what /proc/fs/nfsfs/volumes says about dev (inventory's parser):
// NFS version and the server address; nil when the file cannot be parsed whole.
func mountFromVolumes(b []byte, dev string) *inventory.Mount {
	vols, _, err := inventory.ParseNFSVolumes(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	for _, v := range vols {
		if v.Device != dev {
			continue
		}
		m := &inventory.Mount{Device: dev, FSType: "nfs", Version: strings.TrimPrefix(v.Version, "v")}
		if m.Version == "4" {
			m.FSType = "nfs4"
		}
		if a, err := netip.ParseAddr(v.Addr); err == nil {
			m.ServerAddr = a.String()
			m.Server = m.ServerAddr
		}
		return m
	}
	return nil
}
