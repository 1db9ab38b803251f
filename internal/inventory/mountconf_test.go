package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// writeTree writes files below a temporary root.
func writeTree(t *testing.T, files map[string]string) hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.Root(dir)
}

func TestReadMountDefaults(t *testing.T) {
	root := writeTree(t, map[string]string{
		"etc/nfsmount.conf": "[ NFSMount_Global_Options ]\nSoft=True\n[ Server \"nas\" ]\nnconnect=2\ntimeo=100\n",
		// Version order: 9 before 10; "local" after the numbered files; ".conf" only.
		"etc/nfsmount.conf.d/10-later.conf": "[ Server \"NAS\" ]\nnconnect=8\n",
		"etc/nfsmount.conf.d/9-first.conf":  "[ Server \"nas\" ]\nnconnect=4\nrsize=1048576\n",
		"etc/nfsmount.conf.d/local.conf":    "[ MountPoint \"/data\" ]\nhard=True\n",
		"etc/nfsmount.conf.d/skip.conf.bak": "[ Server \"nas\" ]\nnconnect=16\n",
		"etc/nfsmount.conf.d/.hidden.conf":  "[ Server \"nas\" ]\nnconnect=16\n",
		"sbin/mount.nfs":                    "\x7fELF...NFSMount_Global_Options...conf_init_dir: scandir %s",
		"etc/hosts":                         "127.0.0.1 localhost\n10.0.0.5 NAS nas.example # the filer\n",
	})
	d, warnings := readMountDefaults(root)
	if len(warnings) > 0 {
		t.Fatalf("warnings: %q", warnings)
	}
	want := MountDefaults{
		Mounter: &Mounter{Path: "/sbin/mount.nfs", ReadsConfig: true, ReadsDropIns: true},
		Files:   []string{"/etc/nfsmount.conf", "/etc/nfsmount.conf.d/9-first.conf", "/etc/nfsmount.conf.d/10-later.conf", "/etc/nfsmount.conf.d/local.conf"},
		Sections: []MountSection{
			{Kind: SectionGlobal, Headers: []string{"/etc/nfsmount.conf:1"}, Options: []SectionOption{{Key: "soft", Value: "True", From: "/etc/nfsmount.conf:1"}}},
			{Kind: SectionServer, Arg: "nas", Addrs: []string{"10.0.0.5"}, Headers: []string{"/etc/nfsmount.conf:3", "/etc/nfsmount.conf.d/9-first.conf:1", "/etc/nfsmount.conf.d/10-later.conf:1"}, Options: []SectionOption{
				{Key: "nconnect", Value: "8", From: "/etc/nfsmount.conf.d/10-later.conf:1"},
				{Key: "timeo", Value: "100", From: "/etc/nfsmount.conf:3"},
				{Key: "rsize", Value: "1048576", From: "/etc/nfsmount.conf.d/9-first.conf:1"},
			}},
			{Kind: SectionMountPoint, Arg: "/data", Headers: []string{"/etc/nfsmount.conf.d/local.conf:1"}, Options: []SectionOption{{Key: "hard", Value: "True", From: "/etc/nfsmount.conf.d/local.conf:1"}}},
		},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestFindMounter(t *testing.T) {
	for _, tt := range []struct {
		name, binary string
		want         *Mounter
	}{
		{"nfs-utils 2.5.3 and later", "NFSMount_Global_Options conf_init_dir", &Mounter{Path: "/sbin/mount.nfs", ReadsConfig: true, ReadsDropIns: true}},
		{"before 2.5.3", "NFSMount_Global_Options", &Mounter{Path: "/sbin/mount.nfs", ReadsConfig: true}},
		{"built without mount configuration", "conf_init_dir", &Mounter{Path: "/sbin/mount.nfs"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A marker across the 64 KiB chunk boundary is found too.
			pad := make([]byte, 64<<10-10)
			root := writeTree(t, map[string]string{"sbin/mount.nfs": string(pad) + tt.binary})
			m, err := FindMounter(root)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, m); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if m, err := FindMounter(writeTree(t, nil)); m != nil || err != nil {
		t.Errorf("no mount.nfs: got %+v, %v", m, err)
	}
}

// TestFindMounterFIFO puts a FIFO where mount.nfs is: the scan must fail at once rather
// than wait for a writer that never comes, and must not take /usr/sbin/mount.nfs instead.
func TestFindMounterFIFO(t *testing.T) {
	root := writeTree(t, map[string]string{"usr/sbin/mount.nfs": "NFSMount_Global_Options conf_init_dir"})
	fifo := mkfifo(t, root.Path("sbin", "mount.nfs"))
	type result struct {
		m   *Mounter
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := FindMounter(root)
		done <- result{m, err}
	}()
	r := awaitOrRelease(t, done, fifo)
	if !errors.Is(r.err, hostfs.ErrNotRegular) || r.m != nil {
		t.Errorf("FindMounter = %+v, %v; want no mount.nfs and ErrNotRegular", r.m, r.err)
	}
	// readMountDefaults says so rather than reporting no mount.nfs.
	go func() {
		d, warnings := readMountDefaults(root)
		done <- result{d.Mounter, errors.New(strings.Join(warnings, "\n"))}
	}()
	r = awaitOrRelease(t, done, fifo)
	if r.m != nil || !strings.Contains(r.err.Error(), "/sbin/mount.nfs") {
		t.Errorf("readMountDefaults: mounter %+v, warnings %q; want a warning naming /sbin/mount.nfs", r.m, r.err)
	}
}

// mkfifo makes a FIFO at p (its directory created).
func mkfifo(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// awaitOrRelease waits for a read that must not block on fifo. If it does block, the test
// fails, and a writer opened and closed on the FIFO ends the blocked read (EOF), so that
// the test ends instead of hanging.
func awaitOrRelease[T any](t *testing.T, done <-chan T, fifo string) T {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
	}
	t.Errorf("the read of %s blocked on the FIFO", fifo)
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
	return <-done
}

func TestMerge(t *testing.T) {
	d := MountDefaults{Sections: []MountSection{
		{Kind: SectionGlobal, Options: []SectionOption{{Key: "nconnect", Value: "2", From: "g"}, {Key: "soft", Value: "True", From: "g"}, {Key: "vers", Value: "3", From: "g"}}},
		{Kind: SectionServer, Arg: "NAS.example", Options: []SectionOption{{Key: "nconnect", Value: "4", From: "s"}, {Key: "cto", Value: "False", From: "s"}, {Key: "timeo", Value: "100", From: "s"}}},
		{Kind: SectionMountPoint, Arg: "/data", Options: []SectionOption{{Key: "timeo", Value: "50", From: "m"}}},
	}}
	for _, tt := range []struct {
		name, server, mp string
		cmdline          []string
		want             []string
		from             map[string]string
	}{
		{
			name: "command line over mount point over server over global", server: "nas.example", mp: "/data",
			cmdline: []string{"nconnect=8", "vers=4.1"},
			want:    []string{"nconnect=8", "vers=4.1", "timeo=50", "nocto", "soft"},
			from:    map[string]string{"timeo=50": "m", "nocto": "s", "soft": "g"},
		},
		{
			name: "a global soft follows a command-line hard", server: "other", mp: "/x",
			cmdline: []string{"hard"},
			want:    []string{"hard", "nconnect=2", "soft", "vers=3"},
			from:    map[string]string{"nconnect=2": "g", "soft": "g", "vers=3": "g"},
		},
		{
			name: "a section for a name does not apply to its address", server: "10.0.0.5", mp: "/x",
			want: []string{"nconnect=2", "soft", "vers=3"},
			from: map[string]string{"nconnect=2": "g", "soft": "g", "vers=3": "g"},
		},
		{
			name: "a command-line cto keeps the section's cto=False out", server: "nas.example", mp: "/x",
			cmdline: []string{"cto", "nfsvers=4.2"},
			want:    []string{"cto", "nfsvers=4.2", "nconnect=4", "timeo=100", "soft"},
			from:    map[string]string{"nconnect=4": "s", "timeo=100": "s", "soft": "g"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, from := d.Merge(tt.server, tt.mp, tt.cmdline)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.from, from); diff != "" {
				t.Errorf("from (-want +got):\n%s", diff)
			}
		})
	}
	// A mount.nfs built without mount configuration adds nothing.
	off := d
	off.Mounter = &Mounter{Path: "/sbin/mount.nfs"}
	if got, _ := off.Merge("nas.example", "/data", []string{"hard"}); !slices.Equal(got, []string{"hard"}) {
		t.Errorf("without mount configuration: %q", got)
	}
}

func TestValidSectionArg(t *testing.T) {
	for _, tt := range []struct {
		kind, arg string
		ok        bool
	}{
		{SectionServer, "nas.example.com", true},
		{SectionServer, "10.0.0.5", true},
		{SectionServer, `nas"]`, false},
		{SectionServer, "nas]", false},
		{SectionServer, "[fd00::1]", false},
		{SectionServer, "fd00::1", false},
		{SectionServer, "nas\nfoo", false},
		{SectionServer, "", false},
		{SectionMountPoint, "/mnt/data", true},
		{SectionMountPoint, "/mnt/with space", true},
		{SectionMountPoint, "mnt", false},
		{SectionMountPoint, "/mnt/../etc", false},
		{SectionMountPoint, "/mnt/#x", false},
	} {
		if err := ValidSectionArg(tt.kind, tt.arg); (err == nil) != tt.ok {
			t.Errorf("ValidSectionArg(%s, %q) = %v, want ok %v", tt.kind, tt.arg, err, tt.ok)
		}
	}
}

func TestVersionCompare(t *testing.T) {
	names := []string{"local.conf", "50-nfstune.conf", "9-a.conf", "10-b.conf", "50-a.conf"}
	slices.SortFunc(names, CompareVersions)
	want := []string{"9-a.conf", "10-b.conf", "50-a.conf", "50-nfstune.conf", "local.conf"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReadClientIdentity(t *testing.T) {
	base := map[string]string{"proc/sys/kernel/hostname": "node-a\n"}
	for _, tt := range []struct {
		name         string
		files        map[string]string
		source, want string
	}{
		{"hostname alone", map[string]string{"sys/fs/nfs/net/nfs_client/identifier": "(null)\n", "sys/module/nfs/parameters/nfs4_unique_id": "\n"}, IdentityHostname, "/node-a"},
		{"identifier", map[string]string{"sys/fs/nfs/net/nfs_client/identifier": "5e2a\n", "sys/module/nfs/parameters/nfs4_unique_id": "u\n"}, IdentityIdentifier, "5e2a/node-a"},
		{"module parameter", map[string]string{"sys/module/nfs/parameters/nfs4_unique_id": "u\n"}, IdentityUniqueID, "u/node-a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range base {
				files[k] = v
			}
			for k, v := range tt.files {
				files[k] = v
			}
			c := readClientIdentity(writeTree(t, files), "")
			if c == nil || c.Source != tt.source || c.Effective() != tt.want || len(c.Fingerprint) != 8 {
				t.Errorf("got %+v (effective %q), want source %s, effective %q", c, c.Effective(), tt.source, tt.want)
			}
		})
	}
	if c := readClientIdentity(writeTree(t, nil), ""); c != nil {
		t.Errorf("no hostname: got %+v", c)
	}
}
