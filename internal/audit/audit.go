// Package audit compares each NFS mount of an inventory with its policy and reports what
// costs performance or safety: findings with a stable ID, a severity, the evidence
// (expected against actual), the reason with its source, and the exact fix.
package audit

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/parallel"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/shell"
)

// Severities, worst first.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
	SeverityInfo    = "info"
)

// SeverityRank orders severities: error 3, warning 2, info 1, anything else 0.
func SeverityRank(s string) int {
	switch s {
	case SeverityError:
		return 3
	case SeverityWarning:
		return 2
	case SeverityInfo:
		return 1
	}
	return 0
}

// Finding is one problem with one mount (or, with an empty Device, with the host).
type Finding struct {
	ID          string   `json:"id"`
	Severity    string   `json:"severity"`
	Device      string   `json:"device"`
	MountPoints []string `json:"mountpoints"`
	Message     string   `json:"message"`
	Expected    string   `json:"expected"`
	Actual      string   `json:"actual"`
	Fix         string   `json:"fix"`
	Reason      string   `json:"reason,omitempty"`
	Source      string   `json:"source,omitempty"`
	// Evidence are the other findings of the same cause on the same mount (causes), folded
	// into this one: "NFS002: <message>", with their fix when it differs.
	Evidence []string `json:"evidence,omitempty"`
	// Changes name the changes nfstune apply makes that fix it (ReadAheadChange, ...);
	// empty when apply changes nothing for it.
	Changes []string `json:"changes,omitempty"`
}

// Report is the result of an audit.
type Report struct {
	// Mounts are the inventory's mounts with Backend set to the one the policy resolved.
	Mounts []inventory.Mount `json:"mounts"`
	// Desired is the resolved policy of each mount, keyed by device.
	Desired map[string]policy.Resolved `json:"desired"`
	// Findings are sorted worst first, then by device, then by ID.
	Findings []Finding `json:"findings"`
	// Stalled are the servers that did not answer over the stall window, each with its
	// transports, and Blocked their superblocks with the processes using them: the
	// inventory's, as SampleStalls and ReadBlocked left them.
	Stalled []inventory.StalledServer `json:"stalled,omitempty"`
	Blocked []inventory.BlockedMount  `json:"blocked,omitempty"`
	// Mounting are the NFS mounts stuck in progress and the unmounts of the stalled
	// mounts (inventory.ReadMountPrograms).
	Mounting []inventory.MountProgram `json:"mounting,omitempty"`
	// TLSHandshake is whether tlshd runs, when a mount uses TLS (the inventory's).
	TLSHandshake *inventory.TLSHandshake `json:"tls_handshake,omitempty"`
	// Origins tell, by device, where the effective value of each option the profile names
	// came from, for the mounts an nfsmount.conf section matches.
	Origins map[string][]OptionOrigin `json:"option_origins,omitempty"`
}

// Worst returns the highest severity among the findings, or "" when there are none.
func (r *Report) Worst() string {
	worst := ""
	for _, f := range r.Findings {
		if SeverityRank(f.Severity) > SeverityRank(worst) {
			worst = f.Severity
		}
	}
	return worst
}

// mountCheck inspects one mount.
type mountCheck func(c *mountCtx) []Finding

// mountCtx is what a check knows about one mount.
type mountCtx struct {
	inv     *inventory.Inventory
	m       *inventory.Mount
	res     policy.Resolved
	backend policy.Backend
	kernel  kernelVersion
	group   *inventory.Group
	byDev   map[string]*inventory.Mount
	// volumes are the superblocks /proc/fs/nfsfs/volumes lists (inventory.CheckNFS).
	volumes map[string]bool
	// traffic is the mount's read-ahead evidence over a window of two samples; nil
	// without one.
	traffic *readahead.Evidence
	// classes is the class of the mount's read traffic and its pods' over such a window
	// (readahead.Classify); nil without one.
	classes *readahead.Classification
	// mapped are the pods the per-pod collector saw read the mount through mmap, busiest
	// first; nil without it.
	mapped []MappedReader
	// groupCache holds, for the whole audit, each client group's mount points as shell
	// words (groupWords).
	groupCache map[string]groupWords
}

