package tune

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

func fullOptions() Options {
	o := defaultOptions()
	o.Fstab = true
	return o
}

func plan(t *testing.T, root hostfs.Root) *Plan {
	t.Helper()
	p, err := NewPlan(root, fixtureInventory(), fixtureWant(), fullOptions())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyRevertRoundTrip(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	p := plan(t, root)
	res, err := Apply(context.Background(), root, p, ApplyOptions{})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(res.Items) != len(p.Actions) || res.Failed() != 0 {
		t.Fatalf("items = %+v", res.Items)
	}
	for _, c := range []struct{ path, want string }{
		{"sys/devices/virtual/bdi/0:53/read_ahead_kb", "16384\n"},
		{"sys/devices/virtual/bdi/0:54/read_ahead_kb", "1024\n"},
		{"sys/devices/virtual/bdi/8:0/read_ahead_kb", "128\n"},
		{"proc/sys/net/ipv4/tcp_rmem", "4096 131072 16777216\n"},
		{"proc/sys/net/core/wmem_max", "16777216\n"},
		{"etc/fstab.nfstune.bak", fixtureFstab},
	} {
		if got := readFixture(t, root, c.path); got != c.want {
			t.Errorf("%s = %q, want %q", c.path, got, c.want)
		}
	}
	if !strings.Contains(readFixture(t, root, "etc/fstab"), "/mnt/tools\tnfs\trsize=1048576,wsize=1048576,hard\t0") {
		t.Errorf("fstab not edited:\n%s", readFixture(t, root, "etc/fstab"))
	}
	if ok, _ := Pending(root); !ok {
		t.Fatal("no journal after apply")
	}

	// A second plan against the tuned host is empty, and applying it changes nothing.
	tuned := snapshot(t, root)
	p2 := plan(t, root)
	if !p2.Empty() {
		t.Errorf("second plan not empty: %v", briefs(p2))
	}
	if _, err := Apply(context.Background(), root, p2, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tuned, snapshot(t, root)); diff != "" {
		t.Errorf("second apply changed the host (-before +after):\n%s", diff)
	}

	if _, err := Revert(root); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("revert did not restore the host (-before +after):\n%s", diff)
	}
	// Revert is idempotent.
	res, err = Revert(root)
	if err != nil || len(res.Items) != 0 {
		t.Errorf("second revert: %+v, %v", res, err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("second revert changed the host:\n%s", diff)
	}
}

// An apply with a journal already in place keeps the original values, not the tuned ones.
func TestApplyKeepsFirstOriginals(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	before := snapshot(t, root)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// Someone lowers one value by hand; apply raises it again and must still keep 128.
	if err := os.WriteFile(root.Path("sys/devices/virtual/bdi/0:53/read_ahead_kb"), []byte("512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := plan(t, root)
	if got := briefs(p); len(got) != 1 || got[0].Old != "512" {
		t.Fatalf("plan = %v, want only 0:53 512 -> 16384", got)
	}
	if _, err := Apply(context.Background(), root, p, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(root); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("revert did not restore the first originals:\n%s", diff)
	}
}

// A crash after k actions leaves a journal that revert completes, for every k.
func TestApplyCrashThenRevert(t *testing.T) {
	t.Parallel()
	n := len(plan(t, fixtureRoot(t)).Actions)
	for k := 0; k <= n; k++ {
		root := fixtureRoot(t)
		before := snapshot(t, root)
		p := plan(t, root)
		if _, err := Apply(context.Background(), root, p, ApplyOptions{stopAfter: k}); err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		// A crash in the middle of an atomic write leaves a temporary file behind.
		if err := os.WriteFile(root.Path("etc/udev/rules.d/.99-zz-nfstune-readahead.rules.nfstune-123"), []byte("half"), 0o644); err != nil && k > 2 {
			t.Fatal(err)
		}
		if _, err := Revert(root); err != nil {
			t.Fatalf("k=%d: revert: %v", k, err)
		}
		if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
			t.Errorf("k=%d: host not restored (-before +after):\n%s", k, diff)
		}
	}
}

// One item the kernel refuses does not stop the others; revert still restores everything.
func TestApplyPartialFailure(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	p := plan(t, root)
	// Planning saw a value; now the attribute cannot be written (a directory stands in for
	// an attribute that rejects writes, which works even when the tests run as root).
	attr := root.Path("sys/devices/virtual/bdi/0:53/read_ahead_kb")
	if err := os.Remove(attr); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(attr, 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	res, err := Apply(context.Background(), root, p, ApplyOptions{})
	if err == nil || !errors.Is(err, ErrPartial) {
		t.Fatalf("err = %v, want ErrPartial", err)
	}
	if !strings.Contains(err.Error(), `"/sys/class/bdi/0:53/read_ahead_kb"`) {
		t.Errorf("error does not name the attribute: %v", err)
	}
	if res.Failed() != 1 || len(res.Items) != len(p.Actions) {
		t.Errorf("%d of %d items failed, want 1 of %d: %+v", res.Failed(), len(res.Items), len(p.Actions), res.Items)
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:54/read_ahead_kb"); got != "1024\n" {
		t.Errorf("0:54 read_ahead_kb = %q: the failure stopped the other items", got)
	}
	if _, err := Revert(root); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("host not restored (-before +after):\n%s", diff)
	}
}

// Two applies never interleave: the second finds the journal locked.
func TestApplyLocked(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	unlock, err := lockJournal(root)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, root)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); !errors.Is(err, ErrBusy) {
		t.Errorf("err = %v, want ErrBusy", err)
	}
	if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
		t.Errorf("a locked apply changed the host:\n%s", diff)
	}
	unlock()
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Errorf("after unlock: %v", err)
	}
}
