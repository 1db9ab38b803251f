//go:build lab

package labtest

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestReadAheadPageRounding checks what nfstune's writer assumes of read_ahead_kb on this
// kernel and architecture: the kernel keeps the value as whole pages (bdi ra_pages), so a
// value that is not a multiple of the page size reads back rounded down to one, and
// hostfs.SetReadAheadKB accepts a read-back less than a page below what it wrote, with the
// page size of the running kernel (os.Getpagesize), not a constant 4 KiB.
func TestReadAheadPageRounding(t *testing.T) {
	RequireGuest(t)
	page := os.Getpagesize()
	t.Logf("%s kernel %s: page size %d bytes", runtime.GOARCH, kernelRelease(t), page)
	// A superblock of its own: the scenario's mounts keep their read-ahead.
	m := Mount(t, MountSpec{Version: "4.2", Options: "nosharecache"})
	attr := "/sys/class/bdi/" + m.Device + "/read_ahead_kb"
	WaitUdev(t)
	old := ReadAheadKB(t, m.Device)
	t.Cleanup(func() {
		if err := os.WriteFile(attr, []byte(strconv.Itoa(old)+"\n"), 0o644); err != nil {
			t.Errorf("restoring %s: %v", attr, err)
		}
	})
	pageKB := page / 1024
	for _, c := range []struct{ write, want int }{
		{3*pageKB + 1, 3 * pageKB},
		{15360, 15360 / pageKB * pageKB},
		{pageKB - 1, 0},
	} {
		if err := os.WriteFile(attr, []byte(strconv.Itoa(c.write)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := ReadAheadKB(t, m.Device); got != c.want {
			t.Errorf("wrote %d to %s, read back %d; want %d (whole %d KiB pages)", c.write, attr, got, c.want, pageKB)
		}
	}
}
