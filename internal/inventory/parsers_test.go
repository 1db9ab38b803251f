package inventory

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var nfsServersTests = []struct {
	name     string
	in       string
	want     []NFSServer
	warnings int
}{
	{
		name: "ipv4 and ipv6 rows",
		in: "NV SERVER   PORT USE HOSTNAME\n" +
			"v4 c0a87a47  801  2 nfs.example.com\n" +
			"v3 fd000000000000000000000000000005  801  1 fd00::5\n",
		want: []NFSServer{
			{Version: "v4", Addr: "192.168.122.71", Port: 2049, Use: 2, Hostname: "nfs.example.com"},
			{Version: "v3", Addr: "fd00::5", Port: 2049, Use: 1, Hostname: "fd00::5"},
		},
	},
	{name: "header only", in: "NV SERVER   PORT USE HOSTNAME\n"},
	{name: "empty", in: ""},
	{
		name:     "short and malformed rows",
		in:       "v4 c0a87a47\nv4 c0a87a47 zz 1 h\nx4 c0a87a47 801 1 h\n",
		warnings: 3,
	},
	{
		name: "odd address kept as hex",
		in:   "v4 abc 801 1\n",
		want: []NFSServer{{Version: "v4", Addr: "abc", Port: 2049, Use: 1}},
	},
}

func TestParseNFSServers(t *testing.T) {
	t.Parallel()
	for _, tt := range nfsServersTests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := ParseNFSServers(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.warnings)
			}
		})
	}
}

func FuzzParseNFSServers(f *testing.F) {
	for _, tt := range nfsServersTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _, _ = ParseNFSServers(strings.NewReader(s)) })
}

var nfsVolumesTests = []struct {
	name     string
	in       string
	want     []NFSVolume
	warnings int
}{
	{
		name: "current header",
		in: "NV SERVER   PORT DEV          FSID                              FSC\n" +
			"v4 c0a87a47  801 0:51         c10a1819257f4d4d:a0d6372e2f44b4e3 no \n",
		want: []NFSVolume{{Version: "v4", Addr: "192.168.122.71", Port: 2049, Device: "0:51", FSID: "c10a1819257f4d4d:a0d6372e2f44b4e3"}},
	},
	{
		name: "older narrow header, fscache on",
		in: "NV SERVER   PORT DEV     FSID              FSC\n" +
			"v3 0a000006  801 0:60    4a1f0c3d2e5b6a79:0 yes\n",
		want: []NFSVolume{{Version: "v3", Addr: "10.0.0.6", Port: 2049, Device: "0:60", FSID: "4a1f0c3d2e5b6a79:0", FSC: true}},
	},
	{
		name: "no fsc column",
		in:   "v4 0a000006 801 0:61 0:0\n",
		want: []NFSVolume{{Version: "v4", Addr: "10.0.0.6", Port: 2049, Device: "0:61", FSID: "0:0"}},
	},
	{name: "bad device", in: "v4 0a000006 801 sda 0:0 no\n", warnings: 1},
	{name: "too short", in: "v4 0a000006 801\n", warnings: 1},
}

func TestParseNFSVolumes(t *testing.T) {
	t.Parallel()
	for _, tt := range nfsVolumesTests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := ParseNFSVolumes(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.warnings)
			}
		})
	}
}

func FuzzParseNFSVolumes(f *testing.F) {
	for _, tt := range nfsVolumesTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _, _ = ParseNFSVolumes(strings.NewReader(s)) })
}

var fstabTests = []struct {
	name     string
	in       string
	want     []FstabEntry
	warnings int
}{
	{
		name: "escaped mount point and options",
		in: "# comment\n" +
			"/dev/vda1 / ext4 errors=remount-ro 0 1\n" +
			"srv:/export /mnt/with\\040space/ nfs4 defaults,nconnect=8,_netdev 0 0\n",
		want: []FstabEntry{{
			Line: 3, Spec: "srv:/export", MountPoint: "/mnt/with space", FSType: "nfs4",
			Options: map[string]string{"nconnect": "8", "_netdev": ""},
		}},
	},
	{
		name: "no options field",
		in:   "[fd00::5]:/export /mnt/v6 nfs\n",
		want: []FstabEntry{{Line: 1, Spec: "[fd00::5]:/export", MountPoint: "/mnt/v6", FSType: "nfs", Options: map[string]string{}}},
	},
	{name: "too few fields", in: "srv:/export /mnt\n", warnings: 1},
	{name: "other filesystems ignored", in: "//srv/share /mnt/smb cifs guest 0 0\n"},
}

