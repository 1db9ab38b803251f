package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// Files and directories mount.nfs reads its defaults from (nfsmount.conf(5)).
const (
	NFSMountConfPath   = "/etc/nfsmount.conf"
	NFSMountConfDropIn = "/etc/nfsmount.conf.d"
	// NFSTuneDropIn is the drop-in nfstune apply --nfsmount-conf writes. It sorts before a
	// site's own "90-local.conf", so that a hand-written override still wins, as
	// nfsmount.conf(5) lets later files do.
	NFSTuneDropIn = NFSMountConfDropIn + "/50-nfstune.conf"
)

// Kinds of nfsmount.conf sections.
const (
	SectionGlobal     = "global"     // [ NFSMount_Global_Options ]
	SectionServer     = "server"     // [ Server "name" ]
	SectionMountPoint = "mountpoint" // [ MountPoint "/path" ]
)

// MountDefaults is what mount.nfs adds to the options of every mount it makes
// (nfsmount.conf(5)): /etc/nfsmount.conf, then the files of /etc/nfsmount.conf.d ending in
// ".conf" in version order, a later file overriding a key an earlier one set.
type MountDefaults struct {
	// Mounter is the node's mount.nfs and what it reads; nil when none was found.
	Mounter *Mounter `json:"mounter,omitempty"`
	// Files are the configuration files that exist, in the order mount.nfs reads them.
	Files []string `json:"files,omitempty"`
	// Sections are the merged sections, in the order they first appear.
	Sections []MountSection `json:"sections,omitempty"`
}

// Mounter is the node's /sbin/mount.nfs. What it reads is told by the strings compiled
// into it: nfs-utils built with mount configuration (the default; configure
// --disable-mountconfig turns it off) names the section "NFSMount_Global_Options", and
// since nfs-utils 2.5.3 (commit 15e17993, "conffile: process config.d directory config
// files") it reads "<file>.d" in conf_init_dir, whose messages name the function.
type Mounter struct {
	Path string `json:"path"`
	// ReadsConfig is set when it reads /etc/nfsmount.conf at all.
	ReadsConfig bool `json:"reads_config"`
	// ReadsDropIns is set when it also reads /etc/nfsmount.conf.d/*.conf.
	ReadsDropIns bool `json:"reads_drop_ins"`
}

// MountSection is one nfsmount.conf section, merged over every file that has it.
type MountSection struct {
	// Kind is SectionGlobal, SectionServer or SectionMountPoint; Arg the server name or
	// mount point (empty for the global section).
	Kind string `json:"kind"`
	Arg  string `json:"arg,omitempty"`
	// Headers are "file:line" of each header of this section, in the order read.
	Headers []string        `json:"headers"`
	Options []SectionOption `json:"options"`
	// Addrs are the addresses /etc/hosts gives a server section's name: a mount made by
	// one of them does not get the section.
	Addrs []string `json:"hosts_addrs,omitempty"`
}

// SectionOption is one key of a section, as the last file that set it wrote it.
type SectionOption struct {
	// Key is lower-cased, as mount.nfs passes it to the kernel.
	Key   string `json:"key"`
	Value string `json:"value"`
	// From is "file:line" of the section header above the key that won.
	From string `json:"from"`
}

// Option is the mount option mount.nfs makes of the key (configfile.c
// conf_parse_mntopts): "True" the flag, "False" its "no" form, anything else key=value.
func (o SectionOption) Option() string {
	switch strings.ToLower(o.Value) {
	case "true":
		return o.Key
	case "false":
		return "no" + o.Key
	}
	return o.Key + "=" + o.Value
}

// Title is the section header as written in the file.
func (s MountSection) Title() string {
	switch s.Kind {
	case SectionServer:
		return fmt.Sprintf("[ Server %q ]", s.Arg)
	case SectionMountPoint:
		return fmt.Sprintf("[ MountPoint %q ]", s.Arg)
	}
	return "[ NFSMount_Global_Options ]"
}

// Get returns the option of a key, if the section has it.
func (s MountSection) Get(key string) (SectionOption, bool) {
	for _, o := range s.Options {
		if o.Key == key {
			return o, true
		}
	}
	return SectionOption{}, false
}

// Matching returns the sections mount.nfs applies to a mount of server on mountPoint, in
// the order it applies them: the mount point's, the server's, then the global one. Server
// names and mount points are compared exactly, ignoring case (nfsmount.conf(5)): a section
// for a name does not apply to a mount made by the name's address.
func (d MountDefaults) Matching(server, mountPoint string) []MountSection {
	var out []MountSection
	for _, kind := range []string{SectionMountPoint, SectionServer, SectionGlobal} {
		for _, s := range d.Sections {
			if s.Kind != kind {
				continue
			}
			switch {
			case kind == SectionGlobal,
				kind == SectionServer && strings.EqualFold(s.Arg, server),
				kind == SectionMountPoint && strings.EqualFold(s.Arg, mountPoint):
				out = append(out, s)
			}
		}
	}
	return out
}

