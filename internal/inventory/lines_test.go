package inventory

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// longLine is a comment line one byte over maxLine, which bufio.Scanner stops at.
var longLine = "#" + strings.Repeat("x", maxLine) + "\n"

// TestParsersStopAtLongLine gives every line parser a file whose second line is over 1
// MiB, between two lines it would use: each must return ErrLineTooLong and nothing, not
// the first line as if it were the whole file.
func TestParsersStopAtLongLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, before, after string
		parse               func(string) (int, error)
	}{
		{"fstab", "nas:/a /a nfs defaults 0 0\n", "nas:/b /b nfs defaults 0 0\n", func(s string) (int, error) {
			e, _, err := ParseFstab(strings.NewReader(s))
			return len(e), err
		}},
		{"ini", "[ Server \"nas\" ]\nnconnect=4\n", "rsize=8k\n", func(s string) (int, error) {
			secs, _, err := ParseINI(strings.NewReader(s), "/etc/nfsmount.conf")
			if err != nil && !strings.Contains(err.Error(), "/etc/nfsmount.conf") {
				return 0, fmt.Errorf("error does not name the file: %w", err)
			}
			return len(secs), err
		}},
		{"udev", `SUBSYSTEM=="bdi", ATTR{read_ahead_kb}="128"` + "\n", `SUBSYSTEM=="bdi", ATTR{read_ahead_kb}="256"` + "\n", func(s string) (int, error) {
			r, err := ParseUdevRules(strings.NewReader(s))
			return len(r), err
		}},
		{"nfsfs servers", "NV SERVER   PORT USE HOSTNAME\nv4 0a000005  801    1 nas\n", "v4 0a000006  801    1 nas2\n", func(s string) (int, error) {
			sv, _, err := ParseNFSServers(strings.NewReader(s))
			return len(sv), err
		}},
		{"nfsfs volumes", "NV SERVER   PORT DEV          FSID                              FSC\nv4 0a000005  801 0:53         1:0                               no\n", "v4 0a000006  801 0:54         1:0                               no\n", func(s string) (int, error) {
			v, _, err := ParseNFSVolumes(strings.NewReader(s))
			return len(v), err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if n, err := tt.parse(tt.before + tt.after); err != nil || n == 0 {
				t.Fatalf("without the long line: %d parsed, %v", n, err)
			}
			n, err := tt.parse(tt.before + longLine + tt.after)
			if !errors.Is(err, ErrLineTooLong) || n != 0 {
				t.Errorf("with a line over 1 MiB: %d parsed, %v; want none and ErrLineTooLong", n, err)
			}
		})
	}
}

// TestLongLineWarnings checks that the readers say which file they could not read whole.
func TestLongLineWarnings(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"etc/fstab":                     "nas:/a /a nfs defaults 0 0\n" + longLine,
		"etc/udev/rules.d/99-nfs.rules": `SUBSYSTEM=="bdi", ATTR{read_ahead_kb}="128"` + "\n" + longLine,
		"etc/nfsmount.conf":             "[ Server \"nas\" ]\nnconnect=4\n" + longLine,
		"proc/fs/nfsfs/volumes":         "NV SERVER   PORT DEV          FSID                              FSC\nv4 0a000005  801 0:53         1:0                               no\n" + longLine,
	})
	r := readRequested(root)
	if len(r.fstab) != 0 {
		t.Errorf("fstab entries %v, want none from a file not read whole", r.fstab)
	}
	if len(r.defaults.Sections) != 0 {
		t.Errorf("nfsmount.conf sections %v, want none from a file not read whole", r.defaults.Sections)
	}
	wantWarning(t, r.warnings, "/etc/fstab")
	wantWarning(t, r.warnings, "/etc/nfsmount.conf")

	rules, _, warnings := readUdevRules(root)
	if len(rules) != 0 {
		t.Errorf("udev rules %v, want none from a file not read whole", rules)
	}
	wantWarning(t, warnings, "/etc/udev/rules.d/99-nfs.rules")

	if devs, err := ReadVolumeDevices(root, 0); !errors.Is(err, ErrLineTooLong) || len(devs) != 0 {
		t.Errorf("ReadVolumeDevices = %v, %v; want no device and ErrLineTooLong", devs, err)
	}
}

func wantWarning(t *testing.T, warnings []string, file string) {
	t.Helper()
	for _, w := range warnings {
		if strings.Contains(w, file) && strings.Contains(w, ErrLineTooLong.Error()) {
			return
		}
	}
	t.Errorf("warnings %q: want one naming %s and its long line", warnings, file)
}
