package audit

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// The changes nfstune apply makes, named as a finding's Changes name them: one name per
// target, so that the findings of one cause share it and the plan of apply can be compared
// with the audit (tune.NewPlan plans each of them).

// ReadAheadChange is the live read_ahead_kb of the superblock dev.
func ReadAheadChange(dev string) string { return "/sys/class/bdi/" + dev + "/read_ahead_kb" }

// NextMountReadAheadChange is the read-ahead every future mount gets: apply's udev rule or
// nfs.conf.d [nfsrahead] drop-in.
const NextMountReadAheadChange = "read-ahead of future mounts"

// SysctlChange is the live value of a sysctl, by dotted name.
func SysctlChange(name string) string { return "sysctl " + name }

// OptionChange is a mount option of the superblock dev (policy.OptionChanges), changed when
// its client group is mounted again.
func OptionChange(dev, option string) string { return "mount option " + option + " of " + dev }

// readAheadChanges are the changes apply makes for a read-ahead below its target: the live
// value (tune's planReadAhead: enforce mode, a confirmed NFS superblock), and its udev rule
// for future mounts unless a udev rule already runs nfstune.
func (c *mountCtx) readAheadChanges() []string {
	var out []string
	if c.res.Mode != policy.ModeObserve && inventory.CheckNFS(c.m.Device, c.m, c.volumes) == nil {
		out = append(out, ReadAheadChange(c.m.Device))
	}
	if !slices.ContainsFunc(c.inv.ReadAhead.UdevRules, func(r inventory.UdevRule) bool { return strings.Contains(r.Program, "nfstune") }) {
		out = append(out, NextMountReadAheadChange)
	}
	return out
}

// optionFindings name, per mount option, the rules whose finding reports a change of it
// that apply plans (policy.OptionChanges); a change no finding of the mount reports gets
// an NFS033 of its own.
var optionFindings = map[string][]string{
	"nconnect": {"NFS010"},
	"rsize":    {"NFS022"},
	"wsize":    {"NFS022"},
	"hard":     {"NFS030"},
	"actimeo":  {"NFS032"},
	"nocto":    {"NFS032"},
	"vers":     {"NFS040"},
}

// claimOptionChanges adds to the mount's findings the mount option changes apply plans for
// it: each to the finding that reports it (optionFindings), the others in one NFS033.
func (c *mountCtx) claimOptionChanges(fs []Finding) []Finding {
	if c.res.Mode == policy.ModeObserve {
		return fs // apply changes nothing of a mount in observe mode
	}
	var rest []policy.OptionChange
	for _, ch := range policy.OptionChanges(c.m, c.res.Mount) {
		i := slices.IndexFunc(fs, func(f Finding) bool { return slices.Contains(optionFindings[ch.Name], f.ID) })
		if i < 0 {
			rest = append(rest, ch)
			continue
		}
		fs[i].Changes = append(fs[i].Changes, OptionChange(c.m.Device, ch.Name))
	}
	if len(rest) == 0 {
		return fs
	}
	f := c.finding("NFS033", SeverityInfo)
	var names, have, want []string
	set := map[string]string{}
	for _, ch := range rest {
		names = append(names, ch.Name)
		want = append(want, ch.Want)
		h := ch.Have
		if h == "" {
			h = "no " + ch.Name
		}
		have = append(have, h)
		k, v, _ := strings.Cut(ch.Want, "=")
		set[k] = v
		f.Changes = append(f.Changes, OptionChange(c.m.Device, ch.Name))
	}
	f.Message = fmt.Sprintf("the %s/%s profile sets %s, the mount has %s: nfstune apply plans the change for the next mount", c.res.Backend, c.res.Workload, strings.Join(want, ","), strings.Join(have, ","))
	f.Expected = strings.Join(want, ",")
	f.Actual = strings.Join(have, ",")
	var drop []string
	for _, n := range names {
		if n == "actimeo" {
			drop = append(drop, "acregmin", "acregmax", "acdirmin", "acdirmax")
		}
	}
	f.Fix = c.remountGroup(c.fstabLine(set, drop...)) + " (nfstune apply prints the lines and commands)"
	f.Reason = "the profile holds the options its backend documents for this workload; a mount option changes only when its client group is mounted again"
	f.Source = c.backend.Source
	return append(fs, f)
}
