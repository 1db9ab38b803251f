package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// FstabEntry is one NFS line of /etc/fstab (fstab(5)).
type FstabEntry struct {
	// Line is the 1-based line number in the file.
	Line int
	// Spec is the source, "server:/export", octal escapes decoded.
	Spec string
	// MountPoint is the cleaned mount point, octal escapes decoded.
	MountPoint string
	FSType     string
	// Options are the mount options as written; flags have an empty value.
	Options map[string]string
}

// ParseFstab returns the nfs and nfs4 entries of an fstab file, and those of the mount
// helpers that end in an NFS mount through a local proxy: efs (efs-utils' mount.efs) and
// aznfs (AZNFS' mount.aznfs). Fields are separated by blanks and "\040"-style escapes are
// decoded, as mount(8) does. Lines with fewer than three fields are skipped with a
// warning; other filesystems are ignored. A line longer than 1 MiB is an error
// (ErrLineTooLong), and no entry is returned: the file was not read whole.
func ParseFstab(r io.Reader) ([]FstabEntry, []string, error) {
	var out []FstabEntry
	var warnings []string
	err := scanLines(r, func(n int, line string) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			return
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			warnings = append(warnings, fmt.Sprintf("fstab line %d: want at least 3 fields, got %d", n, len(f)))
			return
		}
		fstype := UnescapeOctal(f[2])
		if !isNFSType(fstype) && fstype != "efs" && fstype != "aznfs" {
			return
		}
		e := FstabEntry{
			Line:       n,
			Spec:       UnescapeOctal(f[0]),
			MountPoint: cleanMountPoint(UnescapeOctal(f[1])),
			FSType:     fstype,
			Options:    map[string]string{},
		}
		if len(f) > 3 {
			e.Options = parseOptions(UnescapeOctal(f[3]))
			delete(e.Options, "defaults")
		}
		out = append(out, e)
	})
	if err != nil {
		return nil, warnings, err
	}
	return out, warnings, nil
}

func cleanMountPoint(p string) string {
	if p == "" {
		return p
	}
	return path.Clean(p)
}

// parseOptions splits "a,b=c" into a map; flags get an empty value.
func parseOptions(s string) map[string]string { return parseOptionsWithRoom(s, 0) }

// parseOptionsWithRoom is parseOptions with room in the map for extra more options, to be
// added without growing it.
func parseOptionsWithRoom(s string, extra int) map[string]string {
	// Sized for every option at once: an NFS superblock has some twenty, and growing the
	// map as they come was most of a mount table's parse.
	m := make(map[string]string, strings.Count(s, ",")+1+extra)
	for o := range strings.SplitSeq(s, ",") {
		if o == "" {
			continue
		}
		k, v, _ := strings.Cut(o, "=")
		m[k] = v
	}
	return m
}

// INISection is one "[name]" or "[name "arg"]" section of an nfs.conf or nfsmount.conf
// file, keys lower-cased.
type INISection struct {
	// Name is the lower-cased section name; Arg the quoted argument, if any.
	Name, Arg string
	// File and Line locate the section header.
	File string
	Line int
	Keys map[string]string
	// Includes are the values of "include" keys in this section, in file order.
	Includes []string
}