func TestParseFstab(t *testing.T) {
	t.Parallel()
	for _, tt := range fstabTests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := ParseFstab(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.warnings)
			}
		})
	}
}

func FuzzParseFstab(f *testing.F) {
	for _, tt := range fstabTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _, _ = ParseFstab(strings.NewReader(s)) })
}

var iniTests = []struct {
	name     string
	in       string
	want     []INISection
	warnings int
}{
	{
		name: "nfsrahead with trailing comments and quotes",
		in:   "# head\n[NFSrahead]\nnfs=15000      # NFSv3\nNFS4 = \"16000\" ; v4\n",
		want: []INISection{{Name: "nfsrahead", File: "f", Line: 2, Keys: map[string]string{"nfs": "15000", "nfs4": "16000"}}},
	},
	{
		name: "nfsmount.conf sections with arguments",
		in:   "[ NFSMount_Global_Options ]\nHard=True\n[ Server \"10.0.0.6\" ]\nRsize=65536\n[ MountPoint \"/data\" ]\nNfsvers=4.1\n",
		want: []INISection{
			{Name: "nfsmount_global_options", File: "f", Line: 1, Keys: map[string]string{"hard": "True"}},
			{Name: "server", Arg: "10.0.0.6", File: "f", Line: 3, Keys: map[string]string{"rsize": "65536"}},
			{Name: "mountpoint", Arg: "/data", File: "f", Line: 5, Keys: map[string]string{"nfsvers": "4.1"}},
		},
	},
	{
		name: "variables kept, key before any section",
		in:   "top=1\n[general]\npipefs-directory=$dir\n",
		want: []INISection{
			{File: "f", Line: 1, Keys: map[string]string{"top": "1"}},
			{Name: "general", File: "f", Line: 2, Keys: map[string]string{"pipefs-directory": "$dir"}},
		},
	},
	{name: "garbage lines", in: "[unterminated\nno equals sign\n= novalue\n", warnings: 3},
}

func TestParseINI(t *testing.T) {
	t.Parallel()
	for _, tt := range iniTests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings, err := ParseINI(strings.NewReader(tt.in), "f")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.warnings)
			}
		})
	}
}

func FuzzParseINI(f *testing.F) {
	for _, tt := range iniTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _ = ParseINI(strings.NewReader(s), "f")
		_, _, _ = ParseNFSMountConf(strings.NewReader(s), "f")
	})
}

func TestParseNFSMountConf(t *testing.T) {
	t.Parallel()
	in := "[ NFSMount_Global_Options ]\nHard=True\nCto=False\n[ Server \"a\" ]\nRsize=8k\n[ Server \"a\" ]\nWsize=8k\n[ MountPoint \"/data/\" ]\nNfsvers=3\n[ Bogus ]\nx=1\n"
	c, warnings, err := ParseNFSMountConf(strings.NewReader(in), "/etc/nfsmount.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `unknown section "bogus"`) {
		t.Errorf("warnings = %q", warnings)
	}
	if diff := cmp.Diff(map[string]string{"hard": "", "nocto": ""}, mountOptions(c.Global)); diff != "" {
		t.Errorf("global (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"rsize": "8k", "wsize": "8k"}, mountOptions(c.Servers["a"])); diff != "" {
		t.Errorf("server a (-want +got):\n%s", diff)
	}
	if c.MountPoints["/data"] == nil {
		t.Errorf("mount point section not keyed by the cleaned path: %v", c.MountPoints)
	}
}

func TestReadNFSConfIncludes(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"/etc/nfs.conf":       "[nfsrahead]\nnfs4=1\ninclude = sub/local.conf\ninclude = -/etc/missing.conf\n",
		"/etc/sub/local.conf": "[nfsrahead]\nnfs4=2\ninclude=/etc/nfs.conf\n",
	}
	read := func(p string) ([]byte, error) {
		s, ok := files[p]
		if !ok {
			return nil, &notFound{p}
		}
		return []byte(s), nil
	}
	secs, warnings := readNFSConfFile(read, "/etc/nfs.conf", 0)
	// The include loop is cut at maxIncludeDepth with one warning; the optional missing
	// include is silent.
	if len(warnings) != 1 || !strings.Contains(warnings[0], "nested too deep") {
		t.Errorf("warnings = %q", warnings)
	}
	if len(secs) < 2 || secs[0].File != "/etc/nfs.conf" || secs[1].File != "/etc/sub/local.conf" || secs[1].Keys["nfs4"] != "2" {
		t.Errorf("sections out of order: %+v", secs[:min(2, len(secs))])
	}
}

