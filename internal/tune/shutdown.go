package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/shell"
)

// KindShutdown is the journal's record of an NFS superblock shut down through
// /sys/fs/nfs/<dev>/shutdown. It is a record, not an original: the kernel cannot undo a
// shutdown, so revert shows it as not reversible and writes nothing.
const KindShutdown Kind = "shutdown"

// StatusIrreversible is revert's status for a journal record it cannot undo.
const StatusIrreversible = "not reversible"

// ShutdownKernel is the first Linux release with /sys/fs/nfs/<dev>/shutdown ("NFS: add
// sysfs shutdown knob").
const ShutdownKernel = "6.6"

// Errors of PlanShutdown; callers turn them into distinct exit codes.
var (
	// ErrNoShutdownKnob means the kernel has no shutdown attribute for the superblock.
	ErrNoShutdownKnob = errors.New("no shutdown attribute")
	// ErrNotStalled means the superblock's server answers, as far as nfstune can tell:
	// shutting it down needs --force.
	ErrNotStalled = errors.New("the server is not seen stalled")
	// ErrNoMount means nothing is mounted at the path, or no mount shows the device.
	ErrNoMount = errors.New("not mounted")
	// ErrSuperblockChanged (of Shutdown) means the device no longer shows the planned
	// superblock: it went, and its device number names another, maybe of the same export.
	ErrSuperblockChanged = inventory.ErrSuperblockChanged
)

// ShutdownOptions are the guards of PlanShutdown.
type ShutdownOptions struct {
	// Force skips the check that the server is stalled, never the NFS confirmation.
	Force bool
	// StallWindow is how long queued requests are watched for progress
	// (inventory.SampleStalls).
	StallWindow time.Duration
	// PID names the process whose mount and network namespaces the superblock is looked
	// up in, as in inventory.ReadOptions: 0 for this process, 1 for the host's init when
	// the caller runs in a pod (the agent).
	PID int
}

// ShutdownPlan is what nfstune shutdown is about to do and who will get errors.
type ShutdownPlan struct {
	// Target is the device or mount point the user named.
	Target string `json:"target"`
	Device string `json:"device"`
	// Attribute is the kernel attribute written, /sys/fs/nfs/<device>/shutdown.
	Attribute  string   `json:"attribute"`
	Source     string   `json:"source"`
	ServerAddr string   `json:"server_addr,omitempty"`
	FSType     string   `json:"fstype"`
	Version    string   `json:"version"`
	Mounts     []string `json:"mountpoints"`
	// KernelRelease is the running kernel, as /proc/version shows it.
	KernelRelease string `json:"kernel_release"`
	// Identity is the superblock as planned: Shutdown writes only while the device still
	// shows it (inventory.SuperblockID.Same).
	Identity inventory.SuperblockID `json:"identity"`
	// StallWindow is the window the plan watched the transports over; Shutdown watches
	// them again over it.
	StallWindow time.Duration `json:"-"`
	// PID is ShutdownOptions.PID: Shutdown checks the superblock in the same namespace.
	PID int `json:"-"`
	// Stalled is the superblock's server as seen not answering over the stall window.
	Stalled *inventory.StalledServer `json:"stalled,omitempty"`
	// MajorTimeouts are the requests mountstats counts as unanswered past timeo and
	// retrans since the mount (NFS091).
	MajorTimeouts uint64 `json:"major_timeouts"`
	// Forced is set when --force skipped the stall check.
	Forced bool `json:"forced"`
	// AlreadyShutDown is set when the attribute already reads 1.
	AlreadyShutDown bool `json:"already_shut_down"`
	// Affected is who gets errors: see Affected.
	Affected []Holder `json:"affected"`
	// SharedClient are the other superblocks of the same kernel NFS client (client group):
	// they wait on the same server but are not shut down.
	SharedClient []string `json:"shared_client,omitempty"`
	// Warnings say what could not be read while looking for the processes that hold the
	// superblock (processes that could not be inspected are counted there).
	Warnings []string `json:"warnings,omitempty"`
}

// Who gets errors, by kind.
const (
	HolderMount   = "mount"
	HolderPod     = "pod"
	HolderProcess = "process"
)

