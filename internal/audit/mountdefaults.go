package audit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// nfsmount.conf(5) and nfs-utils' utils/mount/configfile.c (conf_get_mntopts) are the
// source of the rules in this file.
const mountConfSource = "nfsmount.conf(5); nfs-utils utils/mount/configfile.c conf_get_mntopts"

// OptionOrigin is where one of a mount's effective options most likely came from.
type OptionOrigin struct {
	Option string `json:"option"`
	// Source is "/etc/fstab:N", a section of nfsmount.conf ("file:line [ Server "x" ]"),
	// "PV or StorageClass mountOptions" or "mount command line" for a mount kubelet or a
	// user made with options, or "kernel default".
	Source string `json:"source"`
}

// optionFamily lists the options that set the same thing as key; mount.nfs skips a
// section's key only when the options so far have the same key or its "no" form.
func optionFamily(key string) []string {
	switch key {
	case "hard", "soft", "softerr":
		return []string{"hard", "soft", "softerr"}
	case "actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax":
		return []string{"actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax", "noac"}
	case "vers", "nfsvers", "v3", "v4", "minorversion":
		return []string{"vers", "nfsvers", "v3", "v4", "minorversion"}
	}
	if f, ok := strings.CutPrefix(key, "no"); ok {
		return []string{f, key}
	}
	return []string{key, "no" + key}
}

// atLeast are the options whose profile value is a minimum.
var atLeast = []string{"nconnect", "rsize", "wsize"}

// profileConflict reports whether opt, an option mount.nfs adds, gives the mount less than
// the profile's want (an option of the same family).
func profileConflict(want, opt string) bool {
	want, opt = canonicalOption(want), canonicalOption(opt)
	wk, wv, _ := strings.Cut(want, "=")
	ok, ov, _ := strings.Cut(opt, "=")
	if !slices.Contains(optionFamily(wk), ok) {
		return false
	}
	if ok == wk && slices.Contains(atLeast, wk) {
		w, err1 := strconv.Atoi(wv)
		o, err2 := strconv.Atoi(ov)
		return err1 == nil && err2 == nil && o < w
	}
	if ok == wk && wk == "vers" {
		return normVersion(ov) != normVersion(wv)
	}
	return opt != want
}

// canonicalOption writes an option the one way of the spellings the kernel parses alike
// (fs/nfs/fs_context.c nfs_fs_parameters): nfsvers= and vers= are both Opt_vers, the flags
// v2 to v4.2 are Opt_v (the version in the name), and the flags tcp, udp and rdma set the
// transport as proto= does.
func canonicalOption(opt string) string {
	k, v, kv := strings.Cut(opt, "=")
	switch {
	case kv && k == "nfsvers":
		return "vers=" + v
	case !kv && slices.Contains([]string{"v2", "v3", "v4", "v4.0", "v4.1", "v4.2"}, k):
		return "vers=" + k[1:]
	case !kv && slices.Contains([]string{"tcp", "udp", "rdma"}, k):
		return "proto=" + k
	}
	return opt
}

func normVersion(v string) string {
	if v == "4" {
		return "4.0"
	}
	return v
}

// sectionAt finds the section whose header or key is at "file:line".
func sectionAt(d *inventory.MountDefaults, from string) inventory.MountSection {
	for _, s := range d.Sections {
		if slices.Contains(s.Headers, from) {
			return s
		}
	}
	return inventory.MountSection{}
}

// mountDefaultsPoint is the mount point mount.nfs would see for the mount: one with a
// [ MountPoint ] section if any, else the first.
func mountDefaultsPoint(d *inventory.MountDefaults, m *inventory.Mount) string {
	for _, mp := range m.MountPoints {
		for _, s := range d.Sections {
			if s.Kind == inventory.SectionMountPoint && strings.EqualFold(s.Arg, mp) {
				return mp
			}
		}
	}
	if len(m.MountPoints) > 0 {
		return m.MountPoints[0]
	}
	return ""
}

// csiMounted reports whether kubelet had a CSI node plugin mount it: the plugin runs
// mount.nfs in its own container, with that container's /etc.
func csiMounted(m *inventory.Mount) bool {
	return slices.ContainsFunc(m.MountPoints, func(mp string) bool {
		return strings.Contains(mp, "/kubernetes.io~csi/") || strings.Contains(mp, "/plugins/kubernetes.io/csi/")
	})
}

