//go:build lab

package labtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podcgroup"
	"github.com/nfstune/nfstune/internal/readahead"
)

// TestPodTrafficClass reads a pod-named cgroup v2 directory of the guest's kernel through
// podcgroup.Read (a host root whose /sys/fs/cgroup is the cgroup2 hierarchy) and classifies
// two samples of a reader in it: one pass of read(2) over a file the page cache does not
// hold, without a memory limit, is streaming_read; the same file read over and over in a
// cgroup whose memory.max is a quarter of it is thrashing (its cache refaults what it read
// on the previous pass, at its limit); a reader of a mapping of a file the cache does not
// hold is unknown in order and at random offsets alike: each fault reads a whole window,
// and the pods' major faults do not separate the two (the test logs them).
func TestPodTrafficClass(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576,nosharecache"})
	files := layout(t, m.Dir, 2, 128)
	setReadAheadKB(t, m.Device, 1024)

	root := t.TempDir()
	cg := filepath.Join(root, "sys", "fs", "cgroup")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "cgroup2", "cgroup2", cg).CombinedOutput(); err != nil {
		t.Fatalf("mounting cgroup2: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", cg).Run() })

	mmapReader := func(rw, bs string) string {
		return "exec fio --name=mapped --rw=" + rw + " --bs=" + bs + " --ioengine=mmap --fadvise_hint=0 --time_based --runtime=3600 --filename=" +
			files[1] + " --output=/dev/null"
	}
	for _, tt := range []struct {
		name, uid, limit, script string
		warmup                   time.Duration
		want                     readahead.Class
	}{
		{"one pass, no limit", "6a1b2c3d-0000-4000-8000-000000000001", "max",
			"exec dd if=" + files[0] + " of=/dev/null bs=1M", 0, readahead.StreamingRead},
		// Past the first pass, which only fills the cache.
		{"passes over 4x the limit", "6a1b2c3d-0000-4000-8000-000000000002", "32M",
			"while :; do dd if=" + files[0] + " of=/dev/null bs=1M 2>/dev/null; done", 10 * time.Second, readahead.Thrashing},
		// fio's mmap engine copies from a mapping of the file: page faults, no read(2).
		{"mmap in order, no limit", "6a1b2c3d-0000-4000-8000-000000000003", "max",
			mmapReader("read", "1M"), 2 * time.Second, readahead.Unknown},
		{"mmap at random, no limit", "6a1b2c3d-0000-4000-8000-000000000004", "max",
			mmapReader("randread", "16k"), 2 * time.Second, readahead.Unknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := PodCgroup(t, cg, "kubepods/pod"+tt.uid)
			for _, dir := range []string{cg, filepath.Join(cg, "kubepods")} {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
					t.Fatalf("enabling the memory controller in %s: %v", dir, err)
				}
			}
			if err := os.WriteFile(filepath.Join(pod, "memory.max"), []byte(tt.limit), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
				t.Fatal(err)
			}
			sample := func() (*inventory.Mount, *podcgroup.Counters) {
				inv, err := inventory.Read(hostfs.Root("/"), inventory.ReadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				c, err := podcgroup.Read(hostfs.Root(root), tt.uid)
				if err != nil {
					t.Fatalf("podcgroup.Read of the guest's kernel files: %v", err)
				}
				for i := range inv.Mounts {
					if inv.Mounts[i].Device == m.Device {
						return &inv.Mounts[i], c
					}
				}
				t.Fatalf("no %s in the inventory", m.Device)
				return nil, nil
			}
			stop := StartReaders(t, pod, tt.script)
			time.Sleep(tt.warmup)
			m0, c0 := sample()
			start := time.Now()
			time.Sleep(8 * time.Second)
			m1, c1 := sample()
			elapsed := time.Since(start)
			stop()
			e := readahead.Measure(m1, m0.Stats, elapsed)
			p := readahead.PodBetween(tt.uid, c0, c1, elapsed, os.Getpagesize())
			got := readahead.Classify(e, []readahead.PodActivity{p})
			t.Logf("evidence %+v; pod %+v; memory.max %v, PSI %v", e, p, c1.MemoryMaxBytes, c1.Memory != nil)
			if got.Class != tt.want {
				t.Errorf("class %s (%s), want %s", got.Class, got.Why, tt.want)
			}
		})
	}
}
