package tune

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// parseVolumes returns the devices of a /proc/fs/nfsfs/volumes file.
func parseVolumes(b []byte) map[string]bool { return inventory.VolumeDevices(b) }

// udevRule is the content of nfstune's read-ahead rule. udev runs PROGRAM with the bdi name
// (%k) when an NFS superblock's bdi appears; a zero exit status with a number on stdout makes
// the rule match and udev writes that number (%c) to read_ahead_kb. KERNEL=="0:*" keeps block
// devices (never major 0) from even starting the program.
func udevRule(command string) string {
	return "# Written by nfstune apply; removed by nfstune revert.\n" +
		"# Sets read_ahead_kb on each new NFS superblock from the nfstune policy (per server, export\n" +
		"# and mount point). The name sorts after 99-nfs.rules so that this assignment runs last.\n" +
		`SUBSYSTEM=="bdi", ACTION=="add", KERNEL=="0:*", PROGRAM="` + command + ` %k", ATTR{read_ahead_kb}="%c"` + "\n"
}

// nfsConfDropIn is the [nfsrahead] drop-in nfs-utils' nfsrahead reads (nfsrahead(5)): the
// keys are the file system types, "nfs" for NFSv3 and "nfs4" for NFSv4.x.
func nfsConfDropIn(values map[string]int) string {
	var b strings.Builder
	b.WriteString("# Written by nfstune apply; removed by nfstune revert.\n[nfsrahead]\n")
	for _, k := range []string{"nfs", "nfs4"} {
		if v, ok := values[k]; ok {
			fmt.Fprintf(&b, "%s=%d\n", k, v)
		}
	}
	return b.String()
}

// isOurRule reports whether a udev rule is nfstune's own.
func isOurRule(r inventory.UdevRule) bool {
	return path.Base(r.File) == path.Base(UdevRulePath) || strings.Contains(r.Program, "nfstune")
}

func describeRule(r inventory.UdevRule) string {
	what := "runs " + r.Program
	if r.ReadAheadKB != nil {
		what = fmt.Sprintf("sets %d KiB", *r.ReadAheadKB)
	} else if r.Program == "" {
		what = "sets read_ahead_kb"
	}
	return fmt.Sprintf("%s:%d (%s)", r.File, r.Line, what)
}

// udevConflicts explains how the other rules that write read_ahead_kb on bdi add events
// interact with ours. udev runs rule files sorted by file name across all rule directories
// and each ATTR assignment writes at once, so the file that sorts last wins. It returns
// false when a rule sorts after ours and so cannot be beaten by ordering.
func udevConflicts(p *Plan, rules []inventory.UdevRule) bool {
	ours := path.Base(UdevRulePath)
	wins := true
	for _, r := range rules {
		if isOurRule(r) {
			continue
		}
		if r.Hides != "" {
			p.note("udev rule file %s hides %s (same name, earlier directory wins)", r.File, r.Hides)
		}
		if path.Base(r.File) > ours {
			wins = false
			p.note("udev rule %s sorts after %s and overrides its read-ahead on every new mount; nfstune cannot win by ordering: remove that rule or rename it to sort before %s", describeRule(r), ours, ours)
			continue
		}
		p.note("udev rule %s runs before %s, which overrides it", describeRule(r), ours)
	}
	return wins
}

// hasNFSRahead reports whether nfs-utils' nfsrahead is installed: its udev rule or its
// binary. nfsrahead first shipped in nfs-utils 2.6.2, so either means ">= 2.6.2".
func hasNFSRahead(root hostfs.Root, rules []inventory.UdevRule) bool {
	for _, r := range rules {
		if strings.Contains(r.Program, "nfsrahead") {
			return true
		}
	}
	for _, p := range []string{"usr/libexec/nfsrahead", "usr/lib/nfs-utils/nfsrahead", "usr/sbin/nfsrahead", "sbin/nfsrahead"} {
		if _, absent, err := readFile(root, "/"+p); err == nil && !absent {
			return true
		}
	}
	return false
}

