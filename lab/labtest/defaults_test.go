//go:build lab

package labtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// adaptiveFloor is where nfstune starts a mount with no config (adaptive read-ahead's floor),
// computed here from the kernel's own mountinfo: one effective rsize, in KiB.
func adaptiveFloor(t *testing.T, dev string) int {
	t.Helper()
	return rsizeKB(t, dev)
}

// rsizeKB is the rsize in effect on the superblock dev, in KiB, from mountinfo.
func rsizeKB(t *testing.T, dev string) int {
	t.Helper()
	for _, m := range NFSMounts(t) {
		if m.Device == dev {
			return atoi(t, m.Options["rsize"]) / 1024
		}
	}
	t.Fatalf("%s is not an NFS mount in mountinfo", dev)
	return 0
}

// TestDefaultsBareIPNoConfig is what a new user sees with no config file and a server
// known only by its address (127.0.0.1): audit flags every mount at the kernel's 128 KiB;
// read-ahead is adaptive, so audit and apply ask one rsize at least (the floor the agent starts
// from): apply raises every mount below it live and persists a udev rule that gives the next
// new mount its floor; revert restores everything byte for byte.
func TestDefaultsBareIPNoConfig(t *testing.T) {
	RequireGuest(t)
	t.Cleanup(func() { RunNfstune(t, "revert") })
	mine := []Mounted{
		mountAt(t, "default-v42", MountSpec{Version: "4.2", Options: "nosharecache"}),
		mountAt(t, "default-v42-256k", MountSpec{Version: "4.2", Options: "nosharecache,rsize=262144"}),
		mountAt(t, "default-v3-64k", MountSpec{Version: "3", Options: "nolock,nosharecache,rsize=65536"}),
	}
	before := hostState(t)
	raBefore := map[string]int{}
	for _, m := range NFSMounts(t) {
		raBefore[m.Device] = ReadAheadKB(t, m.Device)
	}
	for _, m := range mine {
		if ra := raBefore[m.Device]; ra != 128 {
			t.Fatalf("%s (%s) starts at %d KiB, not the kernel default: the lab has a read-ahead rule", m.Dir, m.Device, ra)
		}
	}

	// audit: every 128 KiB mount whose rsize is above 128 KiB has NFS001 with one rsize as
	// the target, and NFS002 in its evidence (one finding per cause); the others are at
	// least at the floor already.
	rep, r := audit(t, "--fail-on", "warning")
	if r.Code != 1 {
		t.Errorf("audit --fail-on warning exit %d, want 1 (warnings)", r.Code)
	}
	flagged := 0
	for _, m := range rep.Mounts {
		if m.ReadAheadKB == nil || *m.ReadAheadKB != 128 {
			continue
		}
		want := adaptiveFloor(t, m.Device)
		ids := map[string]string{}
		for _, f := range rep.Findings {
			if f.Device == m.Device {
				ids[f.ID] = f.Expected
				for _, e := range f.Evidence {
					if id, _, ok := strings.Cut(e, ": "); ok && f.ID == "NFS001" {
						ids[id] = "evidence of NFS001"
					}
				}
			}
		}
		if want <= 128 {
			if _, ok := ids["NFS001"]; ok {
				t.Errorf("%s (%s, rsize %d): NFS001 at 128 KiB, above the floor of %d KiB; findings %q", m.MountPoints[0], m.Device, m.RSize, want, findingsFor(rep, m.Device))
			}
			continue
		}
		if ids["NFS001"] != fmt.Sprintf("read_ahead_kb >= %d", want) {
			t.Errorf("%s (%s, rsize %d): NFS001 expected %q, want read_ahead_kb >= %d; findings %q", m.MountPoints[0], m.Device, m.RSize, ids["NFS001"], want, findingsFor(rep, m.Device))
		}
		if _, ok := ids["NFS002"]; ok != (m.RSize > 128*1024) {
			t.Errorf("%s (%s, rsize %d): NFS002 present %v, want %v", m.MountPoints[0], m.Device, m.RSize, ok, m.RSize > 128*1024)
		}
		flagged++
	}
	if flagged < len(mine)-1 {
		t.Errorf("audit flagged %d mounts at 128 KiB, want at least this test's %d with an rsize above it", flagged, len(mine)-1)
	}

	// apply with no --config: live, and the udev rule for future mounts.
	res := RunNfstune(t, "apply", "--udev-program", Bin(t), "--udev-wait", applyUdevWait)
	t.Logf("apply stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	if res.Code != 0 {
		t.Fatalf("apply: exit %d", res.Code)
	}
	for dev, ra := range raBefore {
		// Raised: read-ahead below the adaptive floor. Anything above it stays: the agent
		// moves it within its bounds (docs/policy.md, Adaptive read-ahead).
		want := max(ra, adaptiveFloor(t, dev))
		if got := ReadAheadKB(t, dev); got != want {
			t.Errorf("after apply, bdi %s read_ahead_kb = %d, want %d (was %d, one rsize = %d)", dev, got, want, ra, adaptiveFloor(t, dev))
		}
	}
	rule, err := os.ReadFile("/etc/udev/rules.d/99-zz-nfstune-readahead.rules")
	if err != nil || strings.Contains(string(rule), "--config") {
		t.Fatalf("udev rule (want one with the built-in policy): %v\n%s", err, rule)
	}
	if r := RunNfstune(t, "apply", "--udev-program", Bin(t), "--udev-wait", applyUdevWait); r.Code != 0 || !strings.Contains(string(r.Stdout), "Nothing to change") {
		t.Errorf("second apply: exit %d, want nothing to change\n%s", r.Code, r.Stdout)
	}

	// The next new mount gets its floor from the persisted rule. udevd looks for changed
	// rule files at most every 3 seconds.
	time.Sleep(4 * time.Second)
	next := mountAt(t, "default-next-256k", MountSpec{Version: "4.1", Options: "nosharecache,rsize=262144"})
	waitReadAheadKB(t, next.Device, adaptiveFloor(t, next.Device))

	if r := RunNfstune(t, "revert"); r.Code != 0 {
		t.Fatalf("revert: exit %d\n%s", r.Code, r.Stderr)
	}
	after := hostState(t)
	delete(after, "bdi "+next.Device) // made after apply: not apply's to restore
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("revert did not restore the host (-before +after):\n%s", diff)
	}
}
