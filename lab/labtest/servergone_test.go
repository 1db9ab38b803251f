//go:build lab

package labtest

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
)

// TestAuditWithServerGone: a hard mount whose server is gone, with a reader blocked on it,
// must not slow the audit, whichever way the server went: packets dropped (the reader's
// request sits on a connected transport) or nfsd stopped (connections are refused, and the
// transport is closed between attempts). Each audit lists the mount and names its server
// as not answering (NFS093; before Linux 5.14, which has no sunrpc sysfs, it says it cannot
// see transports), and they return within the stall window and 1 s (more only as
// far as the same audit with the server up was slower than the window).
func TestAuditWithServerGone(t *testing.T) {
	RequireGuest(t)
	for _, how := range []string{GoneLoss, GoneStop} {
		t.Run(how, func(t *testing.T) { testAuditWithServerGone(t, how) })
	}
}

// auditRunsServerGone is how many audits each case times, with the server up and gone.
const auditRunsServerGone = 3

func testAuditWithServerGone(t *testing.T, how string) {
	// nosharecache: a superblock of its own, not the scenario's /mnt/lab/v41.
	m := Mount(t, MountSpec{Export: ExportTmp, Version: "4.1", Options: "hard,nosharecache"})
	if err := os.WriteFile(m.Dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("writing test data: %v", err)
	}
	// Drop the client's cached pages so the reader has to ask the server.
	if out, err := exec.Command("dd", "if="+m.Dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
	// The audit's own cost under emulation, with the server answering.
	var up []time.Duration
	for range auditRunsServerGone {
		_, r := audit(t)
		up = append(up, r.Elapsed)
	}
	base := median(up)
	ServerGone(t, how)
	reader := exec.Command("cat", m.Dir+"/data")
	if err := reader.Start(); err != nil {
		t.Fatalf("starting the reader: %v", err)
	}
	t.Cleanup(func() {
		ServerBack(t)
		done := make(chan error, 1)
		go func() { done <- reader.Wait() }()
		select {
		case <-done: //nolint:errcheck // the reader may fail by design; only its end matters
		case <-time.After(60 * time.Second):
			_ = reader.Process.Kill()
		}
	})
	// Let the reader block on the server, and check that it did: a reader served from the
	// cache would make this test prove nothing.
	time.Sleep(3 * time.Second)
	if st := ProcState(reader.Process.Pid); st == "" || st == "Z" {
		t.Fatalf("the reader of %s finished with the server gone (state %q): nothing was blocked", m.Dir, st)
	}

	// The stall window is the audit's one wait, and it runs while the inventory is read;
	// the second covers starting the binary and writing the report. On an idle machine the
	// audit with the server up takes well under the window and the limit is the window
	// plus 1 s; when other guests load the host, that audit shows how slow the emulation
	// is now, and the dead server may still add no more than the second to it. Medians of
	// three runs each: one run can stall on the guest's 9p root while the host is busy. A
	// read that waits on the server never ends.
	limit := max(inventory.DefaultStallWindow, base) + time.Second
	var gone []time.Duration
	var stages []string
	for i := range auditRunsServerGone {
		rep, r := audit(t, "--log-level", "debug")
		t.Logf("server gone (%s), audit %d: %s", how, i+1, r.Elapsed)
		gone = append(gone, r.Elapsed)
		stages = append(stages, string(r.Stderr))
		found := false
		for _, mm := range rep.Mounts {
			found = found || mm.Device == m.Device
		}
		if !found {
			t.Errorf("the hung mount %s (%s) is missing from the audit", m.Dir, m.Device)
		}
		// NFS093, from the sunrpc transports in sysfs that hold its requests with no
		// progress over the stall window.
		// Before Linux 5.14 there are no such transports: the audit must say that it cannot
		// see them.
		ids := findingsFor(rep, m.Device)
		if !kernelAtLeast(t, 5, 14) {
			if !slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.HasPrefix(w, noSunrpcSysfs) }) {
				t.Errorf("kernel %s has no sunrpc sysfs, and the audit does not say so; warnings: %q", kernelRelease(t), rep.Warnings)
			}
		} else if !slices.ContainsFunc(ids, func(s string) bool { return strings.HasPrefix(s, "NFS093:") }) {
			t.Errorf("the audit does not name the hung mount %s (%s) as unresponsive (NFS093) with the server gone (%s); its findings: %q\nits stages:\n%s",
				m.Dir, m.Device, how, ids, r.Stderr)
		}
	}
	if got := median(gone); got > limit {
		t.Errorf("audit took %s (median of %v) with the server gone (%s), want at most %s (%s, median of %v, with the server up); the stages of each run:\n%s",
			got, gone, how, limit, base, up, strings.Join(stages, "\n"))
	}
}

// median is the middle of ds (the upper middle for an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
