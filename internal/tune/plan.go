// Package tune plans, applies and reverts host changes for NFS clients: the live bdi
// read_ahead_kb of each NFS superblock, a udev rule or an nfs.conf.d [nfsrahead] drop-in that
// sets it on future mounts, NFS-relevant sysctls (live and in /etc/sysctl.d), and optionally
// /etc/fstab. Mount options are never changed on a mounted file system: the plan says which
// mounts must be unmounted together and what their new fstab lines and mount commands are.
//
// Every change is recorded in a journal under /var/lib/nfstune before the first write, so
// that Revert puts back every value and takes nfstune's own lines back out of every file,
// keeping lines others changed since, even after a crash mid-apply.
// Nothing here opens a path below an NFS mount point. InstallNode puts the binary, the
// policy and the udev rule on a Kubernetes node (the installer's init container).
//
// PlanShutdown and Shutdown free one superblock of a server that stopped answering
// (/sys/fs/nfs/<dev>/shutdown, Linux 6.6): the plan names who gets errors, and Shutdown
// checks right before the write that it is still the planned, still stalled superblock, and
// journals a record that Revert keeps and reports as not reversible (`nfstune shutdown`, and
// the agent's recovery policy). RecordVerdicts keeps, in the journal, the verdict of each
// read-ahead change measured on the mount's own traffic (`apply --measure`, package readahead).
package tune

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// Kind is the kind of host change an action makes.
type Kind string

const (
	// KindReadAhead writes a bdi's read_ahead_kb in place (/sys/class/bdi/<dev>/read_ahead_kb).
	KindReadAhead Kind = "readahead"
	// KindUdevRule writes the udev rule that sets read-ahead on future NFS superblocks.
	KindUdevRule Kind = "udev-rule"
	// KindNFSConf writes an /etc/nfs.conf.d drop-in with an [nfsrahead] section.
	KindNFSConf Kind = "nfsconf"
	// KindSysctl writes a sysctl in place under /proc/sys.
	KindSysctl Kind = "sysctl"
	// KindSysctlFile writes the /etc/sysctl.d drop-in.
	KindSysctlFile Kind = "sysctl-file"
	// KindFstab rewrites /etc/fstab.
	KindFstab Kind = "fstab"
	// KindBackup writes a copy of a file before it is rewritten.
	KindBackup Kind = "backup"
	// KindNFSMountDropIn writes nfstune's /etc/nfsmount.conf.d drop-in: mount options
	// for every future mount of a server or mount point.
	KindNFSMountDropIn Kind = "nfsmount-dropin"
	// KindNFSMountConf rewrites /etc/nfsmount.conf with nfstune's block, where mount.nfs
	// reads no drop-in.
	KindNFSMountConf Kind = "nfsmount-conf"
)

// Live reports whether the action writes a kernel attribute in place rather than a file.
func (k Kind) Live() bool { return k == KindReadAhead || k == KindSysctl }

// Persistence methods for read-ahead on future mounts.
const (
	PersistUdev    = "udev"
	PersistNFSConf = "nfsconf"
	PersistNone    = "none"
)

// Paths nfstune owns on the host, relative to the root.
const (
	// UdevRulePath sorts after nfs-utils' and cloud images' 99-nfs.rules, so that udev runs
	// it last and its ATTR{read_ahead_kb} assignment is the one that stays.
	UdevRulePath   = "/etc/udev/rules.d/99-zz-nfstune-readahead.rules"
	NFSConfPath    = "/etc/nfs.conf.d/99-nfstune.conf"
	SysctlFilePath = "/etc/sysctl.d/90-nfstune.conf"
	FstabPath      = "/etc/fstab"
	FstabBackup    = "/etc/fstab.nfstune.bak"
	JournalPath    = "/var/lib/nfstune/journal.json"
)

// Desired is what the policy wants for one mount.
type Desired struct {
	Profile policy.Profile
	Mode    policy.Mode
	// Rule names the configuration rule that matched, for the reasons in the plan.
	Rule string
	// Match is that rule's match; zero for the built-in policy.
	Match policy.Match
	// Adaptive is the mount's adaptive read-ahead, if it has one: Profile.ReadAheadKB is
	// then where the agent starts it (the bounds' floor, or the value learned for the
	// volume), for the reasons in the plan.
	Adaptive *policy.AdaptiveReadAhead
}

// Want is the desired state that a plan is built from.
type Want struct {
	// Resolve gives the desired state of one mount.
	Resolve func(m *inventory.Mount) Desired
	// Sysctls are the NFS-relevant sysctls by dotted name with their target values.
	Sysctls map[string]int64
	// SysctlsMax are upper bounds (e.g. sunrpc.tcp_max_slot_table_entries for servers that
	// limit slots); a higher value is lowered only with Options.Exact.
	SysctlsMax map[string]int64
	// Rules are the policy's rules: those naming one server or mount point literally get
	// an nfsmount.conf section (Options.NFSMountConf) even with nothing mounted.
	Rules []policy.Rule
	// PolicyName names the policy in the files apply writes; empty for the built-in one.
	PolicyName string
}