// Holder is one user of a superblock that gets EIO once it is shut down.
type Holder struct {
	Kind string `json:"kind"`
	// Name is the mount point, the pod's UID, or a process's PID and command.
	Name string `json:"name"`
	// Detail says more when known: a pod's volume or PersistentVolume; a process's
	// state, how it holds the superblock, its pod and container.
	Detail string `json:"detail,omitempty"`
}

// Affected returns who gets errors once the superblock m is shut down: every mount point
// showing it (bind mounts and mounts into containers included; mountinfo lists them all),
// the pods whose kubelet paths are among them, and procs, the processes that hold it
// (inventory.ReadHolders: an open file, the working directory or the root, with their
// state and pod). It reads nothing and never opens a mount point.
func Affected(m inventory.Mount, procs []inventory.Holder) []Holder {
	var out []Holder
	for _, mp := range m.MountPoints {
		out = append(out, Holder{Kind: HolderMount, Name: mp})
	}
	for _, p := range kubelet.PodVolumes(m.MountPoints) {
		var detail []string
		if p.Volume != "" {
			detail = append(detail, "volume "+p.Volume)
		}
		if p.PV != "" {
			detail = append(detail, "pv "+p.PV)
		}
		out = append(out, Holder{Kind: HolderPod, Name: p.PodUID, Detail: strings.Join(detail, ", ")})
	}
	for _, h := range procs {
		detail := []string{"state " + h.State, "via " + strings.Join(h.Via, "+")}
		if h.PodUID != "" {
			detail = append(detail, "pod "+h.PodUID)
		}
		if h.ContainerID != "" {
			detail = append(detail, "container "+kubelet.ShortContainerID(h.ContainerID))
		}
		out = append(out, Holder{Kind: HolderProcess, Name: fmt.Sprintf("%d %s", h.PID, h.Comm), Detail: strings.Join(detail, ", ")})
	}
	return out
}

// PlanShutdown finds the superblock of target (a device "major:minor" or a mount point,
// resolved through /proc/self/mountinfo only), and checks, in this order, that it is an
// NFS superblock (inventory.ConfirmNFS), that the kernel has its shutdown attribute, and,
// unless opts.Force, that its server is stalled now: seen not answering over the stall
// window (inventory.SampleStalls, NFS093). Major timeouts since the mount (NFS091) are
// shown but never enough: they only grow, so a server that answers again still has them,
// and shutting its superblock down would fail every open file on it with EIO and drop the
// data not yet written. The plan is returned with ErrNotStalled too, so that the caller
// can show whom it would affect; with any other error there is none. When ctx ends during
// the stall window, the error matches ctx's.
func PlanShutdown(ctx context.Context, root hostfs.Root, target string, opts ShutdownOptions) (*ShutdownPlan, error) {
	if err := inventory.CheckStallWindow(opts.StallWindow); err != nil {
		return nil, err
	}
	dev, err := resolveTarget(root, opts.PID, target)
	if err != nil {
		return nil, err
	}
	id, _, err := inventory.ReadSuperblockID(root, opts.PID, dev)
	if err != nil {
		return nil, fmt.Errorf("refusing to shut down %s: %w", target, err)
	}
	first := inventory.SampleTransports(root)
	inv, err := inventory.Read(root, inventory.ReadOptions{PID: opts.PID})
	if err != nil {
		return nil, err
	}
	var m *inventory.Mount
	for i := range inv.Mounts {
		if inv.Mounts[i].Device == dev {
			m = &inv.Mounts[i]
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%s (%s): %w: it went while it was being read", target, dev, ErrNoMount)
	}
	p := &ShutdownPlan{
		Target:        target,
		Device:        dev,
		Attribute:     hostfs.NFSShutdownAttr(dev),
		Source:        m.Server + ":" + m.Export,
		ServerAddr:    m.ServerAddr,
		FSType:        m.FSType,
		Version:       m.Version,
		Mounts:        m.MountPoints,
		KernelRelease: inv.KernelRelease,
		Identity:      *id,
		StallWindow:   opts.StallWindow,
		PID:           opts.PID,
		Forced:        opts.Force,
	}
	// Bounded (inventory.HolderLimits): a host full of open files cannot hold the guard.
	procs, warnings := inventory.ReadHolders(ctx, root, []string{dev}, inventory.HolderLimits{})
	p.Affected = Affected(*m, procs[dev])
	p.Warnings = warnings
	for _, o := range inv.Mounts {
		if o.Device != dev && o.ClientGroup == m.ClientGroup {
			p.SharedClient = append(p.SharedClient, o.Device+" "+strings.Join(o.MountPoints, ", "))
		}
	}
	down, err := hostfs.ReadNFSShutdown(root, dev)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, noKnob(p, err)
	}
	if err != nil {
		return nil, err
	}
	p.AlreadyShutDown = down
	if m.Stats != nil {
		for _, op := range m.Stats.Operations {
			p.MajorTimeouts += op.MajorTimeouts
		}
	}
	if err := inventory.SampleStalls(ctx, root, inv, first, opts.StallWindow); err != nil {
		return nil, fmt.Errorf("watching %s's transports for progress: %w", dev, err)
	}
	for i, s := range inv.Stalled {
		if s.Reaches(m) {
			p.Stalled = &inv.Stalled[i]
		}
	}
	addr := m.ServerAddr
	if addr == "" {
		addr = m.Server
	}
	if p.Stalled == nil && !opts.Force && !down {
		history := "mountstats counts no major timeout (NFS091)"
		if p.MajorTimeouts > 0 {
			history = fmt.Sprintf("the %d major timeout(s) mountstats counts since the mount (NFS091) are history, not a stall", p.MajorTimeouts)
		}
		return p, fmt.Errorf("refusing to shut down %s: %w: no request to %s went unanswered over %s (NFS093), and %s; if it must go anyway, add --force",
			p.Device, ErrNotStalled, addr, opts.StallWindow, history)
	}
	return p, nil
}

