package tune

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// Files nfstune writes for mount.nfs.
const (
	NFSMountDropInPath = inventory.NFSTuneDropIn
	NFSMountConfPath   = inventory.NFSMountConfPath
)

// Markers of nfstune's block in /etc/nfsmount.conf, where mount.nfs reads no drop-in.
const (
	nfsmountBlockBegin = "# BEGIN nfstune: written by nfstune apply, removed by nfstune revert"
	nfsmountBlockEnd   = "# END nfstune"
)

// mountSection is one section nfstune writes: the options of one profile for one server
// name or mount point, and the mounts or rule that asked for it.
type mountSection struct {
	kind, arg string
	opts      []string
	from      []string
}

// comment makes text safe for a comment line: no line break or other control character.
func comment(text string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, text)
}

func (s mountSection) title() string {
	return inventory.MountSection{Kind: s.kind, Arg: s.arg}.Title()
}

// planNFSMountConf plans the nfsmount.conf sections that give every future mount the
// policy's options, whoever mounts it (a Pod's inline nfs volume, autofs, a script): a
// [ Server ] section for each server name and address the node's mounts use and each
// server a rule names literally, a [ MountPoint ] section where a rule matches by mount
// point. Never a global section. Into NFSMountDropInPath when the node's mount.nfs reads
// drop-ins (nfs-utils 2.5.3 and later), else into a marked block of /etc/nfsmount.conf.
func planNFSMountConf(root hostfs.Root, p *Plan, inv *inventory.Inventory, want Want, desired []Desired) error {
	mounter, err := inventory.FindMounter(root)
	switch {
	case err != nil:
		return err
	case mounter == nil:
		return fmt.Errorf("no mount.nfs on this node (/sbin/mount.nfs): nothing would read nfsmount.conf; install nfs-common or nfs-utils")
	case !mounter.ReadsConfig:
		return fmt.Errorf("%s was built without mount configuration (configure --disable-mountconfig): it reads no nfsmount.conf", mounter.Path)
	}
	secs, err := nfsmountSections(p, inv, want, desired)
	if err != nil {
		return fmt.Errorf("planning nfsmount.conf sections: %w", err)
	}
	if len(secs) == 0 {
		p.note("no nfsmount.conf section to write: no mount or literal rule has mount options")
		return nil
	}
	body := renderSections(secs, want.PolicyName)
	if mounter.ReadsDropIns {
		a, ok, err := fileAction(root, KindNFSMountDropIn, NFSMountDropInPath, body, "mount.nfs gives every future mount of these servers and mount points the profile's options")
		if err != nil {
			return fmt.Errorf("planning %s: %w", NFSMountDropInPath, err)
		}
		if ok {
			p.Actions = append(p.Actions, a)
		}
		noteLaterDropIns(p, inv)
		return nil
	}
	p.note("%s reads no %s (nfs-utils before 2.5.3): the sections go into a marked block of %s", mounter.Path, inventory.NFSMountConfDropIn, NFSMountConfPath)
	old, absent, err := readFile(root, NFSMountConfPath)
	if err != nil {
		return fmt.Errorf("planning %s: %w", NFSMountConfPath, err)
	}
	content, err := withBlock(old, body)
	if err != nil {
		return fmt.Errorf("planning %s: %w", NFSMountConfPath, err)
	}
	if !absent && content == old {
		return nil
	}
	if err := checkWritable(root, NFSMountConfPath); err != nil {
		return fmt.Errorf("planning %s: %w", NFSMountConfPath, err)
	}
	p.Actions = append(p.Actions, Action{Kind: KindNFSMountConf, Path: NFSMountConfPath, Old: old, OldAbsent: absent, New: content,
		Reason: "mount.nfs gives every future mount of these servers and mount points the profile's options"})
	return nil
}

// noteLaterDropIns names the drop-ins that sort after nfstune's and override its keys.
func noteLaterDropIns(p *Plan, inv *inventory.Inventory) {
	if inv.MountDefaults == nil {
		return
	}
	for _, f := range inv.MountDefaults.Files {
		if path.Dir(f) == inventory.NFSMountConfDropIn && f != NFSMountDropInPath && inventory.CompareVersions(path.Base(f), path.Base(NFSMountDropInPath)) > 0 {
			p.note("%s is read after %s: a key it sets for the same section wins", f, NFSMountDropInPath)
		}
	}
}

