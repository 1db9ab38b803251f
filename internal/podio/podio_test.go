package podio

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

func TestParseFormat(t *testing.T) {
	for _, ev := range []string{"nfs_initiate_read", "nfs_readpage_done"} {
		b, err := os.ReadFile(filepath.Join("testdata", "6.1-"+ev+".format"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseFormat(b)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range recordLayouts[ev] {
			if got[name] != want {
				t.Errorf("%s %s: %+v, want %+v", ev, name, got[name], want)
			}
		}
	}
	if _, err := parseFormat([]byte("name: x\nformat:\n\tfield:int a;\toffset:x;\tsize:4;\n")); err == nil {
		t.Error("an offset that is not a number parsed")
	}
}

// TestCheckTracepoints checks a tracefs whose records are laid out as the collector reads
// them, then one where a kernel moved res_count: PartRPC must not load there.
func TestCheckTracepoints(t *testing.T) {
	tracefs := t.TempDir()
	write := func(ev string, b []byte) {
		dir := filepath.Join(tracefs, "events", "nfs", ev)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "format"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(ev string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "6.1-"+ev+".format"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	initiate, done := read("nfs_initiate_read"), read("nfs_readpage_done")
	// The write events share the read events' classes' heads (fs/nfs/nfstrace.h).
	write("nfs_initiate_read", initiate)
	write("nfs_initiate_write", initiate)
	write("nfs_readpage_done", done)
	write("nfs_writeback_done", done)
	if err := checkTracepoints(tracefs); err != nil {
		t.Fatalf("the 6.1 layout: %v", err)
	}
	moved := strings.Replace(string(done), "field:u32 res_count;\toffset:36;", "field:u32 res_count;\toffset:40;", 1)
	if moved == string(done) {
		t.Fatal("the fixture has no res_count at offset 36")
	}
	write("nfs_writeback_done", []byte(moved))
	err := checkTracepoints(tracefs)
	if err == nil || !strings.Contains(err.Error(), "res_count") {
		t.Errorf("a moved res_count: %v, want an error naming it", err)
	}
	if err := checkTracepoints(""); err == nil {
		t.Error("no tracefs passed the check")
	}
}

func TestDeviceName(t *testing.T) {
	for dev, want := range map[uint32]string{0<<20 | 66: "0:66", 8<<20 | 1: "8:1", 259<<20 | 1048575: "259:1048575"} {
		if got := deviceName(dev); got != want {
			t.Errorf("deviceName(%#x) = %s, want %s", dev, got, want)
		}
	}
}

func inode(t *testing.T, dir string) uint64 {
	t.Helper()
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return info.Sys().(*syscall.Stat_t).Ino
}

// TestAttributorSums builds a cgroup tree as kubelet's systemd driver names it, with two
// containers of one pod and a host service, and checks the sums per pod and superblock;
// then a container goes: its counts stay in its pod's sums, and Sum names it gone.
func TestAttributorSums(t *testing.T) {
	root := t.TempDir()
	cg := filepath.Join(root, "sys", "fs", "cgroup")
	const uid = "0f1e2d3c-0000-4000-8000-000000000001"
	pod := filepath.Join(cg, "kubepods.slice", "kubepods-burstable.slice", "kubepods-burstable-pod"+strings.ReplaceAll(uid, "-", "_")+".slice")
	c1, c2 := filepath.Join(pod, "cri-containerd-aaaa.scope"), filepath.Join(pod, "cri-containerd-bbbb.scope")
	svc := filepath.Join(cg, "system.slice", "backup.service")
	// Every directory is made before any is removed: unlike cgroupfs, whose IDs only grow,
	// the test's filesystem may give a removed directory's inode number to the next one.
	c3, svc2 := filepath.Join(pod, "cri-containerd-cccc.scope"), filepath.Join(cg, "system.slice", "other.service")
	for _, d := range []string{c1, c2, c3, svc, svc2} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	id1, id2, idSvc := inode(t, c1), inode(t, c2), inode(t, svc)
	counts := func() map[Key]Counters {
		return map[Key]Counters{
			{id1, "0:66"}:   {ReadBytes: 100, ServerReadBytes: 120},
			{id2, "0:66"}:   {ReadBytes: 50, FaultReadBytes: 400, ServerReadBytes: 400, MajorFaults: 7},
			{id2, "0:70"}:   {WriteBytes: 9},
			{idSvc, "0:66"}: {ReadBytes: 1000, ServerReadBytes: 1000},
		}
	}
	a := NewAttributor(hostfs.Root(root))
	now := time.Unix(1000, 0)
	sums, gone := a.Sum(now, counts())
	if len(gone) != 0 {
		t.Fatalf("gone %v with every cgroup there", gone)
	}
	want := map[[2]string]Counters{
		{"", "0:66"}:  {ReadBytes: 1000, ServerReadBytes: 1000},
		{uid, "0:66"}: {ReadBytes: 150, FaultReadBytes: 400, ServerReadBytes: 520, MajorFaults: 7},
		{uid, "0:70"}: {WriteBytes: 9},
	}
	check := func(sums []PodIO) {
		t.Helper()
		if len(sums) != len(want) {
			t.Fatalf("%d sums, want %d: %+v", len(sums), len(want), sums)
		}
		for _, s := range sums {
			if w := want[[2]string{s.PodUID, s.Device}]; s.Counters != w {
				t.Errorf("pod %q on %s: %+v, want %+v", s.PodUID, s.Device, s.Counters, w)
			}
		}
	}
	check(sums)

	// Container 2 ends and container 3 reads; a minute on, Sum walks again.
	if err := os.Remove(c2); err != nil {
		t.Fatal(err)
	}
	next := counts()
	next[Key{inode(t, c3), "0:66"}] = Counters{ReadBytes: 1}
	sums, gone = a.Sum(now.Add(RewalkInterval), next)
	if len(gone) != 1 || gone[0] != id2 {
		t.Fatalf("gone %v, want [%d]", gone, id2)
	}
	want[[2]string{uid, "0:66"}] = Counters{ReadBytes: 151, FaultReadBytes: 400, ServerReadBytes: 520, MajorFaults: 7}
	check(sums)
	// Before Collector.Forget took it out, the kernel's table still holds container 2:
	// it is not counted twice.
	sums, _ = a.Sum(now.Add(RewalkInterval+MinWalkInterval), next)
	check(sums)

	// The pod ends: its series go, the node's stay.
	for _, d := range []string{c1, c3, pod} {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	sums, gone = a.Sum(now.Add(2*RewalkInterval), map[Key]Counters{
		{idSvc, "0:66"}:          {ReadBytes: 1000, ServerReadBytes: 1000},
		{inode(t, svc2), "0:70"}: {ReadBytes: 3},
	})
	if len(gone) != 2 {
		t.Errorf("gone %v, want containers 1 and 3", gone)
	}
	want = map[[2]string]Counters{
		{"", "0:66"}: {ReadBytes: 1000, ServerReadBytes: 1000},
		{"", "0:70"}: {ReadBytes: 3},
	}
	check(sums)
}