// finding starts a finding about the context's mount.
func (c *mountCtx) finding(id, severity string) Finding {
	return Finding{ID: id, Severity: severity, Device: c.m.Device, MountPoints: slices.Clone(c.m.MountPoints)}
}

// mountChecks are run in this order on every mount; the report is sorted afterwards.
func mountChecks() []mountCheck {
	return []mountCheck{
		checkReadAhead,      // NFS001
		checkReadAheadRSize, // NFS002
		checkOverRead,       // NFS003, NFS005
		checkWindowBound,    // NFS004
		checkSharedNeeds,    // NFS006
		checkUnseenFaults,   // NFS007
		checkNConnect,       // NFS010, NFS011, NFS012
		checkTransferSize,   // NFS020, NFS021, NFS022
		checkSoft,           // NFS030
		checkCaching,        // NFS031, NFS032
		checkVersion,        // NFS040
		checkNConnectKernel, // NFS041
		checkTLS,            // NFS042, NFS043, NFS044
		checkReadAheadRules, // NFS050
		checkMountDefaults,  // NFS051, NFS052, NFS053, NFS054
		checkNoEffect,       // NFS070
		checkLikelyBackend,  // NFS080
		checkUnknownProxy,   // NFS081
		checkProxyBypassed,  // NFS082
		checkStalled,        // NFS093
		checkStats,          // NFS090, NFS091
	}
}

// Options add to what the inventory holds.
type Options struct {
	// Traffic is each mount's read-ahead evidence over a window between two samples of
	// mountstats, by device (readahead.Between): NFS004 needs it. Nil leaves NFS004 out.
	Traffic map[string]readahead.Evidence
	// Classes is each mount's read traffic class and its pods' over such a window, by
	// device (readahead.Classify, as the agent keeps them): NFS006 and NFS007 need them. Nil
	// leaves them out.
	Classes map[string]readahead.Classification
	// MappedReaders are, by device, the pods the agent's per-pod collector (agent
	// --pod-io) saw read the mount through mmap over its last interval, busiest first:
	// NFS005 names them. Nil without the collector.
	MappedReaders map[string][]MappedReader
}

// MappedReader is a pod reading a mount through mmap: the READ payload its page faults
// started, and its major faults, per second.
type MappedReader struct {
	PodUID               string
	FaultBytesPerSecond  float64
	MajorFaultsPerSecond float64
}

// Run audits every mount of inv against pol. It never reads the host: everything comes
// from the inventory.
func Run(inv *inventory.Inventory, pol *policy.Policy) Report {
	return RunWith(inv, pol, Options{})
}

// RunWith is Run with the evidence of a window of traffic (Options).
func RunWith(inv *inventory.Inventory, pol *policy.Policy, opts Options) Report {
	return run(inv, pol, opts, foldCauses, 0)
}