// ParseINI parses the INI dialect of nfs.conf(5) and nfsmount.conf(5): "[section]" or
// "[section "arg"]" headers (blanks inside the brackets allowed), "key = value" lines,
// whole-line and trailing comments starting with '#' or ';', surrounding quotes stripped,
// names case-insensitive. Values are kept as written: "$VAR" is not expanded. Lines that
// are neither are reported as warnings. Keys outside a section go to a section named "".
// "include" keys are collected in Includes, in order, for the caller to follow. A line
// longer than 1 MiB is an error (ErrLineTooLong) naming the file, and no section is
// returned: the file was not read whole.
func ParseINI(r io.Reader, file string) ([]INISection, []string, error) {
	var out []INISection
	var warnings []string
	cur := -1
	err := scanLines(r, func(n int, line string) {
		line = strings.TrimSpace(stripComment(line))
		if line == "" {
			return
		}
		if line[0] == '[' {
			end := strings.LastIndexByte(line, ']')
			if end < 0 {
				warnings = append(warnings, fmt.Sprintf("%s:%d: unterminated section header", file, n))
				cur = -1
				return
			}
			name, arg := splitSectionHeader(line[1:end])
			out = append(out, INISection{Name: name, Arg: arg, File: file, Line: n, Keys: map[string]string{}})
			cur = len(out) - 1
			return
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			warnings = append(warnings, fmt.Sprintf("%s:%d: want key = value", file, n))
			return
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "" {
			warnings = append(warnings, fmt.Sprintf("%s:%d: empty key", file, n))
			return
		}
		if cur < 0 {
			out = append(out, INISection{File: file, Line: n, Keys: map[string]string{}})
			cur = len(out) - 1
		}
		v = unquote(strings.TrimSpace(v))
		if k == "include" {
			out[cur].Includes = append(out[cur].Includes, v)
			return
		}
		out[cur].Keys[k] = v
	})
	if err != nil {
		return nil, warnings, fmt.Errorf("%s: %w", file, err)
	}
	return out, warnings, nil
}

// stripComment removes a '#' or ';' comment that is not inside double quotes.
func stripComment(s string) string {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case '#', ';':
			if !inQuote {
				return s[:i]
			}
		}
	}
	return s
}

func splitSectionHeader(h string) (name, arg string) {
	h = strings.TrimSpace(h)
	name, arg, _ = strings.Cut(h, " ")
	return strings.ToLower(strings.TrimSpace(name)), unquote(strings.TrimSpace(arg))
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// NFSMountConf is /etc/nfsmount.conf as mount.nfs reads it (nfsmount.conf(5)): global
// defaults, per-server and per-mount-point sections.
type NFSMountConf struct {
	Global      *INISection
	Servers     map[string]*INISection
	MountPoints map[string]*INISection
}

// ParseNFSMountConf sorts the sections of an nfsmount.conf file. Unknown sections are
// reported as warnings; a repeated section merges into the first, later keys winning. A
// file that cannot be read whole is ParseINI's error.
func ParseNFSMountConf(r io.Reader, file string) (NFSMountConf, []string, error) {
	c := NFSMountConf{Servers: map[string]*INISection{}, MountPoints: map[string]*INISection{}}
	secs, warnings, err := ParseINI(r, file)
	if err != nil {
		return c, warnings, err
	}
	merge := func(dst **INISection, s INISection) {
		if *dst == nil {
			cp := s
			*dst = &cp
			return
		}
		for k, v := range s.Keys {
			(*dst).Keys[k] = v
		}
	}
	for _, s := range secs {
		switch s.Name {
		case "nfsmount_global_options":
			merge(&c.Global, s)
		case "server":
			d := c.Servers[s.Arg]
			merge(&d, s)
			c.Servers[s.Arg] = d
		case "mountpoint":
			key := cleanMountPoint(s.Arg)
			d := c.MountPoints[key]
			merge(&d, s)
			c.MountPoints[key] = d
		default:
			warnings = append(warnings, fmt.Sprintf("%s:%d: unknown section %q", s.File, s.Line, s.Name))
		}
	}
	return c, warnings, nil
}

// mountOptions turns nfsmount.conf keys into mount options the way mount.nfs does for the
// common cases: names lower-cased, "True" adds the flag, "False" adds its "no" form, other
// values become name=value. Defaultvers is mount.nfs's own setting and is kept as is.
func mountOptions(s *INISection) map[string]string {
	out := make(map[string]string, len(s.Keys))
	for k, v := range s.Keys {
		switch strings.ToLower(v) {
		case "true":
			out[k] = ""
		case "false":
			out["no"+k] = ""
		default:
			out[k] = v
		}
	}
	return out
}

// nfsConfInclude returns the include target of a key, and whether a missing file is
// silent (a leading '-').
func nfsConfInclude(v string) (target string, optional bool) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "-") {
		return strings.TrimSpace(v[1:]), true
	}
	return v, false
}