// inTreeMounted reports whether kubelet's in-tree nfs plugin mounted it (a PV or an inline
// volume): kubelet runs mount on the node, which reads the host's nfsmount.conf.
func inTreeMounted(m *inventory.Mount) bool {
	return slices.ContainsFunc(m.MountPoints, func(mp string) bool { return strings.Contains(mp, "/kubernetes.io~nfs/") })
}

// checkMountDefaults compares what nfsmount.conf gives the next mount of this server and
// mount point with the profile, and with what the mount has:
// NFS051 a [ Server ] section written for another name or address of the mount's server;
// NFS052 a global option that gives the mount less than its profile;
// NFS053 sections the mounter of this mount does not read (a CSI node plugin);
// NFS054 a [ Server ] or [ MountPoint ] section that disagrees with the profile.
func checkMountDefaults(c *mountCtx) []Finding {
	d := c.inv.MountDefaults
	if d == nil || len(d.Sections) == 0 || c.m.Proxy != nil {
		return nil
	}
	var out []Finding
	out = append(out, checkSectionName(c, d)...)
	mp := mountDefaultsPoint(d, c.m)
	added, from := d.Merge(c.m.Server, mp, nil)
	if csiMounted(c.m) {
		var missing []string
		for _, o := range added {
			if !optionInEffect(o, c.m.Options) {
				missing = append(missing, o+" ("+from[o]+")")
			}
		}
		if len(missing) > 0 {
			f := c.finding("NFS053", SeverityWarning)
			f.Message = "mounted by a CSI node plugin, which runs mount.nfs in its own container with its own /etc: the host's nfsmount.conf does not reach this mount, which lacks " + strings.Join(missing, ", ")
			f.Expected = "the options nfsmount.conf gives: " + strings.Join(missing, ", ")
			f.Actual = "not in effect"
			f.Fix = "put the options in the StorageClass's or PV's mountOptions (nfstune k8s volume renders them), or mount the host's /etc/nfsmount.conf and /etc/nfsmount.conf.d into the node plugin (csi-driver-nfs: feature.propagateHostMountOptions=true)"
			f.Reason = "kubelet asks the CSI node plugin to mount; the plugin's container image has its own /etc"
			f.Source = mountConfSource + "; docs/kubernetes.md"
			out = append(out, f)
		}
		return out
	}
	if c.res.Mode == policy.ModeObserve {
		return out
	}
	for _, want := range c.res.Mount.List() {
		for _, o := range added {
			if !profileConflict(want, o) {
				continue
			}
			sec := sectionAt(d, from[o])
			if sec.Kind == inventory.SectionGlobal {
				f := c.finding("NFS052", SeverityWarning)
				f.Message = fmt.Sprintf("the global section of nfsmount.conf gives every mount %s, against the profile's %s; it reaches every server that no [ Server ] or [ MountPoint ] section sets it for", o, want)
				if k, _, _ := strings.Cut(o, "="); k == "soft" || k == "softerr" || strings.HasPrefix(k, "ac") {
					f.Message += ", and mount.nfs appends it even after a mount's own " + want + ", which it then overrides"
				}
				f.Expected = want
				f.Actual = fmt.Sprintf("%s from %s at %s", o, sec.Title(), from[o])
				f.Fix = fmt.Sprintf("remove %s from %s at %s (a global option should be one every server wants), and set it per server: nfstune apply --nfsmount-conf", o, sec.Title(), from[o])
				f.Reason = "options in [ NFSMount_Global_Options ] apply to every NFS mount mount.nfs makes"
				f.Source = mountConfSource
				out = append(out, f)
				continue
			}
			f := c.finding("NFS054", SeverityWarning)
			f.Message = fmt.Sprintf("nfsmount.conf %s gives the next mount %s, but the profile (%s/%s, %s) wants %s", sec.Title(), o, c.res.Backend, c.res.Workload, c.res.Rule, want)
			f.Expected = fmt.Sprintf("%s in %s", confKey(want), sec.Title())
			f.Actual = fmt.Sprintf("%s at %s", confKey(o), from[o])
			f.Fix = sectionFix(d, fileOf(from[o]), sec.Title(), confKey(o), confKey(want))
			f.Reason = "mount.nfs adds the section's options to every mount of this server or mount point that does not set them itself"
			f.Source = mountConfSource
			out = append(out, f)
		}
	}
	return out
}