// versionKeys are the options that choose the NFS version; mount.nfs takes the first one
// it sees (configfile.c version_keys).
var versionKeys = []string{"v3", "v4", "vers", "nfsvers", "minorversion"}

func isVersionKey(k string) bool {
	return slices.Contains(versionKeys, k) || strings.HasPrefix(k, "v4.")
}

// Merge is the option string mount.nfs hands the kernel for a mount of server on
// mountPoint with the command-line options cmdline, and the section of each option it
// added ("file:line"), as configfile.c conf_get_mntopts builds it: the mount point's
// section, the server's, then the global one, each key skipped when the options so far
// have the key, its "no" form or the key without "no", or, for a version key, any version.
// Anything else is appended, so a section's "soft" follows a command line's "hard", and
// the kernel takes the last of the two.
func (d MountDefaults) Merge(server, mountPoint string, cmdline []string) (opts []string, from map[string]string) {
	opts = slices.Clone(cmdline)
	from = map[string]string{}
	has := func(k string) bool {
		for _, o := range opts {
			if name, _, _ := strings.Cut(o, "="); name == k {
				return true
			}
		}
		return false
	}
	haveVersion := slices.ContainsFunc(opts, func(o string) bool {
		name, _, _ := strings.Cut(o, "=")
		return isVersionKey(name)
	})
	if d.Mounter != nil && !d.Mounter.ReadsConfig {
		return opts, from
	}
	for _, s := range d.Matching(server, mountPoint) {
		for _, o := range s.Options {
			k := o.Key
			if has(k) || strings.HasPrefix(k, "no") && has(k[2:]) || has("no"+k) {
				continue
			}
			if isVersionKey(k) {
				if haveVersion {
					continue
				}
				haveVersion = true
			}
			opt := o.Option()
			opts = append(opts, opt)
			from[opt] = o.From
		}
	}
	return opts, from
}

// readMountDefaults reads what mount.nfs reads: /etc/nfsmount.conf (includes followed),
// then /etc/nfsmount.conf.d/*.conf in version order, and finds mount.nfs.
func readMountDefaults(root hostfs.Root) (MountDefaults, []string) {
	var d MountDefaults
	var warnings []string
	mounter, err := FindMounter(root)
	if err != nil {
		warnings = append(warnings, err.Error())
	}
	d.Mounter = mounter
	read := func(p string) ([]byte, error) { return hostfs.ReadSmall(root.Path(p)) }
	files := []string{NFSMountConfPath}
	if entries, err := hostfs.ReadDir(root.Path(NFSMountConfDropIn)); err == nil {
		var names []string
		for _, e := range entries {
			n := e.Name()
			if strings.HasPrefix(n, ".") || len(n) <= len(".conf") || !strings.HasSuffix(n, ".conf") || e.IsDir() {
				continue
			}
			names = append(names, n)
		}
		slices.SortFunc(names, CompareVersions)
		for _, n := range names {
			files = append(files, path.Join(NFSMountConfDropIn, n))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		warnings = append(warnings, fmt.Sprintf("reading %s: %v", NFSMountConfDropIn, err))
	}
	for _, f := range files {
		if _, err := read(f); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				warnings = append(warnings, fmt.Sprintf("reading %s: %v", f, err))
			}
			continue
		}
		d.Files = append(d.Files, f)
		secs, w := readNFSConfFile(read, f, 0)
		warnings = append(warnings, w...)
		for _, s := range secs {
			d.add(s, &warnings)
		}
	}
	if b, err := hostfs.ReadSmall(root.Etc("hosts")); err == nil {
		hosts := parseHosts(string(b))
		for i := range d.Sections {
			if s := &d.Sections[i]; s.Kind == SectionServer {
				s.Addrs = hosts[strings.ToLower(s.Arg)]
			}
		}
	}
	return d, warnings
}

// parseHosts maps each lower-cased name of an /etc/hosts file (hosts(5)) to its addresses.
func parseHosts(text string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		for _, name := range f[1:] {
			name = strings.ToLower(name)
			if !slices.Contains(out[name], a.String()) {
				out[name] = append(out[name], a.String())
			}
		}
	}
	return out
}