// run audits with fold applied to each mount's findings (foldCauses, or, for the tests of
// single rules, nothing), in at most workers goroutines (0: one per CPU).
func run(inv *inventory.Inventory, pol *policy.Policy, opts Options, fold func([]Finding) []Finding, workers int) Report {
	rep := Report{
		Mounts:       slices.Clone(inv.Mounts),
		Desired:      make(map[string]policy.Resolved, len(inv.Mounts)),
		Findings:     []Finding{},
		Stalled:      slices.Clone(inv.Stalled),
		Blocked:      slices.Clone(inv.Blocked),
		Mounting:     slices.Clone(inv.Mounting),
		TLSHandshake: inv.TLSHandshake,
	}
	byDev := make(map[string]*inventory.Mount, len(inv.Mounts))
	for i := range inv.Mounts {
		byDev[inv.Mounts[i].Device] = &inv.Mounts[i]
	}
	groups := make(map[string]*inventory.Group, len(inv.Groups))
	for i := range inv.Groups {
		groups[inv.Groups[i].Key] = &inv.Groups[i]
	}
	volumes := make(map[string]bool, len(inv.NFSVolumes))
	for _, v := range inv.NFSVolumes {
		volumes[v.Device] = true
	}
	kernel := parseKernel(inv.KernelRelease)
	checks := mountChecks()
	resolved := make([]policy.Resolved, len(rep.Mounts))
	perMount := make([][]Finding, len(rep.Mounts))
	origins := make([][]OptionOrigin, len(rep.Mounts))
	// Each mount's audit reads only the inventory and writes only its own slots, so the
	// mounts are audited in contiguous ranges, one per CPU, with the report assembled in
	// mount order afterwards: on a node with thousands of mounts the rules are most of an
	// audit's work.
	auditRange := func(lo, hi int) {
		groupCache := map[string]groupWords{}
		var found []Finding // one buffer for a mount's findings before they are folded
		for i := lo; i < hi; i++ {
			m := &rep.Mounts[i]
			res := pol.Resolve(m)
			resolved[i] = res
			m.Backend = res.Backend
			b, _ := pol.Backend(res.Backend)
			c := &mountCtx{inv: inv, m: m, res: res, backend: b, kernel: kernel, group: groups[m.ClientGroup], byDev: byDev, volumes: volumes,
				groupCache: groupCache}
			if e, ok := opts.Traffic[m.Device]; ok {
				c.traffic = &e
			}
			if cl, ok := opts.Classes[m.Device]; ok {
				c.classes = &cl
			}
			c.mapped = opts.MappedReaders[m.Device]
			found = found[:0]
			for _, check := range checks {
				found = append(found, check(c)...)
			}
			// The option changes apply plans go to the findings that report them, the rest to
			// NFS033; then one finding per cause (causes).
			perMount[i] = fold(c.claimOptionChanges(found))
			origins[i] = optionOrigins(inv, m, res.Mount)
		}
	}
	parallel.Do(len(rep.Mounts), workers, minMountsPerWorker, auditRange)
	// Findings are large values: room for all at once.
	n := 0
	for _, fs := range perMount {
		n += len(fs)
	}
	rep.Findings = make([]Finding, 0, n+8)
	for i, m := range rep.Mounts {
		rep.Desired[m.Device] = resolved[i]
		rep.Findings = append(rep.Findings, perMount[i]...)
		if len(origins[i]) > 0 {
			if rep.Origins == nil {
				rep.Origins = map[string][]OptionOrigin{}
			}
			rep.Origins[m.Device] = origins[i]
		}
	}
	rep.Findings = append(rep.Findings, checkSysctls(inv, rep.Mounts, resolved)...)
	rep.Findings = append(rep.Findings, checkMounterReads(inv)...)
	rep.Findings = append(rep.Findings, checkClientIdentity(inv)...)
	SortFindings(rep.Findings)
	return rep
}

// minMountsPerWorker is the fewest mounts a worker of run audits: below it, starting one
// costs more than it saves.
const minMountsPerWorker = 64

// causes group the rules that report one cause of one mount with one fix, strongest first:
// a mount gets one finding per cause, the first of the group that fired, and the others
// become its evidence lines.
var causes = []struct {
	cause string
	ids   []string
}{
	// The superblock's read-ahead is below its target: NFS001 the value now, NFS002 the
	// same value against rsize, NFS050 what the next mount will get. nfstune apply raises
	// the live value and installs the udev rule that sets it on every future mount.
	{cause: "read-ahead", ids: []string{"NFS001", "NFS002", "NFS050"}},
}