// resolveTarget returns the device of target: a "major:minor" as given, or the device
// pid's mountinfo shows at the absolute path target (the top one when mounts are stacked).
func resolveTarget(root hostfs.Root, pid int, target string) (string, error) {
	if hostfs.ValidDevice(target) {
		return target, nil
	}
	if !filepath.IsAbs(target) {
		return "", fmt.Errorf("%q: want a device major:minor or the absolute path of a mount point", target)
	}
	procDir := "self"
	if pid > 0 {
		procDir = strconv.Itoa(pid)
	}
	b, err := hostfs.ReadSmall(root.Proc(procDir, "mountinfo"))
	if err != nil {
		return "", fmt.Errorf("reading mountinfo: %w", err)
	}
	dev, ok := inventory.DeviceAt(b, target)
	if !ok {
		return "", fmt.Errorf("%s: %w: /proc/self/mountinfo shows no mount there", target, ErrNoMount)
	}
	return dev, nil
}

// noKnob explains a missing shutdown attribute: the kernel is older than ShutdownKernel,
// or the superblock has no sysfs entry here; the ways out that remain are umount's.
func noKnob(p *ShutdownPlan, err error) error {
	mp := "MOUNT"
	if len(p.Mounts) > 0 {
		mp = shell.Quote(p.Mounts[0])
	}
	why := fmt.Sprintf("shutting down an NFS superblock needs Linux %s or later, and this kernel is %s", ShutdownKernel, p.KernelRelease)
	if kernelAtLeast(p.KernelRelease, ShutdownKernel) {
		why = fmt.Sprintf("kernel %s should have it: is /sys mounted from this network namespace? (%v)", p.KernelRelease, err)
	}
	return fmt.Errorf("%w %s: %s; the ways out without it: umount -f %s (fails the requests in flight with EIO, new ones block again; it fails while files stay open there) or umount -l %s (detaches the mount point; processes already blocked on it stay blocked)",
		ErrNoShutdownKnob, p.Attribute, why, mp, mp)
}

// kernelAtLeast reports whether release ("6.12.107+deb13-amd64") is at least want
// ("6.6"); an unparsable release is not.
func kernelAtLeast(release, want string) bool {
	var a, b, x, y int
	if _, err := fmt.Sscanf(release, "%d.%d", &a, &b); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(want, "%d.%d", &x, &y); err != nil {
		return false
	}
	return a > x || a == x && b >= y
}

// ShutdownRecord is what the journal keeps of a shutdown.
type ShutdownRecord struct {
	Device        string    `json:"device"`
	Source        string    `json:"source"`
	ServerAddr    string    `json:"server_addr,omitempty"`
	MountPoints   []string  `json:"mountpoints"`
	Time          time.Time `json:"time"`
	Forced        bool      `json:"forced"`
	KernelRelease string    `json:"kernel_release"`
}

