package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

const confirmMountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
52 22 0:53 / /mnt/data rw,relatime shared:45 - nfs4 192.168.122.71:/export/data rw,vers=4.2,addr=192.168.122.71
54 22 0:54 / /mnt/tools rw,relatime shared:46 - nfs 192.168.122.72:/export/tools rw,vers=3,addr=192.168.122.72
60 22 0:60 / /mnt/fuse rw,nosuid,nodev,relatime shared:50 - fuse.sshfs host:/ rw,user_id=0,group_id=0
`

const confirmVolumes = `NV SERVER   PORT DEV          FSID                              FSC
v4 c0a87a47  801 0:53         c10a1819257f4d4d:a0d6372e2f44b4e3 no
v4 c0a87a47  801 0:60         c10a1819257f4d4d:a0d6372e2f44b4e4 no
`

func confirmRoot(t *testing.T, files map[string]string) hostfs.Root {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hostfs.Root(dir)
}

func TestConfirmNFS(t *testing.T) {
	t.Parallel()
	root := confirmRoot(t, map[string]string{
		"proc/self/mountinfo":      confirmMountinfo,
		"proc/fs/nfsfs/volumes":    confirmVolumes,
		"proc/1/mountinfo":         confirmMountinfo,
		"proc/1/net/nfsfs/volumes": strings.Replace(confirmVolumes, "0:53", "0:54", 1),
	})
	for _, tt := range []struct {
		pid  int
		dev  string
		want string // "" for confirmed
	}{
		{0, "0:53", ""},
		{0, "0:54", "not listed in /proc/fs/nfsfs/volumes"},
		{0, "0:60", `mountinfo says "fuse.sshfs"`}, // listed, but mountinfo says FUSE: a reused number
		{0, "8:1", "not an anonymous"},
		{0, "0:99", "no mountinfo line"},
		{0, "0:53/../../x", "not an anonymous"},
		{1, "0:54", ""}, // pid 1's namespace lists 0:54
		{1, "0:53", "not listed"},
	} {
		m, err := ConfirmNFS(root, tt.pid, tt.dev)
		if tt.want == "" {
			if err != nil || m == nil || m.Device != tt.dev {
				t.Errorf("pid %d %s: %+v, %v; want confirmed", tt.pid, tt.dev, m, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotNFS) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("pid %d %s: err = %v, want ErrNotNFS with %q", tt.pid, tt.dev, err, tt.want)
		}
	}
	// Unreadable files are an error, not a verdict.
	empty := hostfs.Root(t.TempDir())
	if _, err := ConfirmNFS(empty, 0, "0:53"); err == nil || errors.Is(err, ErrNotNFS) {
		t.Errorf("no mountinfo: err = %v, want a read error", err)
	}
}

// TestVolumeListingRereads: a device missing from the listing is checked against a fresh
// read, once per VolumeListing; a listing that cannot be read is an error, not a verdict.
func TestVolumeListingRereads(t *testing.T) {
	t.Parallel()
	root := confirmRoot(t, nil)
	p := root.Proc("fs", "nfsfs", "volumes")
	list := func(devs ...string) {
		t.Helper()
		var b strings.Builder
		b.WriteString("NV SERVER   PORT DEV          FSID                              FSC\n")
		for _, d := range devs {
			b.WriteString("v4 c0a87a47  801 " + d + "         c10a1819257f4d4d:a0d6372e2f44b4e3 no\n")
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nfs := func(dev string) *Mount { return &Mount{Device: dev, FSType: "nfs4"} }

	v := NewVolumeListing(root, 0)
	list("0:52")
	if err := v.Check(nfs("0:52")); err != nil {
		t.Fatalf("0:52, listed: %v", err)
	}
	list("0:52", "0:53") // the first read missed 0:53
	if err := v.Check(nfs("0:53")); err != nil {
		t.Errorf("0:53, listed by the second read: %v", err)
	}
	list("0:52", "0:53", "0:54")
	if err := v.Check(nfs("0:54")); !errors.Is(err, ErrNotListed) || !errors.Is(err, ErrNotNFS) {
		t.Errorf("0:54 after the one re-read: err = %v, want ErrNotListed and ErrNotNFS", err)
	} else if !strings.Contains(err.Error(), "2 volumes in its last read") {
		t.Errorf("0:54: err = %v, want the count of the listing read again", err)
	}
	if err := v.Check(&Mount{Device: "0:52", FSType: "tmpfs"}); !errors.Is(err, ErrNotNFS) || errors.Is(err, ErrNotListed) {
		t.Errorf("tmpfs on a listed device: err = %v, want ErrNotNFS for its type", err)
	}

	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := NewVolumeListing(root, 0).Check(nfs("0:52")); err == nil || errors.Is(err, ErrNotNFS) {
		t.Errorf("no listing: err = %v, want a read error", err)
	}
}