// checkSectionName is NFS051: no section for the name the mount was made by, but one for
// another name or address of the same server, which mount.nfs does not consider.
func checkSectionName(c *mountCtx, d *inventory.MountDefaults) []Finding {
	m := c.m
	if m.Server == "" || slices.ContainsFunc(d.Sections, func(s inventory.MountSection) bool {
		return s.Kind == inventory.SectionServer && strings.EqualFold(s.Arg, m.Server)
	}) {
		return nil
	}
	var out []Finding
	for _, s := range d.Sections {
		if s.Kind != inventory.SectionServer {
			continue
		}
		why := ""
		switch {
		case m.ServerAddr != "" && strings.EqualFold(s.Arg, m.ServerAddr):
			why = fmt.Sprintf("the section is for the address %s, and the mount was made by the name %q", s.Arg, m.Server)
		case m.ServerAddr != "" && slices.Contains(s.Addrs, m.ServerAddr):
			why = fmt.Sprintf("the section is for the name %q, which /etc/hosts gives %s, and the mount was made by %q", s.Arg, m.ServerAddr, m.Server)
		default:
			for _, other := range c.inv.Mounts {
				if strings.EqualFold(other.Server, s.Arg) && other.ServerAddr != "" && other.ServerAddr == m.ServerAddr {
					why = fmt.Sprintf("the section is for %q, which %s reached at %s too, and this mount was made by %q", s.Arg, strings.Join(other.MountPoints, ", "), m.ServerAddr, m.Server)
					break
				}
			}
		}
		if why == "" {
			continue
		}
		var lines []string
		for _, o := range s.Options {
			lines = append(lines, o.Key+"="+o.Value)
		}
		f := c.finding("NFS051", SeverityWarning)
		f.Message = fmt.Sprintf("nfsmount.conf %s does not apply to this mount: mount.nfs matches a [ Server ] section by the exact name in the mount command; %s", s.Title(), why)
		f.Expected = fmt.Sprintf("a [ Server %q ] section", m.Server)
		f.Actual = fmt.Sprintf("only %s (%s)", s.Title(), strings.Join(s.Headers, ", "))
		f.Fix = fmt.Sprintf("add [ Server %q ] with %s next to %s (nfstune apply --nfsmount-conf writes a section for the name and for the address of every mounted server), or mount by %s", m.Server, strings.Join(lines, " "), s.Title(), s.Arg)
		f.Reason = "the [ Server ] name must be an exact match (ignoring case) of the server name used in the mount command"
		f.Source = mountConfSource
		out = append(out, f)
	}
	return out
}

// sectionFix says where to change a key: nfstune's own drop-in is rewritten by apply; a file
// read after it overrides it and must be edited; a file read before it is overridden once
// apply writes the drop-in.
func sectionFix(d *inventory.MountDefaults, file, title, have, want string) string {
	ours := slices.Index(d.Files, inventory.NFSTuneDropIn)
	switch at := slices.Index(d.Files, file); {
	case file == inventory.NFSTuneDropIn:
		return fmt.Sprintf("nfstune apply --nfsmount-conf: %s was written from an older policy", file)
	case ours >= 0 && at > ours:
		return fmt.Sprintf("in %s, under %s, change %s to %s or remove it: that file is read after %s and overrides it", file, title, have, want, inventory.NFSTuneDropIn)
	}
	return fmt.Sprintf("in %s, under %s, change %s to %s; or run nfstune apply --nfsmount-conf, whose drop-in %s is read after it", file, title, have, want, inventory.NFSTuneDropIn)
}

// confKey writes an option as an nfsmount.conf key.
func confKey(opt string) string {
	if strings.Contains(opt, "=") {
		return opt
	}
	if f, ok := strings.CutPrefix(opt, "no"); ok && f != "" {
		return f + "=False"
	}
	return opt + "=True"
}

func fileOf(from string) string {
	if i := strings.LastIndexByte(from, ':'); i > 0 {
		return from[:i]
	}
	return from
}

// optionInEffect reports whether an option mount.nfs adds shows in the mount's effective
// options. rsize and wsize count as in effect when the server lowered them.
func optionInEffect(opt string, have map[string]string) bool {
	k, v, kv := strings.Cut(opt, "=")
	switch {
	case k == "actimeo":
		for _, t := range []string{"acregmin", "acregmax", "acdirmin", "acdirmax"} {
			if have[t] != v {
				return false
			}
		}
		return true
	case k == "rsize" || k == "wsize":
		w, _ := strconv.Atoi(v)
		h, err := strconv.Atoi(have[k])
		return err == nil && h <= w && h > 0
	case k == "vers" || k == "nfsvers":
		return normVersion(have["vers"]) == normVersion(v)
	case !kv:
		_, ok := have[k]
		return ok
	}
	return have[k] == v
}

