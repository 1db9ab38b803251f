package tune

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/shell"
)

// clientWide reports whether an option is fixed by the first mount of a kernel NFS client
// (nfs_match_client does not compare nconnect; vers and proto select the client).
func clientWide(name string) bool { return name == "vers" || name == "proto" || name == "nconnect" }

// conflicting lists the options a new option replaces.
func conflicting(key string) []string {
	switch key {
	case "hard", "soft", "softerr":
		return []string{"hard", "soft", "softerr"}
	case "actimeo":
		return []string{"actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax", "noac"}
	case "vers":
		return []string{"vers", "nfsvers", "minorversion"}
	case "proto":
		return []string{"proto", "tcp", "udp", "rdma"}
	case "nolock":
		return []string{"nolock", "lock"}
	case "nocto":
		return []string{"nocto", "cto"}
	}
	return []string{key}
}

// mergeOptions applies the changes to a comma-separated option string, keeping the order and
// every option the changes do not touch.
func mergeOptions(opts string, changes []OptionChange) string {
	var toks []string
	if opts != "" && opts != "defaults" {
		toks = strings.Split(opts, ",")
	}
	for _, c := range changes {
		key, _, _ := strings.Cut(c.Want, "=")
		drop := conflicting(key)
		toks = slices.DeleteFunc(toks, func(t string) bool {
			k, _, _ := strings.Cut(t, "=")
			return slices.Contains(drop, k)
		})
		toks = append(toks, c.Want)
	}
	return strings.Join(toks, ",")
}

// fstabLine is one parsed /etc/fstab line. Fields keep their text; spans locate the options
// field so that a rewrite changes nothing else on the line.
type fstabLine struct {
	text       string
	spec, file string
	vfstype    string
	opts       string
	optStart   int
	optEnd     int
	ok         bool // a mount entry (not a comment, blank or malformed line)
}

func parseFstabLine(s string) fstabLine {
	l := fstabLine{text: s}
	trimmed := strings.TrimSpace(s)
	if trimmed == "" || strings.HasPrefix(trimmed, "#") {
		return l
	}
	spans := fstabSpans(s)
	if len(spans) < 4 {
		return l
	}
	l.spec = s[spans[0].start:spans[0].end]
	l.file = inventory.UnescapeOctal(s[spans[1].start:spans[1].end])
	l.vfstype = s[spans[2].start:spans[2].end]
	l.opts = s[spans[3].start:spans[3].end]
	l.optStart, l.optEnd = spans[3].start, spans[3].end
	l.ok = true
	return l
}

type span struct{ start, end int }

// fstabSpans locates the fields of an fstab line: runs of bytes other than space and tab.
func fstabSpans(s string) []span {
	var spans []span
	start := -1
	for i := 0; i <= len(s); i++ {
		ws := i == len(s) || s[i] == ' ' || s[i] == '\t'
		if ws && start >= 0 {
			spans = append(spans, span{start, i})
			start = -1
		} else if !ws && start < 0 {
			start = i
		}
	}
	return spans
}

// checkFstabLine returns an error unless line is one fstab entry whose fields are exactly
// want: no line break, no comment, no field split or merged by a blank in a value.
func checkFstabLine(line string, want []string) error {
	var got []string
	for _, sp := range fstabSpans(line) {
		got = append(got, line[sp.start:sp.end])
	}
	if strings.Contains(line, "\n") || !parseFstabLine(line).ok || !slices.Equal(got, want) {
		return fmt.Errorf("the new line %q does not parse back to the fields %q", line, want)
	}
	return nil
}

