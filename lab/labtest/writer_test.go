//go:build lab

package labtest

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// TestApplyWriterOnRealKernel: the one read-ahead writer on a real bdi. The kernel keeps
// read-ahead in pages, so 1001 KiB reads back as 1000 with 4 KiB pages, and the writer
// accepts that; the NFS check confirms an NFS superblock and refuses any other file system.
func TestApplyWriterOnRealKernel(t *testing.T) {
	RequireGuest(t)
	m := mountAt(t, "writer-check", MountSpec{Export: ExportTmp, Version: "4.2"})
	orig := ReadAheadKB(t, m.Device)
	t.Cleanup(func() {
		if _, err := hostfs.SetReadAhead("/", m.Device, orig); err != nil {
			t.Errorf("restoring read_ahead_kb: %v", err)
		}
	})

	if _, err := inventory.ConfirmNFS("/", 0, m.Device); err != nil {
		t.Fatalf("ConfirmNFS(%s): %v", m.Device, err)
	}
	pageKB := os.Getpagesize() / 1024
	for _, kb := range []int{1001, 1000, 16384} {
		got, err := hostfs.SetReadAhead("/", m.Device, kb)
		want := kb / pageKB * pageKB
		if err != nil || got != want {
			t.Errorf("SetReadAhead(%d) = %d, %v; want %d (%d KiB pages)", kb, got, err, want, pageKB)
		}
		if now := ReadAheadKB(t, m.Device); now != want {
			t.Errorf("after SetReadAhead(%d) the bdi has %d, want %d", kb, now, want)
		}
	}

	for _, e := range MountInfo(t) {
		if e.FSType == "nfs" || e.FSType == "nfs4" || !strings.HasPrefix(e.Device, "0:") {
			continue
		}
		if _, err := inventory.ConfirmNFS("/", 0, e.Device); !errors.Is(err, inventory.ErrNotNFS) {
			t.Errorf("ConfirmNFS(%s, %s on %s): err = %v, want ErrNotNFS", e.Device, e.FSType, e.MountPoint, err)
		}
	}
}