type notFound struct{ p string }

func (e *notFound) Error() string { return "no such file: " + e.p }

var udevTests = []struct {
	name string
	in   string
	want []UdevRule
}{
	{
		name: "nfs-utils 99-nfs.rules",
		in:   `SUBSYSTEM=="bdi", ACTION=="add", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"` + "\n",
		want: []UdevRule{{Line: 1, Text: `SUBSYSTEM=="bdi", ACTION=="add", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"`, Program: "/usr/libexec/nfsrahead"}},
	},
	{
		name: "fixed value over a continued line",
		in:   "# c\nSUBSYSTEM==\"bdi\", ACTION==\"add\", \\\n  ATTR{read_ahead_kb}=\"15360\"\n",
		want: []UdevRule{{Line: 2, Text: `SUBSYSTEM=="bdi", ACTION=="add",   ATTR{read_ahead_kb}="15360"`, ReadAheadKB: intp(15360)}},
	},
	{
		name: "RUN writing sysfs",
		in:   `SUBSYSTEM=="bdi", ACTION=="add", RUN+="/bin/sh -c 'echo 4096 > /sys/class/bdi/%k/read_ahead_kb'"` + "\n",
		want: []UdevRule{{Line: 1, Text: `SUBSYSTEM=="bdi", ACTION=="add", RUN+="/bin/sh -c 'echo 4096 > /sys/class/bdi/%k/read_ahead_kb'"`, ReadAheadKB: intp(4096), Program: "/bin/sh"}},
	},
	{name: "a match is not an assignment", in: `SUBSYSTEM=="bdi", ATTR{read_ahead_kb}=="128", GOTO="end"` + "\n"},
	{name: "block queue attribute is not a bdi", in: `SUBSYSTEM=="block", ATTR{queue/read_ahead_kb}="4096"` + "\n"},
	{name: "RUN that does not touch read-ahead", in: `SUBSYSTEM=="bdi", RUN+="/usr/bin/nfstune-notify %k"` + "\n"},
	{name: "commented out", in: `# SUBSYSTEM=="bdi", ATTR{read_ahead_kb}="4096"` + "\n"},
	{name: "dangling continuation", in: "SUBSYSTEM==\"bdi\", \\"},
}

func TestParseUdevRules(t *testing.T) {
	t.Parallel()
	for _, tt := range udevTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUdevRules(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseUdevRules(f *testing.F) {
	for _, tt := range udevTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _ = ParseUdevRules(strings.NewReader(s)) })
}

var backendTests = []struct{ server, want string }{
	{"nfsacct01.file.core.windows.net", "azure-files"},
	{"NFSACCT01.File.Core.Windows.Net.", "azure-files"},
	{"nfsacct01.privatelink.file.core.windows.net", "azure-files"},
	{"acct.file.core.chinacloudapi.cn", "azure-files"},
	{"blobacct.blob.core.windows.net", "azure-blob-nfs"},
	{"blobacct.privatelink.blob.core.windows.net", "azure-blob-nfs"},
	{"fs-0123abcd.efs.us-east-1.amazonaws.com", "aws-efs"},
	{"us-east-1a.fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", "aws-efs"},
	{"fs-0123abcd.efs.cn-north-1.amazonaws.com.cn", "aws-efs"},
	{"fs-xyz.efs.us-east-1.amazonaws.com", "generic"},
	{"file.core.windows.net", "generic"},
	{"10.1.0.4", "generic"},
	{"[fd00::5]", "generic"},
	{"nas01.corp.example", "generic"},
	{"", "generic"},
}