// escapeOctal encodes spaces, tabs and backslashes for fstab.
func escapeOctal(s string) string {
	r := strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`)
	return r.Replace(s)
}

// mountSource is "server:/export", with an IPv6 address in brackets.
func isNFSType(t string) bool { return t == "nfs" || t == "nfs4" }

// planMountOptions lists, per client group, the mounts whose options must change, with their
// new fstab lines and mount commands, and with opts.Fstab an /etc/fstab rewrite.
func planMountOptions(root hostfs.Root, p *Plan, inv *inventory.Inventory, desired []Desired, opts Options) error {
	fstab, absent, err := readFile(root, FstabPath)
	if err != nil {
		return fmt.Errorf("planning mount options: %w", err)
	}
	lines := strings.SplitAfter(fstab, "\n")
	parsed := make([]fstabLine, len(lines))
	for i, l := range lines {
		parsed[i] = parseFstabLine(strings.TrimRight(l, "\n"))
	}
	groups := map[string]*RemountGroup{}
	byGroup := map[string][]string{}
	for _, m := range inv.Mounts {
		byGroup[m.ClientGroup] = append(byGroup[m.ClientGroup], m.MountPoints...)
	}
	newLines := slices.Clone(lines)
	edited := false
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		if desired[i].Mode == policy.ModeObserve {
			continue
		}
		changes := policy.OptionChanges(m, desired[i].Profile.Mount)
		if len(changes) == 0 {
			continue
		}
		r := Remount{Device: m.Device, MountPoints: slices.Clone(m.MountPoints), Changes: changes}
		for _, mp := range m.MountPoints {
			idx := slices.IndexFunc(parsed, func(l fstabLine) bool { return l.ok && inventory.IsMountType(m, l.vfstype) && l.file == mp })
			var line string
			if idx >= 0 {
				l := parsed[idx]
				merged := mergeOptions(l.opts, changes)
				line = l.text[:l.optStart] + merged + l.text[l.optEnd:]
				if opts.Fstab && line != l.text {
					var fields []string
					for _, sp := range fstabSpans(l.text) {
						fields = append(fields, l.text[sp.start:sp.end])
					}
					fields[3] = merged
					if err := checkFstabLine(line, fields); err != nil {
						return fmt.Errorf("refusing to edit %s for %s: %w", FstabPath, mp, err)
					}
					newLines[idx] = line + strings.TrimPrefix(lines[idx], l.text)
					edited = true
				}
				r.Commands = append(r.Commands, shell.Join("mount", "-t", l.vfstype, "-o", merged, l.spec, mp))
			} else {
				// A proxied mount is mounted again through its helper (inventory.RemountSpec).
				rs := inventory.RemountSpec(m)
				if !policy.ValidServer(rs.Server) {
					p.note("%s: the server %q is not a host name or an IP address; no fstab line or mount command is given for it", mp, rs.Server)
					continue
				}
				base := m.OwnOptions()
				for _, k := range rs.Drop {
					delete(base, k)
				}
				maps.Copy(base, rs.Set)
				merged := mergeOptions(joinOptions(base), changes)
				spec := rs.Source()
				line = fmt.Sprintf("%s %s %s %s 0 0", spec, escapeOctal(mp), rs.FSType, merged)
				r.Commands = append(r.Commands, shell.Join("mount", "-t", rs.FSType, "-o", merged, spec, mp))
				if opts.Fstab {
					p.note("%s is not in /etc/fstab; add this line by hand: %s", mp, line)
				}
			}
			r.FstabLines = append(r.FstabLines, line)
		}
		g := groups[m.ClientGroup]
		if g == nil {
			g = &RemountGroup{Key: m.ClientGroup}
			groups[m.ClientGroup] = g
		}
		for _, c := range changes {
			g.ClientWide = g.ClientWide || clientWide(c.Name)
		}
		g.Mounts = append(g.Mounts, r)
	}
	for _, k := range sortedKeys(groups) {
		g := groups[k]
		var mps []string
		if g.ClientWide {
			mps = slices.Clone(byGroup[k])
		} else {
			for _, r := range g.Mounts {
				mps = append(mps, r.MountPoints...)
			}
		}
		// Unmount the deepest mount points first.
		sort.SliceStable(mps, func(a, b int) bool { return strings.Count(mps[a], "/") > strings.Count(mps[b], "/") })
		g.UnmountTogether = mps
		p.Remounts = append(p.Remounts, *g)
	}
	if len(p.Remounts) > 0 {
		p.note("mount options are never changed on a mounted file system (remount cannot change them); unmount each group together, then mount again")
	}
	if edited {
		if absent {
			return nil
		}
		content := strings.Join(newLines, "")
		b, ok, err := fileAction(root, KindBackup, FstabBackup, fstab, "copy of /etc/fstab before nfstune edits it")
		if err != nil {
			return fmt.Errorf("planning fstab backup: %w", err)
		}
		if ok {
			p.Actions = append(p.Actions, b)
		}
		if err := checkWritable(root, FstabPath); err != nil {
			return fmt.Errorf("planning fstab edit: %w", err)
		}
		p.Actions = append(p.Actions, Action{Kind: KindFstab, Path: FstabPath, Old: fstab, New: content, Reason: "new options for NFS mounts; they take effect at the next mount"})
	}
	return nil
}

// joinOptions turns an option map back into a sorted option string.
func joinOptions(m map[string]string) string {
	var toks []string
	for _, k := range sortedKeys(m) {
		if m[k] == "" {
			toks = append(toks, k)
		} else {
			toks = append(toks, k+"="+m[k])
		}
	}
	return strings.Join(toks, ",")
}
