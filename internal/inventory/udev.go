package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// udevRuleDirs are the rules directories in udev's order of precedence, highest first:
// a file in an earlier directory hides a file with the same name in a later one
// (udev(7), "Rules Files"). /lib/udev/rules.d only matters on systems without merged /usr.
func udevRuleDirs() []string {
	return []string{
		"etc/udev/rules.d",
		"run/udev/rules.d",
		"usr/local/lib/udev/rules.d",
		"usr/lib/udev/rules.d",
		"lib/udev/rules.d",
	}
}

var (
	// ATTR{read_ahead_kb}="15360" or ="%c"; "==" is a match, not an assignment.
	reAttrAssign = regexp.MustCompile(`ATTR\{read_ahead_kb\}\s*(?:\+|:)?=\s*"([^"]*)"`)
	reProgram    = regexp.MustCompile(`(?:PROGRAM|RUN)\s*(?:\+|:)?=\s*"([^"]*)"`)
	// RUN+="/bin/sh -c 'echo 15360 > /sys/class/bdi/%k/read_ahead_kb'"
	reEchoValue = regexp.MustCompile(`echo\s+(\d+)\s*>\s*\S*read_ahead_kb`)
)

// readUdevRules returns the rule lines that set a bdi's read_ahead_kb, in the order udev
// runs them (file names sorted across all directories, then line order), and the rules
// files masked by a symlink to /dev/null.
func readUdevRules(root hostfs.Root) (rules []UdevRule, masked, warnings []string) {
	type pick struct{ file, hides string }
	chosen := map[string]*pick{}
	var names []string
	seenDir := map[string]bool{}
	for _, dir := range udevRuleDirs() {
		full := root.Path(dir)
		// On merged-/usr systems /lib is a symlink to usr/lib: the same files, not an override.
		if real := resolveUnderRoot(root, dir); seenDir[real] {
			continue
		} else {
			seenDir[real] = true
		}
		entries, err := hostfs.ReadDir(full)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".rules") {
				continue
			}
			p := "/" + path.Join(dir, name)
			if c, ok := chosen[name]; ok {
				if c.hides == "" {
					c.hides = p
				}
				continue
			}
			chosen[name] = &pick{file: p}
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var read []*pick
	for _, name := range names {
		c := chosen[name]
		if target, err := os.Readlink(root.Path(c.file)); err == nil && target == "/dev/null" {
			if c.hides != "" {
				masked = append(masked, c.hides)
			} else {
				masked = append(masked, c.file)
			}
			continue
		}
		read = append(read, c)
	}
	paths := make([]string, len(read))
	for i, c := range read {
		paths[i] = root.Path(c.file)
	}
	for i, b := range readFiles(paths) {
		rs, err := ParseUdevRules(bytes.NewReader(b))
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("reading %s: %v: none of its rules is used", read[i].file, err))
		}
		for _, r := range rs {
			r.File = read[i].file
			r.Hides = read[i].hides
			rules = append(rules, r)
		}
	}
	return rules, masked, warnings
}

// readFiles returns the contents of paths, nil for those that cannot be read, reading
// several at a time. From the page cache that changes little, but where the root is
// shared over 9p or the network (a VM's, some containers') every open and read is a round
// trip, and the fifty to a hundred rules files of a distribution took seconds one by one.
func readFiles(paths []string) [][]byte {
	const parallel = 8
	out := make([][]byte, len(paths))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range paths {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if b, err := hostfs.ReadSmall(p); err == nil {
				out[i] = b
			}
		}()
	}
	wg.Wait()
	return out
}

// resolveUnderRoot follows a relative symlink of dir's first element (lib -> usr/lib), so
// that two names for one directory are scanned once. Absolute link targets are taken as
// relative to the root, never the caller's filesystem.
func resolveUnderRoot(root hostfs.Root, dir string) string {
	first, rest, _ := strings.Cut(dir, "/")
	target, err := os.Readlink(root.Path(first))
	if err != nil {
		return dir
	}
	return path.Join(strings.TrimPrefix(path.Clean(target), "/"), rest)
}