// add merges one parsed section into d.
func (d *MountDefaults) add(s INISection, warnings *[]string) {
	var kind, arg string
	switch s.Name {
	case "nfsmount_global_options":
		kind = SectionGlobal
	case "server":
		kind, arg = SectionServer, s.Arg
	case "mountpoint":
		kind, arg = SectionMountPoint, s.Arg
	default:
		*warnings = append(*warnings, fmt.Sprintf("%s:%d: unknown section %q", s.File, s.Line, s.Name))
		return
	}
	header := fmt.Sprintf("%s:%d", s.File, s.Line)
	i := slices.IndexFunc(d.Sections, func(x MountSection) bool { return x.Kind == kind && strings.EqualFold(x.Arg, arg) })
	if i < 0 {
		d.Sections = append(d.Sections, MountSection{Kind: kind, Arg: arg})
		i = len(d.Sections) - 1
	}
	sec := &d.Sections[i]
	sec.Headers = append(sec.Headers, header)
	keys := make([]string, 0, len(s.Keys))
	for k := range s.Keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		o := SectionOption{Key: k, Value: s.Keys[k], From: header}
		if j := slices.IndexFunc(sec.Options, func(x SectionOption) bool { return x.Key == k }); j >= 0 {
			sec.Options[j] = o
		} else {
			sec.Options = append(sec.Options, o)
		}
	}
}

// mounterPaths are where mount(8) finds the NFS helper.
var mounterPaths = []string{"/sbin/mount.nfs", "/usr/sbin/mount.nfs"}

// mounterMarkers are strings compiled into mount.nfs: the global section's name (mount
// configuration built in) and conf_init_dir's messages (drop-ins, nfs-utils 2.5.3).
var mounterMarkers = [][]byte{[]byte("NFSMount_Global_Options"), []byte("conf_init_dir")}

// maxMounterSize caps how much of mount.nfs is scanned (it is about 130 KiB).
const maxMounterSize = 16 << 20

// FindMounter scans the first mount.nfs found below root for the markers of what it
// reads; nil and no error when there is none. A mount.nfs that is there but cannot be
// read, or is not a regular file (a FIFO would block the read), is an error: what the
// node's mounts read is then unknown, and the next path is not what mount(8) runs.
func FindMounter(root hostfs.Root) (*Mounter, error) {
	for _, p := range mounterPaths {
		found, err := scanFile(root.Path(p), mounterMarkers)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", p, err)
		}
		return &Mounter{Path: p, ReadsConfig: found[0], ReadsDropIns: found[0] && found[1]}, nil
	}
	return nil, nil
}

// scanFile reports which of the markers occur in the file, reading it in chunks. The file
// is opened as every host file is (hostfs.Open): a regular file only, without blocking.
func scanFile(p string, markers [][]byte) ([]bool, error) {
	f, err := hostfs.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	found := make([]bool, len(markers))
	overlap := 0
	for _, m := range markers {
		overlap = max(overlap, len(m)-1)
	}
	buf := make([]byte, 0, 64<<10+overlap)
	chunk := make([]byte, 64<<10)
	total := 0
	for total < maxMounterSize {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		total += n
		for i, m := range markers {
			found[i] = found[i] || bytes.Contains(buf, m)
		}
		if len(buf) > overlap {
			buf = append(buf[:0], buf[len(buf)-overlap:]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// CompareVersions orders names as glibc's versionsort (strverscmp) does for the usual
// drop-in names: runs of digits compare by value, everything else byte by byte.
func CompareVersions(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, ra := digitRun(a)
			nb, rb := digitRun(b)
			ia, _ := strconv.ParseUint(na, 10, 64)
			ib, _ := strconv.ParseUint(nb, 10, 64)
			if ia != ib {
				if ia < ib {
					return -1
				}
				return 1
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// ValidSectionArg reports why a server name or mount point cannot be the argument of an
// nfsmount.conf section header, or nil: it must be non-empty printable ASCII without
// quotes, brackets, comment characters or a backslash, since the header is
// [ Server "arg" ] and nfs-utils' parser has no escapes; a mount point must be a clean
// absolute path.
func ValidSectionArg(kind, arg string) error {
	if arg == "" {
		return fmt.Errorf("empty %s name", kind)
	}
	for _, r := range arg {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || strings.ContainsRune("\"'[]#;\\", r) || (kind == SectionServer && r == ' ') {
			return fmt.Errorf("%s %q: nfsmount.conf cannot carry %q in a section header", kind, arg, r)
		}
	}
	if kind == SectionMountPoint && (!path.IsAbs(arg) || path.Clean(arg) != arg) {
		return fmt.Errorf("mount point %q: want a clean absolute path", arg)
	}
	if kind == SectionServer && strings.Contains(arg, ":") {
		// mount.nfs cuts the server name at the first ':' of "server:/export", so an
		// IPv6 address never matches a section.
		return fmt.Errorf("server %q: mount.nfs cuts the server name at its first ':', so a section for an IPv6 address never applies", arg)
	}
	return nil
}