// optionOrigins tells, for the options a mount's profile names, where the effective value
// came from: fstab, an nfsmount.conf section (when the section's value is the one in
// effect and fstab does not set it), kubelet (a PV or StorageClass), the command line, or
// the kernel's default. Nil when no nfsmount.conf section matches the mount.
func optionOrigins(inv *inventory.Inventory, m *inventory.Mount, profile policy.MountOptions) []OptionOrigin {
	d := inv.MountDefaults
	if d == nil || m.Proxy != nil {
		return nil
	}
	mp := mountDefaultsPoint(d, m)
	if len(d.Matching(m.Server, mp)) == 0 {
		return nil
	}
	var cmdline []string
	fstab := ""
	if m.Requested != nil {
		for _, src := range strings.Split(m.Requested.Source, ", ") {
			if strings.HasPrefix(src, "/etc/fstab:") {
				fstab = src
			}
		}
	}
	if fstab != "" {
		for k, v := range m.Requested.Options {
			if v == "" {
				cmdline = append(cmdline, k)
			} else {
				cmdline = append(cmdline, k+"="+v)
			}
		}
	}
	added, from := d.Merge(m.Server, mp, cmdline)
	added = added[len(cmdline):]
	var out []OptionOrigin
	seen := map[string]bool{}
	for _, want := range profile.List() {
		key, _, _ := strings.Cut(want, "=")
		eff := effectiveOption(key, m.Options)
		if eff == "" || seen[eff] {
			continue
		}
		seen[eff] = true
		o := OptionOrigin{Option: eff}
		secOpt := slices.IndexFunc(added, func(a string) bool { return slices.Contains(optionFamily(key), strings.SplitN(a, "=", 2)[0]) })
		switch {
		case fstab != "" && slices.ContainsFunc(cmdline, func(c string) bool {
			return slices.Contains(optionFamily(key), strings.SplitN(c, "=", 2)[0])
		}):
			o.Source = fstab
		case csiMounted(m) || inTreeMounted(m) && secOpt < 0:
			o.Source = "PV or StorageClass mountOptions"
		case secOpt >= 0 && optionInEffect(added[secOpt], m.Options):
			o.Source = fmt.Sprintf("%s %s", from[added[secOpt]], sectionAt(d, from[added[secOpt]]).Title())
		case isKernelDefault(eff):
			o.Source = "kernel default"
		default:
			o.Source = "mount command line"
		}
		out = append(out, o)
	}
	return out
}

// effectiveOption is the mount's effective option for a profile key, as mountinfo shows it.
func effectiveOption(key string, have map[string]string) string {
	for _, k := range optionFamily(key) {
		if k == "actimeo" {
			continue
		}
		if v, ok := have[k]; ok {
			if v == "" {
				return k
			}
			return k + "=" + v
		}
	}
	return ""
}

// isKernelDefault reports the values Linux picks when nothing asks (nfs(5)): hard, TCP,
// timeo=600, retrans=2.
func isKernelDefault(opt string) bool {
	return slices.Contains([]string{"hard", "proto=tcp", "timeo=600", "retrans=2"}, opt)
}