func TestDetectBackend(t *testing.T) {
	t.Parallel()
	for _, tt := range backendTests {
		if got := DetectBackend(tt.server); got != tt.want {
			t.Errorf("DetectBackend(%q) = %q, want %q", tt.server, got, tt.want)
		}
	}
}

func FuzzDetectBackend(f *testing.F) {
	for _, tt := range backendTests {
		f.Add(tt.server)
	}
	f.Fuzz(func(t *testing.T, s string) { DetectBackend(s) })
}

func TestSplitSource(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, server, export string }{
		{"srv:/export", "srv", "/export"},
		{"[fd00::5]:/export/a", "fd00::5", "/export/a"},
		{"srv:/a:b", "srv", "/a:b"},
		{"noexport", "noexport", ""},
	} {
		s, e := splitSource(tt.in)
		if s != tt.server || e != tt.export {
			t.Errorf("splitSource(%q) = %q, %q; want %q, %q", tt.in, s, e, tt.server, tt.export)
		}
	}
}

func TestNFSVersion(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fstype, opts, want string
	}{
		{"nfs", "vers=3", "3"},
		{"nfs4", "vers=4.2", "4.2"},
		{"nfs4", "vers=4,minorversion=1", "4.1"},
		{"nfs4", "vers=4", "4.0"},
		{"nfs4", "", "4.0"},
		{"nfs", "nfsvers=3", "3"},
	} {
		if got := nfsVersion(tt.fstype, parseOptions(tt.opts)); got != tt.want {
			t.Errorf("nfsVersion(%q, %q) = %q, want %q", tt.fstype, tt.opts, got, tt.want)
		}
	}
}

