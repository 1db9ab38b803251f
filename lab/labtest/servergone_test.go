//go:build lab

package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAuditWithServerGone: a hard mount whose server stops answering, with a reader
// blocked on it, must not block the audit: it returns within 2 s and lists the mount.
func TestAuditWithServerGone(t *testing.T) {
	RequireGuest(t)
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
	_, base := audit(t)
	ServerGone(t, GoneLoss)
	reader := exec.Command("cat", m.Dir+"/data")
	if err := reader.Start(); err != nil {
		t.Fatalf("starting the reader: %v", err)
	}
	t.Cleanup(func() {
		ServerBack(t)
		done := make(chan error, 1)
		go func() { done <- reader.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			reader.Process.Kill()
		}
	})
	// Let the reader block on the server, and check that it did: a reader served from the
	// cache would make this test prove nothing.
	time.Sleep(3 * time.Second)
	if st := procState(reader.Process.Pid); st == "" || st == "Z" {
		t.Fatalf("the reader of %s finished with the server gone (state %q): nothing was blocked", m.Dir, st)
	}

	// 2 s more than the same audit took with the server up: under emulation the audit's
	// own CPU time varies with the host's load; a read that waits on the server never ends.
	rep, r := audit(t)
	if limit := base.Elapsed + 2*time.Second; r.Elapsed > limit {
		t.Errorf("audit took %s with the server gone (%s with it up), want at most %s", r.Elapsed, base.Elapsed, limit)
	}
	found := false
	for _, mm := range rep.Mounts {
		found = found || mm.Device == m.Device
	}
	if !found {
		t.Errorf("the hung mount %s (%s) is missing from the audit", m.Dir, m.Device)
	}
	// The audit must name the hung mount: NFS093, from the sunrpc transports in sysfs that
	// hold its requests with no progress over the audit's sampling window. Before Linux 5.14
	// there are no such transports: the audit must say that it cannot see them.
	ids := findingsFor(rep, m.Device)
	if !kernelAtLeast(t, 5, 14) {
		if !slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.HasPrefix(w, noSunrpcSysfs) }) {
			t.Errorf("kernel %s has no sunrpc sysfs, and the audit does not say so; warnings: %q", kernelRelease(t), rep.Warnings)
		}
		return
	}
	if !slices.ContainsFunc(ids, func(s string) bool { return strings.HasPrefix(s, "NFS093:") }) {
		t.Errorf("the audit does not name the hung mount %s (%s) as unresponsive (NFS093); its findings: %q", m.Dir, m.Device, ids)
	}
}

// procState is the state letter of /proc/<pid>/stat ("D", "S", "Z"...), "" if it is gone.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, so split after the last ')'.
	i := strings.LastIndex(string(b), ") ")
	if i < 0 || i+3 > len(b) {
		return ""
	}
	return string(b[i+2 : i+3])
}