// checkMounterReads is NFS053 for the host: nfsmount.conf files the node's mount.nfs never
// reads, because it predates drop-ins (nfs-utils 2.5.3) or was built without mount
// configuration.
func checkMounterReads(inv *inventory.Inventory) []Finding {
	d := inv.MountDefaults
	if d == nil || d.Mounter == nil {
		return nil
	}
	var unread []string
	for _, f := range d.Files {
		if !d.Mounter.ReadsConfig || strings.HasPrefix(f, inventory.NFSMountConfDropIn+"/") && !d.Mounter.ReadsDropIns {
			unread = append(unread, f)
		}
	}
	if len(unread) == 0 {
		return nil
	}
	f := Finding{ID: "NFS053", Severity: SeverityWarning, MountPoints: []string{}}
	if !d.Mounter.ReadsConfig {
		f.Message = fmt.Sprintf("%s was built without mount configuration: no nfsmount.conf file is read, so none of their options reach a mount", d.Mounter.Path)
		f.Fix = "install a distribution nfs-utils (nfs-common) built with mount configuration, or give each mount its options (fstab, PV or StorageClass mountOptions)"
	} else {
		f.Message = fmt.Sprintf("%s reads %s but not %s (nfs-utils before 2.5.3): the drop-ins' options reach no mount", d.Mounter.Path, inventory.NFSMountConfPath, inventory.NFSMountConfDropIn)
		f.Fix = fmt.Sprintf("move the sections into %s (nfstune apply --nfsmount-conf does so on this node), or upgrade nfs-utils to 2.5.3 or later", inventory.NFSMountConfPath)
	}
	f.Expected = "every nfsmount.conf file read by mount.nfs"
	f.Actual = "not read: " + strings.Join(unread, ", ")
	f.Message += " (" + f.Actual + ")"
	f.Reason = "mount.nfs reads <file>.d only since nfs-utils 2.5.3 (commit 15e17993, conffile: process config.d directory config files)"
	f.Source = mountConfSource + "; nfs-utils support/nfs/conffile.c conf_init_dir"
	return []Finding{f}
}

// defaultHostnames are the host names images ship with: nodes cloned from one and never
// renamed all present the same NFSv4 client string.
var defaultHostnames = []string{"localhost", "localhost.localdomain", "(none)", "debian", "ubuntu", "raspberrypi", "fedora", "centos", "rocky", "almalinux", "archlinux", "alpine", "node", "worker"}

// defaultIdentifiers are uniquifiers that are no better than none: an image's
// uninitialised machine-id and the like.
var defaultIdentifiers = []string{"uninitialized", "00000000000000000000000000000000", "(null)"}

// checkClientIdentity is NFS045: the NFSv4 client identity would collide across a fleet,
// because no uniquifier is set and only the host name tells nodes apart, or because the
// uniquifier or host name is an image's default. A node without NFS mounts has no client
// whose lease could be taken: it gets no finding, and the agent's
// nfstune_node_nfs_client_identity_info still shows its identity to the fleet.
func checkClientIdentity(inv *inventory.Inventory) []Finding {
	id := inv.ClientIdentity
	if id == nil || len(inv.Mounts) == 0 {
		return nil
	}
	f := Finding{ID: "NFS045", Severity: SeverityWarning, MountPoints: []string{}}
	uniq := ""
	switch id.Source {
	case inventory.IdentityIdentifier:
		uniq = *id.Identifier
	case inventory.IdentityUniqueID:
		uniq = *id.UniqueID
	}
	switch {
	case id.Source == inventory.IdentityHostname:
		f.Message = fmt.Sprintf("the NFSv4 client identity is the host name %q alone: neither /sys/fs/nfs/net/nfs_client/identifier nor nfs4_unique_id is set, so nodes (or containers) with the same host name are one client to the server and expire each other's leases and locks", id.Hostname)
		if slices.Contains(defaultHostnames, strings.ToLower(id.Hostname)) {
			f.Severity = SeverityError
			f.Message += "; and this host name is an image's default"
		}
		f.Actual = fmt.Sprintf("host name %q only (fingerprint %s)", id.Hostname, id.Fingerprint)
	case slices.Contains(defaultIdentifiers, strings.ToLower(uniq)):
		f.Message = fmt.Sprintf("the NFSv4 client uniquifier (%s) is %q, an image default that every node cloned from it shares", id.Source, uniq)
		f.Actual = fmt.Sprintf("%s %q (fingerprint %s)", id.Source, uniq, id.Fingerprint)
	default:
		return nil
	}
	f.Expected = "a uniquifier unique to this node (and to each network namespace that mounts NFSv4)"
	f.Fix = "before the first NFSv4 mount: echo $(cat /etc/machine-id) > /sys/fs/nfs/net/nfs_client/identifier (per network namespace), or persist options nfs nfs4_unique_id=<uuid> in /etc/modprobe.d/nfsclient.conf; clients made before keep their identity until unmounted. Compare nodes with count by (fingerprint) (nfstune_node_nfs_client_identity_info) > 1"
	f.Reason = "the server tells clients apart only by the client string; a second client with the same string replaces the first's lease (NFSv4.1 EXCHANGE_ID)"
	f.Source = "https://docs.kernel.org/filesystems/nfs/client-identifier.html; fs/nfs/nfs4proc.c nfs4_get_uniquifier"
	return []Finding{f}
}
