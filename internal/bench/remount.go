package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moby/sys/mountinfo"

	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// This file holds the part of bench sweep that runs umount and mount: a mount option
// variant (nconnect, rsize) takes a new NFS client, so every mount of the target's client
// group is unmounted, the kernel is given time to drop the client, and the group is
// mounted again with the variant's options; a failed step mounts the group back as it was.

// mountSpec is one mount of a client group, enough to mount it again.
type mountSpec struct {
	MountPoint string
	FSType     string
	Source     string
	Options    map[string]string
}

// remounter unmounts and mounts a client group.
type remounter struct {
	r       *Runner
	mounts  []mountSpec // the target first: the first mount of a client fixes nconnect
	addr    string
	version string // "v3" or "v4", as in /proc/fs/nfsfs/servers
	timeout time.Duration
	changed bool
}

func (r *Runner) newRemounter(t Target, opts SweepOptions) (*remounter, error) {
	if t.NFS == nil {
		return nil, errors.New("mount option variants need an NFS mount")
	}
	inv, err := r.Inventory()
	if err != nil {
		return nil, fmt.Errorf("reading NFS inventory: %w", err)
	}
	allowed := map[string]bool{}
	for _, m := range opts.Remountable {
		allowed[filepath.Clean(m)] = true
	}
	var group *inventory.Group
	for i := range inv.Groups {
		if inv.Groups[i].Key == t.NFS.ClientGroup {
			group = &inv.Groups[i]
		}
	}
	if group == nil {
		return nil, fmt.Errorf("client group %q of %q not in the inventory", t.NFS.ClientGroup, t.MountPoint)
	}
	rm := &remounter{r: r, addr: group.ServerAddr, version: "v" + strings.SplitN(group.Version, ".", 2)[0], timeout: opts.ClientGoneTimeout}
	if rm.timeout <= 0 {
		rm.timeout = 2 * time.Minute
	}
	var errs []error
	for _, dev := range group.Devices {
		m := FindMount(inv, dev)
		if m == nil {
			continue
		}
		if len(m.MountPoints) != 1 {
			errs = append(errs, fmt.Errorf("device %s is mounted at %d places %v (bind mounts); nfstune does not remount those", dev, len(m.MountPoints), m.MountPoints))
			continue
		}
		mp := m.MountPoints[0]
		if !allowed[mp] {
			errs = append(errs, fmt.Errorf("%q shares the NFS client %s with %q but is not in --remountable", mp, group.Key, t.MountPoint))
			continue
		}
		server := m.Server
		if strings.Contains(server, ":") {
			server = "[" + server + "]"
		}
		spec := mountSpec{MountPoint: mp, FSType: m.FSType, Source: server + ":" + m.Export, Options: m.Options}
		if dev == t.NFS.Device {
			rm.mounts = append([]mountSpec{spec}, rm.mounts...)
		} else {
			rm.mounts = append(rm.mounts, spec)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("refusing to remount: %w", err)
	}
	return rm, nil
}

// remountOptions are the mount options worth carrying over; the kernel-filled ones
// (addr, clientaddr, namlen, mountaddr, ...) are left for mount.nfs to work out again.
var remountOptions = map[string]bool{
	"vers": true, "nfsvers": true, "minorversion": true, "proto": true, "port": true,
	"rsize": true, "wsize": true, "hard": true, "soft": true, "softerr": true, "timeo": true,
	"retrans": true, "sec": true, "nconnect": true, "max_connect": true, "acregmin": true,
	"acregmax": true, "acdirmin": true, "acdirmax": true, "actimeo": true, "noac": true,
	"nocto": true, "lookupcache": true, "nolock": true, "local_lock": true, "noresvport": true,
	"fsc": true, "nordirplus": true, "ro": true, "rw": true, "xprtsec": true,
}

// optionString renders spec's options with the variant's changes, sorted by name.
func optionString(opts map[string]string, v Variant) string {
	o := map[string]string{}
	for k, val := range opts {
		if remountOptions[k] {
			o[k] = val
		}
	}
	if v.NConnect > 0 {
		o["nconnect"] = strconv.Itoa(v.NConnect)
	}
	if v.RSize > 0 {
		o["rsize"] = strconv.Itoa(v.RSize)
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if o[k] == "" {
			parts = append(parts, k)
		} else {
			parts = append(parts, k+"="+o[k])
		}
	}
	return strings.Join(parts, ",")
}

// apply unmounts the group, waits for the client to go, and mounts the target with v's
// options (the zero Variant: the original ones) and the others with theirs. When the
// unmount or the wait fails, the mounts are mounted again as they were.
func (rm *remounter) apply(ctx context.Context, v Variant) error {
	mounted, err := rm.mountedNFS()
	if err != nil {
		return err
	}
	for i := len(rm.mounts) - 1; i >= 0; i-- {
		mp := rm.mounts[i].MountPoint
		if !mounted[mp] {
			continue // an earlier, interrupted step already unmounted it
		}
		if _, err := rm.r.Exec(ctx, "umount", mp); err != nil {
			return errors.Join(fmt.Errorf("unmounting %q: %w", mp, err), rm.mountMissing(ctx))
		}
	}
	if err := rm.waitClientGone(ctx); err != nil {
		return errors.Join(err, rm.mountMissing(ctx))
	}
	rm.changed = rm.changed || v != Variant{}
	for i, m := range rm.mounts {
		mv := Variant{}
		if i == 0 {
			mv = v
		}
		if _, err := rm.r.Exec(ctx, "mount", "-t", m.FSType, "-o", optionString(m.Options, mv), m.Source, m.MountPoint); err != nil {
			return errors.Join(fmt.Errorf("mounting %q: %w", m.MountPoint, err), rm.mountMissing(ctx))
		}
	}
	rm.r.logger().Info("client group mounted", "variant", v.Name, "mounts", len(rm.mounts))
	rm.waitUdev(ctx)
	return nil
}

// udevSettleTimeout bounds the wait for udev after a remount.
const udevSettleTimeout = 30 * time.Second

// waitUdev waits until udev has handled the events of the mounts just made. A udev rule
// may write read_ahead_kb of each new bdi (nfs-utils' nfsrahead in 99-nfs.rules does, and
// on a busy host it runs seconds after the mount returns); a value the sweep writes before
// that would be overwritten under its run. A host without udevadm (a container) has no
// such rule to wait for, and a failed wait is logged: the run's own check that read-ahead
// held (checkReadAheadHeld) still catches a late writer.
func (rm *remounter) waitUdev(ctx context.Context) {
	timeout := fmt.Sprintf("--timeout=%d", int(udevSettleTimeout.Seconds()))
	if _, err := rm.r.Exec(ctx, "udevadm", "settle", timeout); err != nil && !errors.Is(err, fio.ErrNotFound) {
		rm.r.logger().Warn("waiting for udev after the remount", "err", err)
	}
}

// mountMissing mounts, with their original options, the group's mounts that are not
// mounted, so that a failed step does not leave the host without them.
func (rm *remounter) mountMissing(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	mounted, err := rm.mountedNFS()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range rm.mounts {
		if mounted[m.MountPoint] {
			continue
		}
		if _, err := rm.r.Exec(ctx, "mount", "-t", m.FSType, "-o", optionString(m.Options, Variant{}), m.Source, m.MountPoint); err != nil {
			errs = append(errs, fmt.Errorf("mounting %q again: %w", m.MountPoint, err))
		}
	}
	return errors.Join(errs...)
}

// mountedNFS returns the NFS mount points in mountinfo.
func (rm *remounter) mountedNFS() (map[string]bool, error) {
	p := rm.r.Root.Proc("self", "mountinfo")
	b, err := hostfs.ReadSmall(p)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	infos, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), nil)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", p, err)
	}
	out := map[string]bool{}
	for _, m := range infos {
		if IsNFS(m.FSType) {
			out[m.Mountpoint] = true
		}
	}
	return out, nil
}

// waitClientGone polls /proc/fs/nfsfs/servers until no row names the group's server
// address and NFS version: only a new client takes a new nconnect.
func (rm *remounter) waitClientGone(ctx context.Context) error {
	p := rm.r.Root.Proc("fs", "nfsfs", "servers")
	deadline := time.Now().Add(rm.timeout)
	for {
		b, err := hostfs.ReadSmall(p)
		if err != nil {
			return fmt.Errorf("reading %q: %w", p, err)
		}
		servers, _, err := inventory.ParseNFSServers(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("reading %q: %w", p, err)
		}
		listed := false
		for _, sv := range servers {
			if sv.Addr == rm.addr && sv.Version == rm.version {
				listed = true
			}
		}
		if !listed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kernel still lists the NFS client for %s %s in %q after %v: another mount (or a different minor version) still uses it", rm.version, rm.addr, p, rm.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