// ShutdownResult is what Shutdown did.
type ShutdownResult struct {
	// MountPoints are the superblock's mount points when it was shut down, as journaled.
	MountPoints []string `json:"mountpoints"`
	// Journal is the journal's path, relative to the root, holding the record.
	Journal string `json:"journal"`
	// ReadBack is the attribute's value after the write.
	ReadBack string `json:"read_back"`
}

// Shutdown shuts the planned superblock down, after checking again, right before the
// write, what the plan found: time has passed since (a prompt, a caller's delay).
//
//   - The device still shows the planned superblock (inventory.SuperblockID.Same): an
//     NFS superblock of the same source, with one of the planned mount IDs, mounted no
//     later than the plan's. Otherwise the error matches ErrSuperblockChanged.
//   - The attribute is opened before the last checks and written through that open file,
//     which the kernel binds to the superblock it was opened on: one gone after the check
//     fails the write instead of shutting down its successor.
//   - After it is opened, the superblock is checked again and, unless the plan was forced,
//     its transports are watched again over the plan's stall window, whatever the plan
//     saw and whatever the mount's history: a server that answers now is not shut down
//     (ErrNotStalled).
//   - Once ctx has ended, nothing is written or journaled, and the error matches ctx's.
//
// It records the shutdown in the journal with the mount points seen at that last check,
// writes 1 through hostfs.NFSShutdownKnob, and marks the record done. An error with a nil
// result means nothing was written or journaled.
func Shutdown(ctx context.Context, root hostfs.Root, p *ShutdownPlan, now time.Time) (*ShutdownResult, error) {
	if err := checkTarget(KindShutdown, p.Attribute); err != nil {
		return nil, err
	}
	if _, err := checkPlanned(root, p); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not shutting down %s: %w", p.Device, err)
	}
	knob, err := hostfs.OpenNFSShutdown(root, p.Device)
	if err != nil {
		return nil, fmt.Errorf("not shutting down %s: %s", p.Device, explain(err))
	}
	defer knob.Close()
	m, err := checkPlanned(root, p)
	if err != nil {
		return nil, err
	}
	if !p.Forced {
		if err := checkStillStalled(ctx, root, p, m); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not shutting down %s: %w", p.Device, err)
	}
	j, unlock, err := lockLoadJournal(root)
	if err != nil {
		return nil, err
	}
	defer unlock()
	j.Entries = append(j.Entries, Entry{Kind: KindShutdown, Path: p.Attribute, Shutdown: &ShutdownRecord{
		Device:        p.Device,
		Source:        p.Source,
		ServerAddr:    p.ServerAddr,
		MountPoints:   m.MountPoints,
		Time:          now.UTC(),
		Forced:        p.Forced,
		KernelRelease: p.KernelRelease,
	}})
	if err := j.save(root); err != nil {
		return nil, err
	}
	res := &ShutdownResult{Journal: JournalPath, MountPoints: m.MountPoints}
	if err := knob.Shutdown(); err != nil {
		return res, errors.New(explain(err))
	}
	res.ReadBack = "1"
	j.Entries[len(j.Entries)-1].Done = true
	return res, j.save(root)
}

// checkPlanned reads the superblock of the plan's device now and returns its mount when it
// is still the planned one.
func checkPlanned(root hostfs.Root, p *ShutdownPlan) (*inventory.Mount, error) {
	id, m, err := inventory.ReadSuperblockID(root, p.PID, p.Device)
	if err == nil {
		err = p.Identity.Same(id)
	}
	if err != nil {
		return nil, fmt.Errorf("not shutting down %s: %w", p.Device, err)
	}
	return m, nil
}

// checkStillStalled watches the transports over the plan's stall window again and returns
// ErrNotStalled unless m's server is seen stalled over it.
func checkStillStalled(ctx context.Context, root hostfs.Root, p *ShutdownPlan, m *inventory.Mount) error {
	inv := &inventory.Inventory{}
	if err := inventory.SampleStalls(ctx, root, inv, inventory.SampleTransports(root), p.StallWindow); err != nil {
		return fmt.Errorf("not shutting down %s: watching its transports again: %w", p.Device, err)
	}
	for _, s := range inv.Stalled {
		if s.Reaches(m) {
			return nil
		}
	}
	return fmt.Errorf("not shutting down %s: %w right before the write: its server answered over %s", p.Device, ErrNotStalled, p.StallWindow)
}