func TestUnescapeOctal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/mnt/with\040space`: "/mnt/with space",
		`/a\011b\012c\134d`:  "/a\tb\nc\\d",
		`/trailing\04`:       `/trailing\04`,
		`/not\999octal`:      `/not\999octal`,
		`/plain`:             "/plain",
	} {
		if got := UnescapeOctal(in); got != want {
			t.Errorf("UnescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseKernelRelease(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) (gcc-12) #1 SMP": "6.1.0-28-amd64",
		"Linux version": "",
		"FreeBSD 14.0":  "",
		"":              "",
	} {
		if got := parseKernelRelease(in); got != want {
			t.Errorf("parseKernelRelease(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseMountInfoDropsOnlyBadLines(t *testing.T) {
	t.Parallel()
	in := "101 21 0:53 / /mnt/a rw,relatime shared:60 - nfs4 srv:/a rw,vers=4.2,addr=10.0.0.5\n" +
		"bad line\n" +
		"102 21 0:54 / /mnt/b rw - nfs srv:/b rw,vers=3\n" +
		"103 21 252:1 / / rw - ext4 /dev/vda1 rw\n"
	infos, warnings := parseMountInfo([]byte(in), nfsOnly)
	if len(infos) != 2 || infos[0].Mountpoint != "/mnt/a" || infos[1].Mountpoint != "/mnt/b" {
		t.Errorf("infos = %+v", infos)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "mountinfo line 2 dropped") {
		t.Errorf("warnings = %q", warnings)
	}
}

// A device field that is not major:minor (moby/sys/mountinfo reads "0:53/../.." as 0:0)
// must not merge unrelated mounts into one superblock: the line is dropped with a warning.
func TestParseMountInfoDropsMalformedDevice(t *testing.T) {
	t.Parallel()
	in := "101 21 0:53/../.. / /mnt/a rw - nfs4 srv:/a rw,vers=4.2,addr=10.0.0.5\n" +
		"102 21 x:0 / /mnt/b rw - nfs4 other:/b rw,vers=4.2,addr=10.0.0.6\n" +
		"103 21 0:54 / /mnt/c rw - nfs4 srv:/c rw,vers=4.2,addr=10.0.0.5\n" +
		"104 21 0:55 / /mnt/d rw - nfs4 srv:/d rw,vers=4.2,addr=10.0.0.5\n"
	mounts, warnings := ParseMountInfo([]byte(in))
	var got []string
	for _, m := range mounts {
		got = append(got, m.Device+" "+strings.Join(m.MountPoints, ","))
	}
	if want := []string{"0:54 /mnt/c", "0:55 /mnt/d"}; !slices.Equal(got, want) {
		t.Errorf("mounts = %q, want %q", got, want)
	}
	if len(warnings) != 2 || !strings.HasPrefix(warnings[0], "mountinfo line 1 dropped: bad device") ||
		!strings.HasPrefix(warnings[1], "mountinfo line 2 dropped: bad device") {
		t.Errorf("warnings = %q", warnings)
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add("101 21 0:53 / /mnt/a rw,relatime shared:60 - nfs4 srv:/a rw,vers=4.2,addr=10.0.0.5\n")
	f.Add("bad\n102 21 0:54 / /mnt/with\\040space rw - nfs [fd00::5]:/b rw,vers=3\n")
	f.Add("612 22 0:52 / /mnt/data rw - nfs4 10.0.0.5:/export rw,vers=4.1,addr=10.0.0.5\n" +
		"613 22 0:52 /sub /srv/with\\040space rw - nfs4 10.0.0.5:/export/sub rw,vers=4.1,addr=10.0.0.5\n")
	f.Add("612 22 bad / /mnt/y rw - nfs4 10.0.0.5:/y rw\n612 22 0:53 / /mnt/z rw -\n")
	f.Fuzz(func(t *testing.T, s string) { ParseMountInfo([]byte(s)) })
}

// FuzzSmallParsers covers the one-line helpers: source split, version, octal unescape,
// kernel release and option splitting.
func FuzzSmallParsers(f *testing.F) {
	for _, s := range []string{"srv:/export", "[fd00::5]:/e", `/mnt/with\040space`, "vers=4,minorversion=1",
		"Linux version 6.1.0-28-amd64 (x)", `\777\0`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		server, export := splitSource(s)
		if len(server)+len(export) > len(s) {
			t.Errorf("splitSource(%q) grew: %q %q", s, server, export)
		}
		nfsVersion("nfs4", parseOptions(s))
		if u := UnescapeOctal(s); len(u) > len(s) {
			t.Errorf("UnescapeOctal(%q) grew to %q", s, u)
		}
		parseKernelRelease(s)
	})
}

// TestLonghornBackend: a Longhorn RWX volume is recognised by its CSI driver's staging path
// or by its share-manager Service's name; the same export elsewhere is generic.
func TestLonghornBackend(t *testing.T) {
	const info = `22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
30 22 0:60 / /var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/0f1e2d3c/globalmount rw,relatime - nfs4 10.43.12.7:/pvc-3f1c2a9e rw,vers=4.1,softerr,timeo=600,retrans=5,addr=10.43.12.7
31 22 0:60 / /var/lib/kubelet/pods/5d7e4a12-0c3b-4e8f-9d21-6a7b8c9d0e1f/volumes/kubernetes.io~csi/pvc-3f1c2a9e/mount rw,relatime - nfs4 10.43.12.7:/pvc-3f1c2a9e rw,vers=4.1,softerr,timeo=600,retrans=5,addr=10.43.12.7
32 22 0:61 / /mnt/rwx rw,relatime - nfs4 pvc-9a.longhorn-system.svc.cluster.local:/pvc-9a rw,vers=4.1,softerr,addr=10.43.0.9
33 22 0:62 / /mnt/other rw,relatime - nfs4 10.43.12.7:/pvc-3f1c2a9e rw,vers=4.1,addr=10.43.12.7
`
	infos, _ := parseMountInfo([]byte(info), nfsOnly)
	got := map[string]string{}
	for _, m := range mountsFromInfo(infos) {
		got[m.Device] = m.Backend
	}
	want := map[string]string{"0:60": "longhorn", "0:61": "longhorn", "0:62": "generic"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backends (-want +got):\n%s", diff)
	}
}