// planPersist adds the action that keeps read-ahead on future mounts.
func planPersist(root hostfs.Root, p *Plan, inv *inventory.Inventory, want Want, desired []Desired, opts Options) error {
	switch opts.Persist {
	case PersistNone:
		p.note("read-ahead is not persisted (--persist none): new mounts start at the kernel default")
		return nil
	case PersistNFSConf:
		return planNFSConf(root, p, inv, want, desired)
	}
	if opts.UdevCommand == "" {
		return fmt.Errorf("planning udev rule: no command for the rule to run")
	}
	if strings.ContainsAny(opts.UdevCommand, "\"\n") {
		return fmt.Errorf("planning udev rule: command %q contains a quote or newline", opts.UdevCommand)
	}
	if !udevConflicts(p, inv.ReadAhead.UdevRules) {
		p.note("the udev rule is still written: it sets read-ahead unless a later rule changes it")
	}
	a, ok, err := fileAction(root, KindUdevRule, UdevRulePath, udevRule(opts.UdevCommand), "set read-ahead on every future NFS superblock from the policy")
	if err != nil {
		return fmt.Errorf("planning udev rule: %w", err)
	}
	if ok {
		p.Actions = append(p.Actions, a)
	}
	return nil
}

// planNFSConf plans an [nfsrahead] drop-in. That only works when nfs-utils' nfsrahead is
// installed and the policy gives one value per file system type (nfs, nfs4).
func planNFSConf(root hostfs.Root, p *Plan, inv *inventory.Inventory, want Want, desired []Desired) error {
	if !hasNFSRahead(root, inv.ReadAhead.UdevRules) {
		return fmt.Errorf("--persist nfsconf needs nfs-utils >= 2.6.2 (nfsrahead and its udev rule), which is not installed; use --persist udev")
	}
	values := map[string]int{}
	from := map[string]string{}
	for _, fstype := range []string{"nfs", "nfs4"} {
		d := want.Resolve(&inventory.Mount{FSType: fstype})
		if d.Profile.ReadAheadRSizes > 0 {
			// nfsrahead cannot see rsize: the drop-in can only carry the value of the
			// current mounts, checked below to be one per file system type.
			p.note("%s: the default read-ahead is %d x rsize, which nfsrahead cannot compute; the drop-in gets the value the current %s mounts need, if any", fstype, d.Profile.ReadAheadRSizes, fstype)
			continue
		}
		if d.Mode != policy.ModeObserve && d.Profile.ReadAheadKB >= hostfs.MinReadAheadKB {
			values[fstype] = d.Profile.ReadAheadKB
			from[fstype] = "the default profile"
		}
	}
	for i, m := range inv.Mounts {
		d := desired[i]
		if d.Mode == policy.ModeObserve || d.Profile.ReadAheadKB <= 0 {
			continue
		}
		if d.Profile.ReadAheadKB < hostfs.MinReadAheadKB {
			return fmt.Errorf("--persist nfsconf: %s wants %d KiB, below one page (%d KiB), which the kernel stores as 0, read-ahead off", strings.Join(m.MountPoints, ", "), d.Profile.ReadAheadKB, hostfs.MinReadAheadKB)
		}
		v, seen := values[m.FSType]
		if seen && v != d.Profile.ReadAheadKB {
			return fmt.Errorf("--persist nfsconf cannot express this policy: %s mounts want %d KiB (%s) and %d KiB (%s); nfsrahead has one value per file system type, use --persist udev",
				m.FSType, v, from[m.FSType], d.Profile.ReadAheadKB, strings.Join(m.MountPoints, ", "))
		}
		values[m.FSType] = d.Profile.ReadAheadKB
		from[m.FSType] = strings.Join(m.MountPoints, ", ")
	}
	var later []string
	for _, r := range inv.ReadAhead.UdevRules {
		if !strings.Contains(r.Program, "nfsrahead") && path.Base(r.File) > "99-nfs.rules" && !isOurRule(r) {
			later = append(later, describeRule(r))
		}
	}
	if len(later) > 0 {
		return fmt.Errorf("--persist nfsconf would be overridden by udev rules that run after nfs-utils' 99-nfs.rules: %s; use --persist udev", strings.Join(later, "; "))
	}
	if len(values) == 0 {
		p.note("no read-ahead to persist: the policy has no read-ahead value")
		return nil
	}
	for k, v := range inv.ReadAhead.NFSRahead {
		p.note("nfs.conf [nfsrahead] already has %s=%s; %s sorts last in /etc/nfs.conf.d and overrides it", k, v, NFSConfPath)
	}
	a, ok, err := fileAction(root, KindNFSConf, NFSConfPath, nfsConfDropIn(values), "nfsrahead sets read-ahead on future NFS mounts per file system type")
	if err != nil {
		return fmt.Errorf("planning nfs.conf drop-in: %w", err)
	}
	if ok {
		p.Actions = append(p.Actions, a)
	}
	return nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