// ParseUdevRules returns the rules of one udev rules file that set read_ahead_kb: an
// ATTR{read_ahead_kb} assignment, or a PROGRAM/RUN that names nfsrahead or writes
// read_ahead_kb itself. Lines continued with a trailing backslash are joined; Line is the
// first physical line of the rule. File and Hides are left for the caller. A line longer
// than 1 MiB is an error (ErrLineTooLong), and no rule is returned: the file was not read
// whole.
func ParseUdevRules(r io.Reader) ([]UdevRule, error) {
	var out []UdevRule
	var cont strings.Builder
	start := 0
	err := scanLines(r, func(n int, line string) {
		if cont.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			cont.WriteString(strings.TrimSuffix(line, `\`))
			return
		}
		cont.WriteString(line)
		text := strings.TrimSpace(cont.String())
		cont.Reset()
		if r, ok := parseUdevRule(text); ok {
			r.Line = start
			out = append(out, r)
		}
	})
	if err != nil {
		return nil, err
	}
	if cont.Len() > 0 {
		if r, ok := parseUdevRule(strings.TrimSpace(cont.String())); ok {
			r.Line = start
			out = append(out, r)
		}
	}
	return out, nil
}

func parseUdevRule(text string) (UdevRule, bool) {
	if text == "" || text[0] == '#' || !strings.Contains(text, "read_ahead_kb") && !strings.Contains(text, "nfsrahead") {
		return UdevRule{}, false
	}
	r := UdevRule{Text: text}
	touches := false
	if m := reAttrAssign.FindStringSubmatch(text); m != nil {
		touches = true
		if v, err := strconv.Atoi(strings.TrimSpace(m[1])); err == nil {
			r.ReadAheadKB = &v
		}
	}
	for _, m := range reProgram.FindAllStringSubmatch(text, -1) {
		cmd := m[1]
		if !strings.Contains(cmd, "nfsrahead") && !strings.Contains(cmd, "read_ahead_kb") && !strings.Contains(cmd, "nfstune") {
			// A PROGRAM that only filters (awk over nfsfs/volumes) is kept as the helper
			// only when the rule also assigns the attribute.
			if touches && r.Program == "" && r.ReadAheadKB == nil {
				r.Program = firstWord(cmd)
			}
			continue
		}
		if strings.Contains(cmd, "nfsrahead") || strings.Contains(cmd, "nfstune") || r.Program == "" {
			r.Program = firstWord(cmd)
		}
		if strings.Contains(cmd, "read_ahead_kb") {
			touches = true
			if v := reEchoValue.FindStringSubmatch(cmd); v != nil && r.ReadAheadKB == nil {
				if n, err := strconv.Atoi(v[1]); err == nil {
					r.ReadAheadKB = &n
				}
			}
		}
		if strings.Contains(cmd, "nfsrahead") {
			touches = touches || strings.Contains(text, "read_ahead_kb")
		}
	}
	return r, touches
}

func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// readReadAheadConfig gathers the udev rules touching bdi read_ahead_kb and the
// [nfsrahead] section of nfs.conf, read the way nfsrahead reads it: /usr/etc/nfs.conf,
// /usr/etc/nfs.conf.d/*.conf, /etc/nfs.conf, /etc/nfs.conf.d/*.conf, later files
// overriding earlier ones, includes followed.
func readReadAheadConfig(root hostfs.Root) (ReadAheadConfig, []string) {
	var c ReadAheadConfig
	var warnings []string
	c.UdevRules, c.Masked, warnings = readUdevRules(root)
	read := func(p string) ([]byte, error) { return hostfs.ReadSmall(root.Path(p)) }
	for _, dir := range []string{"/usr/etc", "/etc"} {
		files := []string{path.Join(dir, "nfs.conf")}
		if matches, err := filepath.Glob(root.Path(dir, "nfs.conf.d", "*.conf")); err == nil {
			sort.Strings(matches)
			for _, m := range matches {
				files = append(files, path.Join(dir, "nfs.conf.d", filepath.Base(m)))
			}
		}
		for _, f := range files {
			if _, err := read(f); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					warnings = append(warnings, fmt.Sprintf("reading %s: %v", f, err))
				}
				continue
			}
			secs, w := readNFSConfFile(read, f, 0)
			warnings = append(warnings, w...)
			for _, s := range secs {
				if s.Name != "nfsrahead" {
					continue
				}
				for k, v := range s.Keys {
					if c.NFSRahead == nil {
						c.NFSRahead = map[string]string{}
						c.NFSRaheadFrom = map[string]string{}
					}
					c.NFSRahead[k] = v
					c.NFSRaheadFrom[k] = fmt.Sprintf("%s:%d", s.File, s.Line)
				}
			}
		}
	}
	return c, warnings
}
