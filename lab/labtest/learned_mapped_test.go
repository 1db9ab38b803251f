//go:build lab

package labtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/tune"
)

// TestAgentMappedLearnedSecondMount: nfstune agent with the default's adaptive read-ahead
// and the per-pod collector lowers the window of a superblock whose reader faults a mapped
// file at random (a database, a model server) from the floor it started it at to the
// kernel's 128 KiB, and keeps that value for the volume. A second superblock of the same
// volume, mounted while the agent runs (a second pod of the volume), then reads at 128 KiB
// from its reader's first fault: the agent starts it at the learned value, never at the
// bound, and holds it there while the reader runs.
//
// The policy sets one thing, the default's floor: 1024 KiB, the rsize cloud servers grant.
// In the lab's 2 GiB guest nfsd grants 256 KiB, and at a window of 256 KiB the faults of a
// random reader bring in about twice what they map, under readahead.MappedRandomOverRead
// (TestPodIOMappedOverRead: 0.9 at 128 KiB, 86 at 15360 KiB; in order 0.7 to 1.7), so the
// controller could not tell it from a reader in order and would rightly hold.
func TestAgentMappedLearnedSecondMount(t *testing.T) {
	RequireGuest(t)
	Tracefs(t)
	HostCgroup(t) // the agent names the readers' cgroups from /sys/fs/cgroup
	learnedFile := filepath.Join("/", tune.LearnedPath)
	_ = os.Remove(learnedFile)
	t.Cleanup(func() { _ = os.Remove(learnedFile) })

	spec := MountSpec{Version: "4.2", Options: "rsize=1048576,nosharecache"}
	m := Mount(t, spec)
	file := layout(t, m.Dir, 1, 256)[0]
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	policy := "apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults:\n  readAheadAdaptive: {minKB: 1024}\n"
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := StartAgent(t, "--config", cfg, "--pod-io", "--listen", "127.0.0.1:9487", "--log-level", "debug")
	t.Cleanup(func() {
		stop()
		RunNfstune(t, "revert")
	})
	reader := func(path string) string {
		return "exec fio --name=mapped --rw=randread --bs=16k --ioengine=mmap --numjobs=4 --fadvise_hint=0 --time_based --runtime=86400 --filename=" + path + " --output=/dev/null"
	}
	first := StartReaders(t, MemoryCgroup(t, "nfstune-mapped-first", "64M"), reader(file))

	// The first superblock: lowered to 128 KiB and learned for the volume.
	learned := func() (int, bool) {
		b, err := os.ReadFile(learnedFile)
		if err != nil {
			return 0, false
		}
		var f struct{ Volumes []tune.LearnedValue }
		if json.Unmarshal(b, &f) != nil || len(f.Volumes) == 0 {
			return 0, false
		}
		return f.Volumes[0].ReadAheadKB, true
	}
	var path []int
	start := time.Now()
	for deadline := start.Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		kb := ReadAheadKB(t, m.Device)
		if len(path) == 0 || path[len(path)-1] != kb {
			path = append(path, kb)
		}
		if l, ok := learned(); ok && l == readahead.MappedFloorKB && kb == readahead.MappedFloorKB {
			break
		}
		if time.Now().After(deadline) {
			l, _ := learned()
			t.Fatalf("after 3 min the first superblock went through %v KiB, learned %d; want 128 KiB learned", path, l)
		}
	}
	t.Logf("first superblock %s: %v KiB, 128 KiB learned after %s", m.Device, path, time.Since(start).Round(time.Second))
	first()

	// The second superblock, and its reader as soon as it is mounted.
	m2 := Mount(t, spec)
	if m2.Device == m.Device {
		t.Fatalf("nosharecache gave no superblock of its own: %s", m2.Device)
	}
	StartReaders(t, MemoryCgroup(t, "nfstune-mapped-second", "64M"), reader(filepath.Join(m2.Dir, filepath.Base(file))))
	var seen []int
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if kb := ReadAheadKB(t, m2.Device); len(seen) == 0 || seen[len(seen)-1] != kb {
			seen = append(seen, kb)
		}
	}
	t.Logf("second superblock %s over its reader's first 20 s: %v KiB", m2.Device, seen)
	if slices.ContainsFunc(seen, func(kb int) bool { return kb != readahead.MappedFloorKB }) {
		t.Errorf("the second superblock went through %v KiB in its reader's first 20 s, want 128 KiB throughout (the learned value, not the floor of 1024 KiB)", seen)
	}
}