// withBlock replaces nfstune's marked block in an nfsmount.conf, or appends one.
func withBlock(old, body string) (string, error) {
	block := nfsmountBlockBegin + "\n" + body + nfsmountBlockEnd + "\n"
	begin := strings.Index(old, nfsmountBlockBegin+"\n")
	if begin < 0 {
		if old != "" && !strings.HasSuffix(old, "\n") {
			old += "\n"
		}
		return old + block, nil
	}
	end := strings.Index(old[begin:], nfsmountBlockEnd+"\n")
	if end < 0 {
		return "", fmt.Errorf("nfstune's block begins but does not end (%q missing): fix the file by hand", nfsmountBlockEnd)
	}
	end += begin + len(nfsmountBlockEnd) + 1
	return old[:begin] + block + old[end:], nil
}

// nfsmountSections collects the sections from the mounts and the literal rules, sorted,
// with every option and name checked. A name two mounts want different options for is
// left out with a note: its section cannot tell them apart.
func nfsmountSections(p *Plan, inv *inventory.Inventory, want Want, desired []Desired) ([]mountSection, error) {
	type key struct{ kind, arg string }
	byKey := map[key]*mountSection{}
	conflict := map[key]bool{}
	var errs []string
	add := func(kind, arg string, prof policy.Profile, from string) error {
		if err := inventory.ValidSectionArg(kind, arg); err != nil {
			return err
		}
		opts, err := sectionOptions(p, prof.Mount)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", inventory.MountSection{Kind: kind, Arg: arg}.Title(), from, err)
		}
		if len(opts) == 0 {
			return nil
		}
		k := key{kind, strings.ToLower(arg)}
		s := byKey[k]
		switch {
		case s == nil:
			byKey[k] = &mountSection{kind: kind, arg: arg, opts: opts, from: []string{from}}
		case !slices.Equal(s.opts, opts):
			if !conflict[k] {
				p.note("%s not written: %s want %s and %s want %s; a section cannot tell them apart (a rule by mount point can)",
					s.title(), strings.Join(s.from, ", "), strings.Join(s.opts, ","), from, strings.Join(opts, ","))
			}
			conflict[k] = true
		case !slices.Contains(s.from, from):
			s.from = append(s.from, from)
		}
		return nil
	}
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		d := desired[i]
		if d.Mode == policy.ModeObserve || m.Proxy != nil {
			continue
		}
		from := strings.Join(m.MountPoints, ", ")
		type section struct{ kind, arg, from string }
		var secs []section
		if d.Match.MountPoint != "" {
			for _, mp := range m.MountPoints {
				if ok, _ := path.Match(d.Match.MountPoint, mp); ok {
					secs = append(secs, section{inventory.SectionMountPoint, mp, mp + " (" + d.Rule + ")"})
				}
			}
		} else {
			for _, server := range serverNames(m) {
				if strings.Contains(server, ":") {
					p.note("no [ Server ] section for %s (%s): mount.nfs cuts the server name at its first ':', so a section for an IPv6 address never applies; give the mount its options directly", server, from)
					continue
				}
				secs = append(secs, section{inventory.SectionServer, server, from})
			}
		}
		if len(d.Profile.Mount.List()) == 0 {
			continue // no option to write for it
		}
		// A name from the host that a section header cannot carry is refused for its
		// mount alone: one such mount must not keep the others' sections from being
		// written. The mount gets none of its sections, not some.
		if j := slices.IndexFunc(secs, func(s section) bool { return inventory.ValidSectionArg(s.kind, s.arg) != nil }); j >= 0 {
			p.warn("nfsmount.conf: no section for the mount of %s: %v", from, inventory.ValidSectionArg(secs[j].kind, secs[j].arg))
			continue
		}
		for _, s := range secs {
			if err := add(s.kind, s.arg, d.Profile, s.from); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	for _, r := range want.Rules {
		m := r.Match
		name := fmt.Sprintf("rule %d", r.Index)
		if r.Name != "" {
			name += " (" + r.Name + ")"
		}
		switch {
		case m.Server != "" && m.Export == "" && m.MountPoint == "" && !m.CIDR.IsValid() && !isGlob(m.Server):
			d := want.Resolve(&inventory.Mount{Server: m.Server})
			if d.Mode == policy.ModeObserve {
				continue
			}
			if err := add(inventory.SectionServer, m.Server, d.Profile, name); err != nil {
				errs = append(errs, err.Error())
			}
		case m.MountPoint != "" && m.Server == "" && m.Export == "" && !m.CIDR.IsValid() && !isGlob(m.MountPoint):
			d := want.Resolve(&inventory.Mount{MountPoints: []string{m.MountPoint}})
			if d.Mode == policy.ModeObserve {
				continue
			}
			if err := add(inventory.SectionMountPoint, m.MountPoint, d.Profile, name); err != nil {
				errs = append(errs, err.Error())
			}
		case m.Server != "" || m.MountPoint != "" || m.CIDR.IsValid():
			p.note("%s matches by pattern, address range or export, which nfsmount.conf cannot: sections only for the mounts it matches now", name)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	var out []mountSection
	for k, s := range byKey {
		if !conflict[k] {
			out = append(out, *s)
		}
	}
	slices.SortFunc(out, func(a, b mountSection) int {
		if a.kind != b.kind {
			return strings.Compare(b.kind, a.kind) // server before mountpoint
		}
		return strings.Compare(a.arg, b.arg)
	})
	return out, nil
}

// serverNames are the names a mount's server is reached by: the name in its source and,
// when it differs, the address the kernel uses, so that a mount by either gets the section.
func serverNames(m *inventory.Mount) []string {
	names := []string{m.Server}
	if a, err := netip.ParseAddr(m.ServerAddr); err == nil && !strings.EqualFold(a.String(), m.Server) {
		names = append(names, a.String())
	}
	return names
}

func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// sectionOptions turns a profile's options into nfsmount.conf lines, each checked as
// fstab's options are (policy.ValidOption) and free of the INI dialect's comment and
// section characters. "hard" is left out: it is the kernel's default, and mount.nfs would
// append it after a command line's "soft" (it only skips the same key), so that the
// section would override the mount's own choice; "soft" likewise.
func sectionOptions(p *Plan, o policy.MountOptions) ([]string, error) {
	var out []string
	for _, opt := range o.List() {
		if !policy.ValidOption(opt) || strings.ContainsAny(opt, ";[]") {
			return nil, fmt.Errorf("%q is not a single mount option nfsmount.conf can carry", opt)
		}
		switch opt {
		case "hard":
			continue
		case "soft", "softerr":
			p.note("%s is not written to nfsmount.conf: mount.nfs would append it after a mount's own hard and override it", opt)
			continue
		}
		out = append(out, confLine(opt))
	}
	return out, nil
}

// confLine writes one mount option as an nfsmount.conf key (nfsmount.conf(5)): key=value
// as is, a flag as "flag=True", a "noflag" as "flag=False"; mount.nfs turns them back.
func confLine(opt string) string {
	if strings.Contains(opt, "=") {
		return opt
	}
	if f, ok := strings.CutPrefix(opt, "no"); ok && f != "" {
		return f + "=False"
	}
	return opt + "=True"
}

// renderSections writes the file nfstune owns, or its block.
func renderSections(secs []mountSection, policyName string) string {
	var b strings.Builder
	src := "the built-in policy"
	if policyName != "" {
		src = policyName
	}
	fmt.Fprintf(&b, "# Written by nfstune apply from %s; nfstune revert removes it.\n", comment(src))
	b.WriteString("# mount.nfs adds these options to every NFS mount it makes (nfsmount.conf(5)). A mount's own\n")
	b.WriteString("# options win over its [ MountPoint ] section, which wins over its [ Server ] section, for the\n")
	b.WriteString("# same key. A [ Server ] section applies only to mounts made by exactly that name or address.\n")
	for _, s := range secs {
		fmt.Fprintf(&b, "\n%s\n# for %s\n", s.title(), comment(strings.Join(s.from, "; ")))
		for _, o := range s.opts {
			b.WriteString(o + "\n")
		}
	}
	return b.String()
}
