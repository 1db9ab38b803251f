package podcgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

const uid = "0f3c2a4e-1b2d-4c5e-8f90-a1b2c3d4e5f6"

// A Burstable pod's files under the systemd driver, in the forms of a 6.1 kernel (keys
// cut to a few around the ones read; the parser skips the others).
var podFiles = map[string]string{
	"memory.stat": "anon 1048576\nfile 52428800\nkernel 8192\nfile_mapped 4194304\n" +
		"workingset_refault_anon 0\nworkingset_refault_file 1200\npgfault 9000\npgmajfault 340\n",
	"memory.events":   "low 0\nhigh 3\nmax 17\noom 0\noom_kill 0\noom_group_kill 0\n",
	"memory.max":      "67108864\n",
	"memory.pressure": "some avg10=12.50 avg60=3.10 avg300=0.80 total=4200000\nfull avg10=6.00 avg60=1.00 avg300=0.20 total=2100000\n",
	"io.pressure":     "some avg10=1.00 avg60=0.50 avg300=0.10 total=900000\nfull avg10=0.50 avg60=0.20 avg300=0.05 total=400000\n",
}

const systemdDir = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f3c2a4e_1b2d_4c5e_8f90_a1b2c3d4e5f6.slice"

// seed writes files into dir below a new root's /sys/fs/cgroup.
func seed(t *testing.T, dir string, files map[string]string) hostfs.Root {
	t.Helper()
	root := hostfs.Root(t.TempDir())
	d := root.Sys("fs", "cgroup", dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRead(t *testing.T) {
	t.Parallel()
	c, err := Read(seed(t, systemdDir, podFiles), uid)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir != systemdDir || c.PgMajFault != 340 || c.WorkingsetRefaultFile != 1200 ||
		c.FileBytes != 52428800 || c.FileMappedBytes != 4194304 ||
		c.EventsHigh != 3 || c.EventsMax != 17 || c.EventsOOM != 0 {
		t.Errorf("counters = %+v", c)
	}
	if !c.Limited() || *c.MemoryMaxBytes != 64<<20 {
		t.Errorf("memory.max = %v, want 64 MiB", c.MemoryMaxBytes)
	}
	if c.Memory == nil || c.IO == nil {
		t.Fatalf("pressure = %v / %v, want both read", c.Memory, c.IO)
	}
	if c.Memory.Some != (Pressure{Avg10: 12.5, TotalMicrosec: 4200000}) || c.Memory.Full.TotalMicrosec != 2100000 ||
		c.IO.Some.TotalMicrosec != 900000 || c.IO.Full.Avg10 != 0.5 {
		t.Errorf("pressure = %+v / %+v", *c.Memory, *c.IO)
	}
}

func TestReadUnlimitedGuaranteedCgroupfs(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for k, v := range podFiles {
		files[k] = v
	}
	files["memory.max"] = "max\n"
	c, err := Read(seed(t, "kubepods/pod"+uid, files), uid)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limited() || c.Dir != "kubepods/pod"+uid {
		t.Errorf("Limited() = %v in %q, want false in kubepods/pod<uid>", c.Limited(), c.Dir)
	}
}

// TestReadOlderKernels: without PSI (CONFIG_PSI off, psi=0) the pressure is nil, not an
// error; before Linux 5.9 memory.stat's workingset_refault is the file pages' count.
func TestReadOlderKernels(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"memory.stat":   "anon 1\nfile 2\nfile_mapped 3\nworkingset_refault 44\nworkingset_activate 5\npgmajfault 6\n",
		"memory.events": podFiles["memory.events"],
		"memory.max":    podFiles["memory.max"],
	}
	c, err := Read(seed(t, "kubepods/besteffort/pod"+uid, files), uid)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory != nil || c.IO != nil || c.WorkingsetRefaultFile != 44 || c.PgMajFault != 6 {
		t.Errorf("counters = %+v, want no pressure and 44 refaults", c)
	}
}

func TestReadNoCgroup(t *testing.T) {
	t.Parallel()
	root := seed(t, "kubepods/burstable/pod"+"11111111-2222-3333-4444-555555555555", podFiles)
	if _, err := Read(root, uid); !errors.Is(err, ErrNoPodCgroup) {
		t.Errorf("Read of a pod without a cgroup: err = %v, want ErrNoPodCgroup", err)
	}
	if _, err := Read(root, "../../../etc"); err == nil || errors.Is(err, ErrNoPodCgroup) {
		t.Errorf("Read of a bad UID: err = %v, want a refusal", err)
	}
}

func TestReadMalformed(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"memory.stat":     "file 1\nfile_mapped 1\npgmajfault 1\n", // no workingset_refault_file (kernels before 5.9)
		"memory.events":   "high x\nmax 0\noom 0\n",
		"memory.max":      "unlimited\n",
		"memory.pressure": "some avg10=1.00\n",
		"io.pressure":     "",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			for k, v := range podFiles {
				files[k] = v
			}
			files[name] = text
			_, err := Read(seed(t, systemdDir, files), uid)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("err = %v, want one naming %s", err, name)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		files := map[string]string{}
		for k, v := range podFiles {
			if k != "memory.events" {
				files[k] = v
			}
		}
		if _, err := Read(seed(t, systemdDir, files), uid); err == nil || !strings.Contains(err.Error(), "memory.events") {
			t.Errorf("err = %v, want one naming memory.events", err)
		}
	})
}

func FuzzParsePSI(f *testing.F) {
	f.Add(podFiles["memory.pressure"])
	f.Add("some avg10=x total=1\n")
	f.Fuzz(func(_ *testing.T, s string) { _, _ = parsePSI([]byte(s)) })
}
