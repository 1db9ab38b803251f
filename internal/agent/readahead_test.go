package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestSetReadAheadNoSymlinks: the agent writes through the same guarded writer as apply,
// so a read_ahead_kb that is a link, or a bdi that links out of /sys, is refused and the
// file it points to keeps its value.
func TestSetReadAheadNoSymlinks(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("128\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := hostfs.Root(t.TempDir())
	if err := os.MkdirAll(root.Sys("class", "bdi", "0:52"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, root.Sys("class", "bdi", "0:52", "read_ahead_kb")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), root.Sys("class", "bdi", "0:53")); err != nil {
		t.Fatal(err)
	}
	vols := map[string]bool{"0:52": true, "0:53": true}
	for _, dev := range []string{"0:52", "0:53"} {
		err := setReadAhead(root, &inventory.Mount{Device: dev, FSType: "nfs4"}, listing(t, vols), 4096)
		if err == nil {
			t.Errorf("%s: wrote through a link", dev)
		}
		if dev == "0:52" && !errors.Is(err, hostfs.ErrSymlink) {
			t.Errorf("%s: err = %v, want ErrSymlink", dev, err)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "128\n" {
		t.Errorf("file behind the link = %q, want 128", b)
	}
}

// listing is a volume listing of a fixture root whose nfsfs volumes list devs.
func listing(t *testing.T, devs map[string]bool) *inventory.VolumeListing {
	t.Helper()
	root := hostfs.Root(t.TempDir())
	if err := os.MkdirAll(root.Proc("fs", "nfsfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("NV SERVER   PORT DEV          FSID                              FSC\n")
	for d := range devs {
		b.WriteString("v4 0a000002  801 " + d + "         c10a1819257f4d4d:a0d6372e2f44b4e3 no \n")
	}
	if err := os.WriteFile(root.Proc("fs", "nfsfs", "volumes"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return inventory.NewVolumeListing(root, 0)
}