// describe is the one line revert shows for a shutdown record.
func (r *ShutdownRecord) describe() string {
	if r == nil {
		return "an NFS superblock was shut down; the kernel cannot undo it"
	}
	how := ""
	if r.Forced {
		how = " with --force"
	}
	return fmt.Sprintf("%s (%s) on %s was shut down%s at %s on kernel %s; the kernel cannot undo it: unmount it and mount it again",
		r.Source, r.Device, strings.Join(r.MountPoints, ", "), how, r.Time.Format(time.RFC3339), r.KernelRelease)
}

// ShutdownReport is what nfstune shutdown prints: the plan and, once written, the result.
type ShutdownReport struct {
	DryRun bool            `json:"dry_run"`
	Plan   *ShutdownPlan   `json:"plan"`
	Result *ShutdownResult `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// WriteShutdownPlan writes the plan as text: the superblock, why it counts as stalled, and
// who gets errors. Mount points and sources come from the host and are escaped (printer).
func WriteShutdownPlan(w io.Writer, p *ShutdownPlan) error {
	ew := printer.New(w)
	ew.Printf("Superblock %s: %s (%s, NFS %s), kernel %s\n", p.Device, p.Source, p.FSType, p.Version, p.KernelRelease)
	switch {
	case p.AlreadyShutDown:
		ew.Printf("  already shut down: %s reads 1\n", p.Attribute)
	case p.Stalled != nil:
		ew.Printf("  server %s is not answering: %d request(s) waiting on %s with no progress for %s\n",
			p.Stalled.Addr, p.Stalled.Waiting, strings.Join(p.Stalled.Transports, ", "), p.Stalled.Window)
	}
	if p.MajorTimeouts > 0 {
		ew.Printf("  %d request(s) unanswered past timeo and retrans since the mount (major timeouts)\n", p.MajorTimeouts)
	}
	if p.Stalled == nil && !p.AlreadyShutDown {
		if p.Forced {
			ew.Printf("  the server is not seen stalled; --force skips that check\n")
		} else {
			ew.Printf("  the server is not seen stalled\n")
		}
	}
	ew.Printf("Who gets EIO on every outstanding and future request of this superblock:\n")
	for _, h := range p.Affected {
		if h.Detail != "" {
			ew.Printf("  %-6s %s (%s)\n", h.Kind, h.Name, h.Detail)
		} else {
			ew.Printf("  %-6s %s\n", h.Kind, h.Name)
		}
	}
	for _, w := range p.Warnings {
		ew.Printf("  warning: %s\n", w)
	}
	if len(p.SharedClient) > 0 {
		ew.Printf("Not shut down, but on the same server through the same kernel NFS client:\n")
		for _, s := range p.SharedClient {
			ew.Printf("  %s\n", s)
		}
	}
	ew.Printf("The kernel cannot undo a shutdown: the superblock fails every request until it is unmounted.\n")
	return ew.Err()
}

// WriteShutdownResult writes what Shutdown did, or that a dry run did nothing, and the
// next step.
func WriteShutdownResult(w io.Writer, rep *ShutdownReport) error {
	ew := printer.New(w)
	mp := "MOUNT"
	if len(rep.Plan.Mounts) > 0 {
		mp = shell.Join(rep.Plan.Mounts...)
	}
	switch {
	case rep.Plan.AlreadyShutDown && rep.Error == "":
		ew.Printf("Already shut down: nothing written.\n")
		ew.Printf("Next: umount %s\n", mp)
	case rep.DryRun:
		ew.Printf("Dry run: nothing written. Without --dry-run, nfstune writes 1 to %s.\n", rep.Plan.Attribute)
	case rep.Result != nil && rep.Result.ReadBack != "":
		ew.Printf("Shut down: wrote 1 to %s, read back %s; recorded in %s.\n", rep.Plan.Attribute, rep.Result.ReadBack, rep.Result.Journal)
		if len(rep.Result.MountPoints) > 0 {
			mp = shell.Join(rep.Result.MountPoints...)
		}
		ew.Printf("Next: umount %s\n", mp)
	}
	return ew.Err()
}
