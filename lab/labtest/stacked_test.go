//go:build lab

package labtest

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// writeDirect writes mib MiB of zeros to path with O_DIRECT, so that the bytes reach the server
// as WRITE payload of the superblock the path is on, before the call returns.
func writeDirect(t *testing.T, path string, mib int) {
	t.Helper()
	out, err := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=1M", "count="+strconv.Itoa(mib), "oflag=direct", "status=none").CombinedOutput()
	if err != nil {
		t.Fatalf("dd to %s: %v: %s", path, err, out)
	}
}

// TestStatsStackedMounts stacks two superblocks on one directory (NFSv3, then NFSv4.2 over
// it, each with nosharecache so that neither shares a scenario superblock), writes 1 MiB
// through the lower and 3 MiB through the upper, and wants nfstune stats, reading the
// kernel's own /proc/self/mountstats, to give each superblock its own WRITE payload.
func TestStatsStackedMounts(t *testing.T) {
	RequireGuest(t)
	dir := MountDir(t)
	lower := Mount(t, MountSpec{Version: "3", Options: "nosharecache", Dir: dir})
	writeDirect(t, filepath.Join(dir, "lower"), 1)
	upper := Mount(t, MountSpec{Version: "4.2", Export: ExportDisk, Options: "nosharecache", Dir: dir})
	writeDirect(t, filepath.Join(dir, "upper"), 3)
	if lower.Device == upper.Device {
		t.Fatalf("both mounts are device %s: not two superblocks", lower.Device)
	}
	// stats divides by the mount's age in whole seconds: let the upper one reach 1 s.
	time.Sleep(1100 * time.Millisecond)

	r := RunNfstune(t, "stats", "-o", "json", dir)
	if r.Code != 0 {
		t.Fatalf("nfstune stats exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	var rep struct {
		Mounts []struct {
			Device    string  `json:"device"`
			Version   string  `json:"version"`
			Seconds   float64 `json:"interval_seconds"`
			WriteMBps float64 `json:"write_mb_per_sec"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("decoding stats JSON: %v\nstdout:\n%s", err, r.Stdout)
	}
	want := map[string]float64{lower.Device: 1 << 20, upper.Device: 3 << 20}
	if len(rep.Mounts) != len(want) {
		t.Fatalf("stats for %s lists %d mounts, want 2 (%s below, %s above):\n%s", dir, len(rep.Mounts), lower.Device, upper.Device, r.Stdout)
	}
	for _, m := range rep.Mounts {
		written := m.WriteMBps * m.Seconds * 1e6
		if w, ok := want[m.Device]; !ok || math.Abs(written-w) > 1 {
			t.Errorf("device %s (NFS %s): %.0f bytes written over %.0f s, want %.0f", m.Device, m.Version, written, m.Seconds, w)
		}
	}
}