// foldCauses keeps, for each cause in causes, the strongest of one mount's findings
// (highest severity, then the order of its group) and folds the others into its Evidence.
func foldCauses(fs []Finding) []Finding {
	out := slices.Clone(fs)
	for _, g := range causes {
		var idx []int
		for i, f := range out {
			if slices.Contains(g.ids, f.ID) {
				idx = append(idx, i)
			}
		}
		if len(idx) < 2 {
			continue
		}
		best := slices.MinFunc(idx, func(a, b int) int {
			if c := cmp.Compare(SeverityRank(out[b].Severity), SeverityRank(out[a].Severity)); c != 0 {
				return c
			}
			return cmp.Compare(slices.Index(g.ids, out[a].ID), slices.Index(g.ids, out[b].ID))
		})
		kept := out[best]
		for _, i := range idx {
			if i == best {
				continue
			}
			line := out[i].ID + ": " + out[i].Message
			if out[i].Fix != kept.Fix {
				line += "; fix: " + out[i].Fix
			}
			kept.Evidence = append(kept.Evidence, line)
			for _, ch := range out[i].Changes {
				if !slices.Contains(kept.Changes, ch) {
					kept.Changes = append(kept.Changes, ch)
				}
			}
		}
		keep := out[:0]
		for i, f := range out {
			switch {
			case i == best:
				keep = append(keep, kept)
			case !slices.Contains(idx, i):
				keep = append(keep, f)
			}
		}
		out = keep
	}
	return out
}

// SortFindings orders findings worst first, then by device ("major:minor" numerically,
// host-wide findings first), then by ID.
func SortFindings(fs []Finding) {
	// Sorted by keys computed once, then moved once: a finding is a large value, and a
	// node with a thousand mounts has thousands of them.
	type key struct {
		rank, major, minor int
		device, id         string
		at                 int // the finding's index: ties keep their order
	}
	keys := make([]key, len(fs))
	for i, f := range fs {
		maj, min := inventory.DeviceNumbers(f.Device)
		keys[i] = key{SeverityRank(f.Severity), maj, min, f.Device, f.ID, i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(b.rank, a.rank), cmp.Compare(a.major, b.major), cmp.Compare(a.minor, b.minor),
			cmp.Compare(a.device, b.device), cmp.Compare(a.id, b.id), cmp.Compare(a.at, b.at))
	})
	sorted := make([]Finding, len(fs))
	for i, k := range keys {
		sorted[i] = fs[k.at]
	}
	copy(fs, sorted)
}

// kernelVersion is the major.minor of the running kernel; known is false when
// /proc/version was unreadable.
type kernelVersion struct {
	major, minor int
	known        bool
}