// Options change how a plan is built.
type Options struct {
	// Persist is how read-ahead is kept for future mounts: PersistUdev, PersistNFSConf or
	// PersistNone.
	Persist string
	// Exact lowers values above the profile too (sysctls and read-ahead); by default values
	// are only raised.
	Exact bool
	// Fstab plans an /etc/fstab rewrite for the mounts whose options must change.
	Fstab bool
	// NFSMountConf writes the policy's mount options as nfsmount.conf sections, which
	// mount.nfs adds to every future mount (planNFSMountConf).
	NFSMountConf bool
	// UdevCommand is the command line the udev rule runs, without the bdi name: the absolute
	// path of nfstune on the host and its flags, e.g. "/usr/local/bin/nfstune udev-readahead".
	UdevCommand string
}

// Action is one change to the host.
type Action struct {
	Kind Kind `json:"kind"`
	// Path is the file or attribute written, relative to the host root (e.g.
	// "/sys/class/bdi/0:53/read_ahead_kb").
	Path string `json:"path"`
	// Device is the superblock a read-ahead action is for.
	Device string `json:"device,omitempty"`
	// MountPoints are the mount points showing that superblock.
	MountPoints []string `json:"mountpoints,omitempty"`
	// Old is the current value (attributes, trimmed) or content (files).
	Old string `json:"old"`
	// OldAbsent is set when the file does not exist yet.
	OldAbsent bool `json:"old_absent,omitempty"`
	// New is the value or content that will be written.
	New    string `json:"new"`
	Reason string `json:"reason"`
}

func (a Action) String() string {
	if a.Kind.Live() {
		return fmt.Sprintf("%s %s: %s -> %s (%s)", a.Kind, a.Path, a.Old, a.New, a.Reason)
	}
	old := "existing file"
	if a.OldAbsent {
		old = "absent"
	}
	return fmt.Sprintf("%s %s: %s -> %d bytes (%s)", a.Kind, a.Path, old, len(a.New), a.Reason)
}

// OptionChange is one mount option that differs from the profile (policy.OptionChanges).
type OptionChange = policy.OptionChange

// Remount is one superblock whose options must change: it cannot be done with a remount.
type Remount struct {
	Device      string         `json:"device"`
	MountPoints []string       `json:"mountpoints"`
	Changes     []OptionChange `json:"changes"`
	// FstabLines are the new /etc/fstab lines, one per mount point; a line is derived from
	// the existing fstab entry when there is one.
	FstabLines []string `json:"fstab_lines"`
	// Commands mount the superblock's mount points again with the new options.
	Commands []string `json:"mount_commands"`
}

// RemountGroup is a kernel NFS client: the mounts in it share transports, so an option of
// the client (nconnect, vers, proto) changes only when all of them are unmounted together.
type RemountGroup struct {
	Key string `json:"client_group"`
	// UnmountTogether are every mount point that must be unmounted before the new options
	// take effect, in the order to unmount them.
	UnmountTogether []string `json:"unmount_together"`
	// ClientWide is set when a changed option is fixed by the first mount of the group.
	ClientWide bool      `json:"client_wide"`
	Mounts     []Remount `json:"mounts"`
}

// Plan is every change apply would make, and what it cannot make by itself.
type Plan struct {
	Actions  []Action       `json:"actions"`
	Remounts []RemountGroup `json:"remounts,omitempty"`
	// Notes explain conflicts, skipped mounts and what the user has to do.
	Notes []string `json:"notes,omitempty"`
	// Warnings name what the plan refused to write for one mount while it planned the
	// others: a name from the host that cannot be written safely.
	Warnings []string `json:"warnings,omitempty"`
}

// Empty reports whether the plan changes nothing on the host.
func (p *Plan) Empty() bool { return len(p.Actions) == 0 }

func (p *Plan) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}

func (p *Plan) warn(format string, args ...any) {
	p.Warnings = append(p.Warnings, fmt.Sprintf(format, args...))
}

