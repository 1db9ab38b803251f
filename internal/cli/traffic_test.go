package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// labTreeWithSample copies the recorded 6.1 lab tree and replaces the mountstats entry of
// /mnt/lab/rsize-1m (0:64) with a sample of internal/readahead/testdata.
func labTreeWithSample(t *testing.T, sample string) hostfs.Root {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "inventory", "testdata", "lab-6.1.0-50-amd64"))); err != nil {
		t.Fatal(err)
	}
	entry, err := os.ReadFile(filepath.Join("..", "readahead", "testdata", sample))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dst, "proc", "self", "mountstats")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	head := "device 127.0.0.1:/srv/disk mounted on /mnt/lab/rsize-1m "
	start := strings.Index(string(b), head)
	end := strings.Index(string(b[start+1:]), "\ndevice ") + start + 2
	if start < 0 || end <= start {
		t.Fatal("rsize-1m entry not found")
	}
	out := string(b[:start]) + string(entry) + string(b[end:])
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return hostfs.Root(dst)
}

// TestAuditTrafficWindow reads the two samples of internal/readahead/testdata through the
// inventory, as audit --traffic-window does, and finds the mount window-bound: 32 s of READ
// RTT in 10 s is 3.2 READs in flight, and its 128 KiB read-ahead holds half a READ of 256 KiB
// (NFS004). Without the window, NFS004 is not judged.
func TestAuditTrafficWindow(t *testing.T) {
	t.Parallel()
	first, err := inventory.Read(labTreeWithSample(t, "lab-6.1-rsize-1m.0.mountstats"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := labTreeWithSample(t, "lab-6.1-rsize-1m.1.mountstats")
	traffic, err := sampleTraffic(context.Background(), second, 0, first, time.Now().Add(-10*time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := traffic["0:64"]
	if !ok || e.Seconds < 10 || e.Seconds > 15 || e.Reads != 12288 || e.WindowReads != 0.5 {
		t.Fatalf("evidence of 0:64 = %+v", e)
	}
	inv, err := inventory.Read(second, inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := func(rep audit.Report) (n int) {
		for _, f := range rep.Findings {
			if f.ID == "NFS004" && f.Device == "0:64" {
				n++
			}
		}
		return n
	}
	if n := count(audit.RunWith(inv, policy.Default(), audit.Options{Traffic: traffic})); n != 1 {
		t.Errorf("with the window: %d NFS004 findings for 0:64, want 1", n)
	}
	if n := count(audit.Run(inv, policy.Default())); n != 0 {
		t.Errorf("without the window: %d NFS004 findings, want 0", n)
	}
}

func TestAuditTrafficWindowFlag(t *testing.T) {
	t.Parallel()
	if _, _, code := runVerb(t, "audit", "--root", auditRoot, "--traffic-window", "-1s"); code != ExitError2 {
		t.Errorf("negative window: exit %d, want %d", code, ExitError2)
	}
	// A fixture tree does not change between the reads: no traffic, no NFS004.
	out, _, _ := runVerb(t, "audit", "--root", auditRoot, "--traffic-window", "10ms", "-o", "json")
	if !strings.Contains(out, `"findings"`) || strings.Contains(out, "NFS004") {
		t.Errorf("audit --traffic-window 10ms:\n%s", out)
	}
}
