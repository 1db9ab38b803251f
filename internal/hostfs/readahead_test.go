package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs/hostfstest"
)

// bdiRoot is a root with /sys/class/bdi/0:53 a link into /sys/devices/virtual/bdi, as in
// sysfs, holding read_ahead_kb = 128.
func bdiRoot(t *testing.T) Root {
	t.Helper()
	root := Root(t.TempDir())
	mustWrite(t, root.Sys("devices", "virtual", "bdi", "0:53", "read_ahead_kb"), "128\n", 0o644)
	if err := os.MkdirAll(root.Sys("class", "bdi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/bdi/0:53", root.Sys("class", "bdi", "0:53")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSetReadAhead(t *testing.T) {
	root := bdiRoot(t)
	got, err := SetReadAhead(root, "0:53", 16384)
	if err != nil || got != 16384 {
		t.Fatalf("SetReadAhead = %d, %v; want 16384", got, err)
	}
	if n, _ := ReadInt(root.Sys("class", "bdi", "0:53", "read_ahead_kb")); n != 16384 {
		t.Errorf("read_ahead_kb = %d", n)
	}
	// Lowering leaves no trailing bytes of the longer value.
	if got, err := SetReadAhead(root, "0:53", 128); err != nil || got != 128 {
		t.Errorf("SetReadAhead(128) = %d, %v", got, err)
	}
	// One page, the least read-ahead, and 0, a read-ahead turned off that revert restores.
	for _, kb := range []int{MinReadAheadKB, 0} {
		if got, err := SetReadAhead(root, "0:53", kb); err != nil || got != kb {
			t.Errorf("SetReadAhead(%d) = %d, %v", kb, got, err)
		}
	}
}

func TestSetReadAheadRefuses(t *testing.T) {
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "read_ahead_kb"), "128\n", 0o644)
	tests := []struct {
		name  string
		dev   string
		kb    int
		setup func(t *testing.T, root Root)
		is    error
	}{
		{name: "bdi linked out of /sys", dev: "0:60", kb: 1024, setup: func(t *testing.T, root Root) {
			if err := os.Symlink(outside, root.Sys("class", "bdi", "0:60")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "attribute is a link", dev: "0:61", kb: 1024, is: ErrSymlink, setup: func(t *testing.T, root Root) {
			if err := os.MkdirAll(root.Sys("class", "bdi", "0:61"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../../devices/virtual/bdi/0:53/read_ahead_kb", root.Sys("class", "bdi", "0:61", "read_ahead_kb")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "missing bdi", dev: "0:62", kb: 1024, is: fs.ErrNotExist, setup: func(*testing.T, Root) {}},
		{name: "crafted device", dev: "0:53/../../../../etc", kb: 1024, setup: func(*testing.T, Root) {}},
		{name: "negative", dev: "0:53", kb: -1, setup: func(*testing.T, Root) {}},
		// Stored as 0 by the kernel: read-ahead off.
		{name: "1 KiB", dev: "0:53", kb: 1, setup: func(*testing.T, Root) {}},
		{name: "below one page", dev: "0:53", kb: MinReadAheadKB - 1, setup: func(*testing.T, Root) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := bdiRoot(t)
			tt.setup(t, root)
			if _, err := SetReadAhead(root, tt.dev, tt.kb); err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("err = %v, want an error matching %v", err, tt.is)
			}
			if n, _ := ReadInt(filepath.Join(outside, "read_ahead_kb")); n != 128 {
				t.Errorf("file outside /sys = %d, want 128", n)
			}
			if n, _ := ReadInt(root.Sys("devices", "virtual", "bdi", "0:53", "read_ahead_kb")); n != 128 {
				t.Errorf("0:53 = %d, want 128", n)
			}
			if _, err := os.Lstat(root.Sys("class", "bdi", "0:62")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("created a bdi: %v", err)
			}
		})
	}
}

// TestPageRounded: the kernel stores read-ahead in pages (kb >> (PAGE_SHIFT-10)) and
// shows pages << (PAGE_SHIFT-10), so a value reads back rounded down to whole pages.
func TestPageRounded(t *testing.T) {
	for _, tt := range []struct {
		want, got, pageKB int
		ok                bool
	}{
		{1000, 1000, 4, true},
		{1001, 1000, 4, true},
		{1003, 1000, 4, true},
		{1004, 1000, 4, false}, // a whole page lost
		{1000, 996, 4, false},
		{1000, 1004, 4, false}, // more than written
		{1000, 960, 64, true},  // 64 KiB pages: 15 pages
		{1000, 896, 64, false},
		{0, 0, 4, true},
		{16384, 16384, 16, true},
	} {
		if got := pageRounded(tt.want, tt.got, tt.pageKB); got != tt.ok {
			t.Errorf("pageRounded(%d, %d, %d) = %v, want %v", tt.want, tt.got, tt.pageKB, got, tt.ok)
		}
	}
}

// TestSetReadAheadOverwritten: a value read back that is neither the one written nor its
// page rounding is another writer's (the kernel stores any value), reported as
// ErrOverwritten with that value. A FIFO stands in for the attribute, so that the test
// can be the other writer between the write and the read-back.
func TestSetReadAheadOverwritten(t *testing.T) {
	root := bdiRoot(t)
	written := hostfstest.OverwriteAfterWrite(t, root.Sys("devices", "virtual", "bdi", "0:53", "read_ahead_kb"), "128\n")
	got, err := SetReadAhead(root, "0:53", 15360)
	if !errors.Is(err, ErrOverwritten) || got != 128 {
		t.Fatalf("SetReadAhead = %d, %v; want 128, ErrOverwritten", got, err)
	}
	if w := written(); w != "15360\n" {
		t.Errorf("wrote %q, want 15360", w)
	}
}