// nfsConfFile is a read function for ReadNFSConf; tests pass a map-backed fake.
type nfsConfFile func(path string) ([]byte, error)

// maxIncludeDepth stops include loops.
const maxIncludeDepth = 10

// readNFSConfFile parses one nfs.conf file and the files it includes, in order, into
// sections. An "include" key is followed where it appears, relative paths resolved
// against the including file's directory.
func readNFSConfFile(read nfsConfFile, file string, depth int) ([]INISection, []string) {
	b, err := read(file)
	if err != nil {
		return nil, []string{fmt.Sprintf("reading %s: %v", file, err)}
	}
	secs, warnings, err := ParseINI(bytes.NewReader(b), file)
	if err != nil {
		return nil, append(warnings, fmt.Sprintf("reading %v", err))
	}
	var out []INISection
	for _, s := range secs {
		out = append(out, s)
		for _, inc := range s.Includes {
			target, optional := nfsConfInclude(inc)
			if target == "" {
				continue
			}
			if !path.IsAbs(target) {
				target = path.Join(path.Dir(file), target)
			}
			if _, err := read(target); err != nil && optional {
				continue
			}
			if depth >= maxIncludeDepth {
				warnings = append(warnings, fmt.Sprintf("%s:%d: include %q nested too deep", s.File, s.Line, target))
				continue
			}
			sub, w := readNFSConfFile(read, target, depth+1)
			out = append(out, sub...)
			warnings = append(warnings, w...)
		}
	}
	return out, warnings
}

// requested is what /etc/fstab and nfsmount.conf (with its drop-ins) ask for.
type requested struct {
	fstab    map[string]FstabEntry // by mount point
	defaults MountDefaults
	warnings []string
}

func readRequested(root hostfs.Root) requested {
	r := requested{fstab: map[string]FstabEntry{}}
	if b, err := hostfs.ReadSmall(root.Etc("fstab")); err == nil {
		entries, w, err := ParseFstab(bytes.NewReader(b))
		r.warnings = append(r.warnings, w...)
		if err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("reading /etc/fstab: %v: no fstab entry is used", err))
		}
		for _, e := range entries {
			if _, dup := r.fstab[e.MountPoint]; !dup {
				r.fstab[e.MountPoint] = e
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		r.warnings = append(r.warnings, fmt.Sprintf("reading fstab: %v", err))
	}
	var w []string
	r.defaults, w = readMountDefaults(root)
	r.warnings = append(r.warnings, w...)
	return r
}

// forMount merges what the configuration asks for one mount, lowest precedence first, as
// mount.nfs applies it: nfsmount.conf global options, the [Server] section, the
// [MountPoint] section, then the fstab line. Nil when nothing applies.
func (r requested) forMount(server string, mountPoints []string) *Requested {
	opts := map[string]string{}
	var sources []string
	add := func(m map[string]string, src ...string) {
		for k, v := range m {
			opts[k] = v
		}
		sources = append(sources, src...)
	}
	secs := r.defaults.Matching(server, "")
	for _, mp := range mountPoints {
		if secs = r.defaults.Matching(server, mp); slices.ContainsFunc(secs, func(s MountSection) bool { return s.Kind == SectionMountPoint }) {
			break
		}
	}
	for _, s := range slices.Backward(secs) {
		add(sectionOptions(s), s.Headers...)
	}
	for _, mp := range mountPoints {
		if e, ok := r.fstab[mp]; ok {
			add(e.Options, fmt.Sprintf("/etc/fstab:%d", e.Line))
			break
		}
	}
	if len(sources) == 0 {
		return nil
	}
	return &Requested{Source: strings.Join(sources, ", "), Options: opts}
}

// sectionOptions turns a section's keys into mount options the way mountOptions does.
func sectionOptions(s MountSection) map[string]string {
	in := &INISection{Keys: map[string]string{}}
	for _, o := range s.Options {
		in.Keys[o.Key] = o.Value
	}
	return mountOptions(in)
}