// parseKernel reads "6.1.0-28-amd64" as 6.1.
func parseKernel(release string) kernelVersion {
	maj, rest, ok := strings.Cut(release, ".")
	if !ok {
		return kernelVersion{}
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil {
		return kernelVersion{}
	}
	return kernelVersion{major: a, minor: b, known: true}
}

// before reports whether the kernel is known to be older than major.minor.
func (k kernelVersion) before(major, minor int) bool {
	return k.known && (k.major < major || k.major == major && k.minor < minor)
}

// connections is the number of transports the mount really uses: the xprt: lines of
// mountstats when known, else the nconnect option (absent means 1).
func connections(m *inventory.Mount) int {
	if m.Connections > 0 {
		return m.Connections
	}
	return max(m.NConnect, 1)
}

// requestedInt returns an integer option from fstab or nfsmount.conf.
func requestedInt(m *inventory.Mount, key string) (int, bool) {
	if m.Requested == nil {
		return 0, false
	}
	v, ok := m.Requested.Options[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false
	}
	return n, true
}

func hasOpt(m *inventory.Mount, key string) bool {
	_, ok := m.Options[key]
	return ok
}

func kib(n int) string { return strconv.Itoa(n) + " KiB" }

// noEffectOptions are the atime options nfs(5) says NFS ignores; generated fstab lines
// leave them out.
var noEffectOptions = []string{"atime", "noatime", "diratime", "nodiratime", "relatime", "norelatime", "strictatime", "nostrictatime"}

// fstabLine writes the /etc/fstab line for the mount: its own options (Mount.OwnOptions:
// fstab's or nfsmount.conf's, else mountinfo's) with the fix applied: drop and the options
// that have no effect on NFS are removed, and set ("" for a flag) added or replaced, so a
// user who copies the line keeps every other option of the mount.
func (c *mountCtx) fstabLine(set map[string]string, drop ...string) string {
	return fstabLine(c.m, set, drop...)
}

func fstabLine(m *inventory.Mount, set map[string]string, drop ...string) string {
	opts := m.OwnOptions()
	if _, ok := set["hard"]; ok {
		drop = append(drop, "soft", "softerr")
	}
	if _, ok := set["soft"]; ok {
		drop = append(drop, "hard")
	}
	spec := inventory.RemountSpec(m)
	for _, k := range append(append(drop, spec.Drop...), noEffectOptions...) {
		delete(opts, k)
	}
	delete(opts, "defaults")
	maps.Copy(opts, spec.Set)
	maps.Copy(opts, set)
	mp := "<mountpoint>"
	if len(m.MountPoints) > 0 {
		mp = escapeFstab(m.MountPoints[0])
	}
	var b strings.Builder
	b.Grow(128)
	for _, s := range []string{spec.Server, ":", escapeFstab(spec.Export), " ", mp, " ", spec.FSType, " "} {
		b.WriteString(s)
	}
	if len(opts) == 0 {
		b.WriteString("defaults")
	}
	for i, k := range slices.Sorted(maps.Keys(opts)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		if v := opts[k]; v != "" {
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	b.WriteString(" 0 0")
	return b.String()
}

// escapeFstab octal-escapes the characters fstab(5) cannot hold literally.
func escapeFstab(s string) string {
	if !strings.ContainsAny(s, " \t\n\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// groupMountPoints lists the mount points of every mount in the client group.
func (c *mountCtx) groupMountPoints() []string {
	if c.group == nil {
		return slices.Clone(c.m.MountPoints)
	}
	var out []string
	for _, d := range c.group.Devices {
		if o := c.byDev[d]; o != nil {
			out = append(out, o.MountPoints...)
		}
	}
	return out
}

// remountGroup describes the unmount of the whole client group that changing a
// client-wide option (nconnect, proto, version) needs.
func (c *mountCtx) remountGroup(line string) string {
	words, n := c.groupWords()
	if n <= 1 {
		return fmt.Sprintf("set in /etc/fstab: %s ; then %s", line, remountCmd(c.m.MountPoints))
	}
	return fmt.Sprintf("set in /etc/fstab: %s ; then unmount every mount of client %s (%s) and mount them again: nconnect is fixed by the first mount of the client", line, c.m.ClientGroup, words)
}

// groupWords returns the client group's mount points (groupMountPoints) as shell words,
// joined, and how many there are. They are the same for every mount of a group, which may
// hold hundreds, so they are built once per audit.
func (c *mountCtx) groupWords() (string, int) {
	if c.group != nil {
		if w, ok := c.groupCache[c.m.ClientGroup]; ok {
			return w.words, w.n
		}
	}
	mps := c.groupMountPoints()
	w := groupWords{words: strings.Join(quoteAll(mps), ", "), n: len(mps)}
	if c.group != nil {
		c.groupCache[c.m.ClientGroup] = w
	}
	return w.words, w.n
}

// groupWords is a client group's mount points as one list of shell words.
type groupWords struct {
	words string
	n     int
}

// remountCmd unmounts and mounts each mount point again: remount cannot change rsize,
// wsize, vers, nocto, ac* or nconnect (nfs_compare_remount_data returns EINVAL).
func remountCmd(mps []string) string {
	cmds := make([]string, len(mps))
	for i, mp := range mps {
		q := shell.Quote(mp)
		cmds[i] = "umount " + q + " && mount " + q
	}
	return strings.Join(cmds, "; ")
}

// quoteAll quotes each word (shell.Quote).
func quoteAll(words []string) []string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shell.Quote(w)
	}
	return q
}

// mountPointArg is m's first mount point as a word of a command line (shell.Quote), or
// the placeholder <mountpoint> when it has none.
func mountPointArg(m *inventory.Mount) string {
	if len(m.MountPoints) == 0 {
		return "<mountpoint>"
	}
	return shell.Quote(m.MountPoints[0])
}

// readAheadFile is the bdi attribute of device dev as a word of a command line.
func readAheadFile(dev string) string {
	return shell.Quote("/sys/class/bdi/" + dev + "/read_ahead_kb")
}