// NewPlan compares the inventory with the desired state and returns the changes to make.
// It reads the current values and files under root but writes nothing. Mounts in observe
// mode are reported, never changed.
func NewPlan(root hostfs.Root, inv *inventory.Inventory, want Want, opts Options) (*Plan, error) {
	if want.Resolve == nil {
		return nil, fmt.Errorf("planning: no policy resolver")
	}
	switch opts.Persist {
	case "":
		opts.Persist = PersistUdev
	case PersistUdev, PersistNFSConf, PersistNone:
	default:
		return nil, fmt.Errorf("planning: unknown persistence %q (want %s, %s or %s)", opts.Persist, PersistUdev, PersistNFSConf, PersistNone)
	}
	p := &Plan{}
	nfsDevs := map[string]bool{}
	for _, v := range inv.NFSVolumes {
		nfsDevs[v.Device] = true
	}
	if len(nfsDevs) == 0 {
		var err error
		if nfsDevs, err = inventory.ReadVolumeDevices(root, 0); err != nil {
			p.note("cannot read /proc/fs/nfsfs/volumes (%v): no live read-ahead change, since no bdi can be confirmed as NFS", err)
		}
	}
	desired := make([]Desired, len(inv.Mounts))
	for i := range inv.Mounts {
		desired[i] = want.Resolve(&inv.Mounts[i])
	}
	for i := range inv.Mounts {
		planReadAhead(root, p, &inv.Mounts[i], desired[i], nfsDevs, opts)
	}
	if err := planPersist(root, p, inv, want, desired, opts); err != nil {
		return nil, err
	}
	planSysctls(root, p, want.Sysctls, want.SysctlsMax, opts)
	if err := planMountOptions(root, p, inv, desired, opts); err != nil {
		return nil, err
	}
	if opts.NFSMountConf {
		if err := planNFSMountConf(root, p, inv, want, desired); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// planReadAhead adds the live read-ahead action for one mount, if it needs one.
func planReadAhead(root hostfs.Root, p *Plan, m *inventory.Mount, d Desired, nfsDevs map[string]bool, opts Options) {
	want := d.Profile.ReadAheadKB
	if want <= 0 {
		return
	}
	where := m.Device + " (" + strings.Join(m.MountPoints, ", ") + ")"
	if want < hostfs.MinReadAheadKB {
		p.note("read-ahead of %s left alone: %d KiB is below one page (%d KiB), which the kernel stores as 0, read-ahead off", where, want, hostfs.MinReadAheadKB)
		return
	}
	if d.Mode == policy.ModeObserve {
		p.note("read-ahead of %s left alone: observe mode", where)
		return
	}
	if err := inventory.CheckNFS(m.Device, m, nfsDevs); err != nil {
		p.note("read-ahead of %s left alone: %v", where, err)
		return
	}
	dir, err := root.BDI(m.Device)
	if err != nil {
		p.note("read-ahead of %s left alone: %v", where, err)
		return
	}
	cur, err := hostfs.ReadInt(dir + "/read_ahead_kb")
	if err != nil {
		p.note("read-ahead of %s left alone: %v", where, err)
		return
	}
	if !d.Profile.ReadAheadChange(int(cur), m.RSize, opts.Exact) {
		if cur < int64(want) {
			p.note("read-ahead of %s left at %d KiB: below the %d KiB of %d x rsize, but set on purpose (not the kernel default); --exact raises it", where, cur, want, d.Profile.ReadAheadRSizes)
		}
		return
	}
	reason := fmt.Sprintf("profile %s/%s wants %d KiB", d.Profile.Backend, d.Profile.Workload, want)
	if d.Adaptive != nil {
		reason = fmt.Sprintf("adaptive read-ahead (%d to %d KiB, profile %s/%s) starts at %d KiB; the agent moves it from there", d.Adaptive.MinKB, d.Adaptive.MaxKB, d.Profile.Backend, d.Profile.Workload, want)
	}
	if d.Rule != "" {
		reason += " (" + d.Rule + ")"
	}
	p.Actions = append(p.Actions, Action{
		Kind:        KindReadAhead,
		Path:        "/sys/class/bdi/" + m.Device + "/read_ahead_kb",
		Device:      m.Device,
		MountPoints: slices.Clone(m.MountPoints),
		Old:         fmt.Sprint(cur),
		New:         fmt.Sprint(want),
		Reason:      reason,
	})
}

// isAnonDevice reports whether dev is "0:N": NFS superblocks use anonymous devices, block
// devices never have major 0.
func isAnonDevice(dev string) bool {
	return hostfs.ValidDevice(dev) && strings.HasPrefix(dev, "0:")
}

// fileAction returns the action that makes the file at path hold content, or false when it
// already does.
func fileAction(root hostfs.Root, kind Kind, path, content, reason string) (Action, bool, error) {
	if err := checkWritable(root, path); err != nil {
		return Action{}, false, err
	}
	old, absent, err := readFile(root, path)
	if err != nil {
		return Action{}, false, err
	}
	if !absent && old == content {
		return Action{}, false, nil
	}
	return Action{Kind: kind, Path: path, Old: old, OldAbsent: absent, New: content, Reason: reason}, true, nil
}
