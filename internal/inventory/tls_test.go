package inventory

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/hostfs"
)

// tlsTree returns the synthetic-tls fixture, or a copy of it without the tlshd process
// when tlshd is false.
func tlsTree(t *testing.T, tlshd bool) hostfs.Root {
	t.Helper()
	if tlshd {
		return hostfs.Root("testdata/synthetic-tls")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/synthetic-tls")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "proc", "612")); err != nil {
		t.Fatal(err)
	}
	return hostfs.Root(dir)
}

// TestReadTLS reads mounts with xprtsec=tls, xprtsec=mtls and none, as a 6.12 kernel shows
// them: each gets its transport security, its own client group (the kernel matches clients
// by xprtsec policy), and the scan for tlshd finds it running or not.
func TestReadTLS(t *testing.T) {
	t.Parallel()
	for _, running := range []bool{true, false} {
		inv, err := Read(tlsTree(t, running), ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Warnings) != 0 {
			t.Errorf("warnings: %q", inv.Warnings)
		}
		want := map[string]struct{ sec, group string }{
			"0:70": {XprtSecTLS, "tcp://10.20.0.10/v4.2/xprtsec=tls"},
			"0:71": {XprtSecMTLS, "tcp://10.20.0.10/v4.2/xprtsec=mtls"},
			"0:72": {XprtSecNone, "tcp://10.20.0.10/v4.2"},
		}
		if len(inv.Mounts) != len(want) {
			t.Fatalf("%d mounts, want %d", len(inv.Mounts), len(want))
		}
		for _, m := range inv.Mounts {
			if w := want[m.Device]; m.TransportSecurity != w.sec || m.ClientGroup != w.group {
				t.Errorf("%s: xprtsec %q group %q, want %q %q", m.Device, m.TransportSecurity, m.ClientGroup, w.sec, w.group)
			}
		}
		if len(inv.Groups) != 3 {
			t.Errorf("%d client groups, want 3", len(inv.Groups))
		}
		hs := inv.TLSHandshake
		if hs == nil {
			t.Fatal("no tlshd scan with TLS mounts")
		}
		var pids []int
		if running {
			pids = []int{612}
		}
		if hs.Running != running || !slices.Equal(hs.PIDs, pids) || !hs.Complete {
			t.Errorf("tlshd: %+v, want running %v, pids %v, complete", *hs, running, pids)
		}
	}
}

// TestReadNoTLSNoScan: without a TLS mount no process is looked at.
func TestReadNoTLSNoScan(t *testing.T) {
	t.Parallel()
	inv, err := Read(hostfs.Root("testdata/mixed"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range inv.Mounts {
		if m.TransportSecurity != XprtSecNone {
			t.Errorf("%s: xprtsec %q, want none", m.Device, m.TransportSecurity)
		}
	}
	if inv.TLSHandshake != nil {
		t.Errorf("tlshd scanned without a TLS mount: %+v", *inv.TLSHandshake)
	}
}

// TestReadTLSHandshakeLimits: a scan stopped by its limits before it finds tlshd says so.
func TestReadTLSHandshakeLimits(t *testing.T) {
	t.Parallel()
	hs, w := ReadTLSHandshake(t.Context(), tlsTree(t, true), HolderLimits{MaxProcesses: 1})
	if hs.Running || hs.Complete || len(w) != 1 {
		t.Errorf("got %+v %q, want not running, incomplete, one warning", hs, w)
	}
}

// TestTLSTreeGolden compares the inventory of synthetic-tls, as JSON, with its golden.
func TestTLSTreeGolden(t *testing.T) {
	t.Parallel()
	inv, err := Read(tlsTree(t, true), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "golden", "synthetic-tls.json"), append(got, '\n'))
}

// TestReadMountStatsFileTLS: a saved mountstats file gives each mount its xprtsec from the
// opts: line, and its client group by it, as the live read does.
func TestReadMountStatsFileTLS(t *testing.T) {
	t.Parallel()
	inv, err := ReadMountStatsFile("testdata/synthetic-tls/proc/self/mountstats")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ sec, group string }{
		"/mnt/projects": {XprtSecTLS, "tcp://nfs.example.com/v4.2/xprtsec=tls"},
		"/mnt/home":     {XprtSecMTLS, "tcp://nfs.example.com/v4.2/xprtsec=mtls"},
		"/mnt/scratch":  {XprtSecNone, "tcp://nfs.example.com/v4.2"},
	}
	if len(inv.Mounts) != len(want) {
		t.Fatalf("%d mounts, want %d", len(inv.Mounts), len(want))
	}
	for _, m := range inv.Mounts {
		if w := want[m.MountPoints[0]]; m.TransportSecurity != w.sec || m.ClientGroup != w.group {
			t.Errorf("%s: xprtsec %q group %q, want %q %q", m.MountPoints[0], m.TransportSecurity, m.ClientGroup, w.sec, w.group)
		}
	}
}
