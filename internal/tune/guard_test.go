package tune

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

func statOwner(t *testing.T, root hostfs.Root, p string) string {
	t.Helper()
	fi, err := os.Lstat(root.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%s %d:%d", fi.Mode(), st.Uid, st.Gid)
}

// TestApplyRevertKeepOwnerAndMode: an fstab owned 1000:1000 with mode 0640 keeps both
// through apply and revert, and its backup gets them too.
// Without root the owner cannot be changed, and only the mode is checked.
func TestApplyRevertKeepOwnerAndMode(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1000, 1000
		if err := os.Chown(root.Path(FstabPath), uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root.Path(FstabPath), 0o640); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("-rw-r----- %d:%d", uid, gid)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if readFixture(t, root, FstabPath) == fixtureFstab {
		t.Fatal("fstab not edited")
	}
	for _, p := range []string{FstabPath, FstabBackup} {
		if got := statOwner(t, root, p); got != want {
			t.Errorf("after apply %s is %s, want %s", p, got, want)
		}
	}
	if _, err := Revert(root); err != nil {
		t.Fatal(err)
	}
	if got := statOwner(t, root, FstabPath); got != want {
		t.Errorf("after revert %s is %s, want %s", FstabPath, got, want)
	}
	if readFixture(t, root, FstabPath) != fixtureFstab {
		t.Error("fstab not restored")
	}
}

// TestPlanRefusesSymlinks: a configuration file nfstune would write through a symbolic
// link is refused when planning, before anything changes. The sysctl drop-in, optional
// since the live values are set anyway, is skipped with a note.
func TestPlanRefusesSymlinks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		link string // relative to the root, made a link to a directory or file elsewhere
		dir  bool
		opts Options
	}{
		{"rules.d", "etc/udev/rules.d", true, defaultOptions()},
		{"sysctl.d", "etc/sysctl.d", true, Options{Persist: PersistNone}},
		{"fstab", "etc/fstab", false, fullOptions()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root, elsewhere := fixtureRoot(t), t.TempDir()
			target := elsewhere
			if !tt.dir {
				target = filepath.Join(elsewhere, "fstab")
				if err := os.WriteFile(target, []byte(fixtureFstab), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Remove(root.Path(tt.link))
			}
			if err := os.MkdirAll(filepath.Dir(root.Path(tt.link)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, root.Path(tt.link)); err != nil {
				t.Fatal(err)
			}
			p, err := NewPlan(root, fixtureInventory(), fixtureWant(), tt.opts)
			if tt.name == "sysctl.d" {
				if err != nil || !containsNote(p, "symbolic link") {
					t.Fatalf("err = %v, notes %q; want a note on the link", err, p.Notes)
				}
				for _, a := range p.Actions {
					if a.Kind == KindSysctlFile {
						t.Errorf("planned %s through a link", a.Path)
					}
				}
				return
			}
			if !errors.Is(err, hostfs.ErrSymlink) {
				t.Fatalf("err = %v, want ErrSymlink", err)
			}
		})
	}
	// Reading a linked fstab to suggest fstab lines is fine; only writing it is refused.
	root := fixtureRoot(t)
	target := filepath.Join(t.TempDir(), "fstab")
	if err := os.WriteFile(target, []byte(fixtureFstab), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(root.Path(FstabPath))
	if err := os.Symlink(target, root.Path(FstabPath)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(root, fixtureInventory(), fixtureWant(), defaultOptions()); err != nil {
		t.Errorf("plan without --fstab: %v", err)
	}
}

// TestApplyRefusesSymlinkedJournal: a linked /var/lib/nfstune would send the journal
// elsewhere; apply refuses before changing anything.
func TestApplyRefusesSymlinkedJournal(t *testing.T) {
	t.Parallel()
	root, elsewhere := fixtureRoot(t), t.TempDir()
	p := plan(t, root)
	if err := os.MkdirAll(root.Path("var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, root.Path("var/lib/nfstune")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	_, err := Apply(context.Background(), root, p, ApplyOptions{})
	if !errors.Is(err, hostfs.ErrSymlink) {
		t.Fatalf("err = %v, want ErrSymlink", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("apply changed the host (-before +after):\n%s", diff)
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("wrote through the link: %v", entries)
	}
}

// reuseDevice makes 0:53 a FUSE mount: the NFS superblock is gone and its anonymous
// device number reused, with read_ahead_kb 512.
func reuseDevice(t *testing.T, root hostfs.Root) {
	t.Helper()
	var mi []string
	for _, l := range strings.SplitAfter(fixtureMountinfo, "\n") {
		if !strings.Contains(l, " 0:53 ") {
			mi = append(mi, l)
		}
	}
	mi = append(mi, "60 22 0:53 / /mnt/fuse rw,nosuid,nodev,relatime shared:50 - fuse.sshfs host:/ rw,user_id=0,group_id=0\n")
	var vols []string
	for _, l := range strings.SplitAfter(fixtureVolumes, "\n") {
		if !strings.Contains(l, " 0:53 ") {
			vols = append(vols, l)
		}
	}
	for p, s := range map[string]string{
		"proc/self/mountinfo":                        strings.Join(mi, ""),
		"proc/fs/nfsfs/volumes":                      strings.Join(vols, ""),
		"proc/1/mountinfo":                           strings.Join(mi, ""),
		"proc/1/net/nfsfs/volumes":                   strings.Join(vols, ""),
		"sys/devices/virtual/bdi/0:53/read_ahead_kb": "512\n",
	} {
		writeTestFile(t, root.Path(p), s)
	}
}

func writeTestFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRevertFromContainer: apply --pid 1 ran in a container whose own mount namespace shows
// no NFS mount; revert there finds the superblocks in PID 1's namespaces and restores them.
// When no namespace can be read, the item fails and stays in the journal.
func TestRevertFromContainer(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, root.Path("proc/self/mountinfo"), "900 800 0:30 / / rw - overlay overlay rw\n")
	writeTestFile(t, root.Path("proc/fs/nfsfs/volumes"), "NV SERVER   PORT DEV          FSID                              FSC\n")
	res, err := Revert(root)
	if err == nil || res.Failed() != 2 {
		t.Fatalf("without PID 1's files: err = %v, %d failed; want the 2 read-ahead items failed", err, res.Failed())
	}
	if ok, _ := Pending(root); !ok {
		t.Fatal("failed items dropped from the journal")
	}
	writeTestFile(t, root.Path("proc/1/mountinfo"), fixtureMountinfo)
	writeTestFile(t, root.Path("proc/1/net/nfsfs/volumes"), fixtureVolumes)
	if _, err := Revert(root); err != nil {
		t.Fatalf("revert: %v", err)
	}
	for _, dev := range []string{"0:53", "0:54"} {
		if got := readFixture(t, root, "sys/devices/virtual/bdi/"+dev+"/read_ahead_kb"); got != "128\n" {
			t.Errorf("%s = %q, want 128 restored", dev, got)
		}
	}
}

// TestApplyRechecksNFS: a device that stopped being NFS between planning and apply is
// not written.
func TestApplyRechecksNFS(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	p := plan(t, root)
	reuseDevice(t, root)
	res, err := Apply(context.Background(), root, p, ApplyOptions{})
	if !errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), "not an NFS superblock") {
		t.Fatalf("err = %v, want ErrPartial naming the device as not NFS", err)
	}
	if res.Failed() != 1 {
		t.Errorf("%d items failed, want 1: %+v", res.Failed(), res.Items)
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:53/read_ahead_kb"); got != "512\n" {
		t.Errorf("FUSE bdi = %q, want 512 untouched", got)
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:54/read_ahead_kb"); got != "1024\n" {
		t.Errorf("0:54 = %q, want 1024", got)
	}
}

// TestRevertSkipsReusedDevice: revert does not write the journaled value to a device
// number now used by another file system; the tuned superblock is gone.
func TestRevertSkipsReusedDevice(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	reuseDevice(t, root)
	res, err := Revert(root)
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	for _, it := range res.Items {
		if it.Action.Path == "/sys/class/bdi/0:53/read_ahead_kb" && it.Status != StatusGone {
			t.Errorf("0:53: status %s, want %s", it.Status, StatusGone)
		}
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:53/read_ahead_kb"); got != "512\n" {
		t.Errorf("FUSE bdi = %q, want 512 untouched", got)
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:54/read_ahead_kb"); got != "128\n" {
		t.Errorf("0:54 = %q, want 128 restored", got)
	}
}

func TestBDIDevice(t *testing.T) {
	for in, want := range map[string]string{
		"/sys/class/bdi/0:53/read_ahead_kb":           "0:53",
		"/sys/class/bdi/0:53/../8:0/read_ahead_kb":    "",
		"/sys/class/bdi/0:53/max_ratio":               "",
		"/sys/devices/virtual/bdi/0:53/read_ahead_kb": "",
	} {
		got, err := bdiDevice(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("bdiDevice(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
