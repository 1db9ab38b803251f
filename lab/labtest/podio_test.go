//go:build lab

package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/readahead"
)

// TestPodIO loads the per-pod NFS I/O collector on the guest's kernel and has three
// pod-named cgroups read: pod A 64 MiB with read(2) and pod B 128 MiB through a mapping
// (fio's mmap engine), both on one superblock, and pod C 32 MiB with read(2) on another
// export. Each pod's figures must match what it read within 5 %, the pods' READ bytes
// on the shared superblock must sum to its mountstats READ payload within 5 %, and pod C
// must show only on its own superblock. It logs the tracepoints' format files (the
// layouts tracefs_test.go's fixtures come from).
func TestPodIO(t *testing.T) {
	RequireGuest(t)
	tracefs := Tracefs(t)
	for _, ev := range []string{"nfs_initiate_read", "nfs_readpage_done"} {
		b, _ := os.ReadFile(filepath.Join(tracefs, "events", "nfs", ev, "format"))
		t.Logf("%s format:\n%s", ev, b)
	}
	shared := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576"})
	other := Mount(t, MountSpec{Version: "4.2", Export: ExportDisk, Options: "rsize=1048576"})
	if shared.Device == other.Device {
		t.Fatalf("the two exports share superblock %s", shared.Device)
	}
	a := layout(t, shared.Dir, 1, 64)[0]
	b := filepath.Join(shared.Dir, "mapped")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+b, "bs=1M", "count=128", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	t.Cleanup(func() { os.Remove(b) })
	c := filepath.Join(other.Dir, "c")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+c, "bs=1M", "count=32", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	t.Cleanup(func() { os.Remove(c) })
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}

	col, err := podio.Load(tracefs)
	if err != nil {
		t.Fatalf("loading the collector: %v", err)
	}
	defer col.Close()
	if len(col.Missing) > 0 {
		t.Fatalf("parts not loaded on this kernel: %v", col.Missing)
	}
	t.Logf("variants: %v", col.Variants)

	cg := Cgroup2(t)
	const (
		uidA = "7b1c2d3e-0000-4000-8000-00000000000a"
		uidB = "7b1c2d3e-0000-4000-8000-00000000000b"
		uidC = "7b1c2d3e-0000-4000-8000-00000000000c"
	)
	_, server0 := ReadBytes(t, shared.Dir)
	run := func(uid, script string) {
		dir := PodCgroup(t, cg, "kubepods/besteffort/pod"+uid+"/cri-containerd-0123456789abcdef")
		out, err := exec.Command("sh", "-c", "echo $$ > "+ShellQuote(dir+"/cgroup.procs")+" && "+script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", script, err, out)
		}
	}
	start := time.Now()
	run(uidA, "dd if="+a+" of=/dev/null bs=64k status=none")
	run(uidB, "fio --name=mapped --rw=read --bs=1M --ioengine=mmap --fadvise_hint=0 --filename="+b+" --output=/dev/null")
	run(uidC, "dd if="+c+" of=/dev/null bs=1M status=none")
	t.Logf("readers took %s", time.Since(start).Round(time.Millisecond))
	_, server1 := ReadBytes(t, shared.Dir)

	counts, dropped, err := col.Read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d (cgroup, superblock) entries", len(counts))
	for k, v := range counts {
		t.Logf("cgroup %d on %s: %+v", k.Cgroup, k.Device, v)
	}
	if dropped != 0 {
		t.Errorf("%d events dropped", dropped)
	}
	// A cgroup2 hierarchy mounted at <root>/sys/fs/cgroup stands for the host's.
	root := t.TempDir()
	hostCgroup := filepath.Join(root, "sys", "fs", "cgroup")
	if err := os.MkdirAll(hostCgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", cg, hostCgroup).CombinedOutput(); err != nil {
		t.Fatalf("bind-mounting the cgroup hierarchy: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", hostCgroup).Run() })
	sums, _ := podio.NewAttributor(hostfs.Root(root)).Sum(time.Now(), counts)
	got := map[[2]string]podio.Counters{}
	for _, s := range sums {
		t.Logf("pod %q on %s: %+v", s.PodUID, s.Device, s.Counters)
		got[[2]string{s.PodUID, s.Device}] = s.Counters
	}
	const mib = 1 << 20
	near := func(what string, got, want uint64) {
		t.Helper()
		if d := float64(got) - float64(want); d > 0.05*float64(want) || d < -0.05*float64(want) {
			t.Errorf("%s: %d bytes, want %d within 5 %%", what, got, want)
		}
	}
	pa, pb, pc := got[[2]string{uidA, shared.Device}], got[[2]string{uidB, shared.Device}], got[[2]string{uidC, other.Device}]
	near("pod A read(2)", pa.ReadBytes, 64*mib)
	near("pod A READ payload", pa.ServerReadBytes, 64*mib)
	near("pod B READ payload in faults", pb.FaultReadBytes, 128*mib)
	near("pod C read(2)", pc.ReadBytes, 32*mib)
	if pb.ReadBytes != 0 || pb.MajorFaults == 0 {
		t.Errorf("pod B, which only mapped its file: read(2) %d bytes, %d major faults", pb.ReadBytes, pb.MajorFaults)
	}
	if pa.FaultReadBytes != 0 {
		t.Errorf("pod A, which only read(2): %d bytes read in faults", pa.FaultReadBytes)
	}
	if _, ok := got[[2]string{uidC, shared.Device}]; ok {
		t.Errorf("pod C counted on %s, which it never read", shared.Device)
	}
	var sum uint64
	for _, s := range sums {
		if s.Device == shared.Device {
			sum += s.ServerReadBytes
		}
	}
	near("pods' READ payload against mountstats", sum, server1-server0)
	if pa.ReadLatency.Count() != pa.ReadRPCs || pa.ReadRPCs == 0 {
		t.Errorf("pod A: %d READs, %d in the latency buckets", pa.ReadRPCs, pa.ReadLatency.Count())
	}
}

// TestAgentPodIO runs `nfstune agent --pod-io` on the guest's kernel and has a pod-named
// cgroup below the guest's /sys/fs/cgroup read 64 MiB with read(2): /metrics must show
// the pod's bytes (within 5 %), and the collector's three parts loaded.
func TestAgentPodIO(t *testing.T) {
	RequireGuest(t)
	HostCgroup(t)
	Tracefs(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576"})
	file := layout(t, m.Dir, 1, 64)[0]
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	const listen = "127.0.0.1:9486"
	StartAgent(t, "--pod-io", "--listen", listen, "--min-scrape-interval", "0", "--observe")
	url := "http://" + listen + "/metrics"
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		if scrapeSeries(t, url, `nfstune_pod_io_collector_part{part="rpc"}`) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not load within 60 s:\n%s", grepMetrics(scrape(t, url), "nfstune_pod_io"))
		}
	}
	for _, part := range podio.Parts {
		if v := scrapeSeries(t, url, `nfstune_pod_io_collector_part{part="`+string(part)+`"}`); v != 1 {
			t.Errorf("part %s: %v, want 1", part, v)
		}
	}
	const uid = "7b1c2d3e-0000-4000-8000-0000000000aa"
	dir := PodCgroup(t, "/sys/fs/cgroup", "kubepods/besteffort/pod"+uid+"/cri-containerd-0123456789abcdef")
	if out, err := exec.Command("sh", "-c", "echo $$ > "+ShellQuote(dir+"/cgroup.procs")+" && dd if="+file+" of=/dev/null bs=64k status=none").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	series := `nfstune_pod_read_bytes_total{device="` + m.Device + `",pod_uid="` + uid + `",source="application"}`
	// A cgroup new to the agent is named once it walks the cgroup tree again, at most
	// podio.MinWalkInterval after its first reading: until then it is not counted.
	got := -1.0
	for deadline := time.Now().Add(3 * podio.MinWalkInterval); got < 0 && time.Now().Before(deadline); time.Sleep(time.Second) {
		got = scrapeSeries(t, url, series)
	}
	if want := float64(64 << 20); got < 0.95*want || got > 1.05*want {
		t.Errorf("%s = %v, want %v within 5 %%\n%s", series, got, want, grepMetrics(scrape(t, url), "nfstune_pod_"))
	}
}

func grepMetrics(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPodIOMappedOverRead measures what the per-pod collector tells about readers of a
// mapped file in a 64 MiB memory cgroup, at read-ahead 15360 and 128 KiB: the READ payload
// their faults started per 64 KiB of read faults (readahead.FaultEvidence.OverRead). A reader in order
// touches what its faults bring in; one reading 16 KiB at random offsets touches a few
// pages of each window. The test asserts only that the random reader's figure at 15360
// KiB is over readahead.MappedRandomOverRead and the in-order reader's under it, and that
// at both windows the random reader's read faults miss the page cache (major faults) at a
// share of readahead.RandomMissShare or more of the faults past fault-around, and the
// in-order reader's below it: ratios, not
// rates, which the host's load does not set.
func TestPodIOMappedOverRead(t *testing.T) {
	RequireGuest(t)
	tracefs := Tracefs(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576,nosharecache"})
	file := layout(t, m.Dir, 1, 256)[0]
	col, err := podio.Load(tracefs)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	cg := Cgroup2(t)
	if err := os.WriteFile(filepath.Join(cg, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		name   string
		ra     int
		random bool
		c      podio.Counters
	}
	var results []result
	for i, tt := range []struct {
		rw     string
		random bool
		ra     int
	}{{"randread", true, 15360}, {"read", false, 15360}, {"randread", true, 128}, {"read", false, 128}} {
		setReadAheadKB(t, m.Device, tt.ra)
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := PodCgroup(t, cg, fmt.Sprintf("reader%d", i))
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte("64M"), 0o644); err != nil {
			t.Fatal(err)
		}
		id := cgroupID(t, dir)
		script := "exec fio --name=mapped --rw=" + tt.rw + " --bs=16k --ioengine=mmap --fadvise_hint=0 --time_based --runtime=15 --filename=" + file + " --output=/dev/null"
		if out, err := exec.Command("sh", "-c", "echo $$ > "+ShellQuote(dir+"/cgroup.procs")+" && "+script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", script, err, out)
		}
		counts, _, err := col.Read()
		if err != nil {
			t.Fatal(err)
		}
		c := counts[podio.Key{Cgroup: id, Device: m.Device}]
		results = append(results, result{tt.rw, tt.ra, tt.random, c})
		t.Logf("%s at %d KiB: %d major faults, %d faults, %d read faults (map_pages), %.1f MiB in fault READs, %.1f MiB read(2): mapped over-read %.2f, miss share %.2f",
			tt.rw, tt.ra, c.MajorFaults, c.Faults, c.MapFaults, float64(c.FaultReadBytes)/(1<<20), float64(c.ReadBytes)/(1<<20), mappedOverRead(c), missShare(c))
	}
	for _, r := range results {
		got := mappedOverRead(r.c)
		switch share := missShare(r.c); {
		case r.random && (share < readahead.RandomMissShare || r.c.MajorFaults < readahead.MinRandomMajorFaults):
			t.Errorf("%s at %d KiB: %d major faults, a share %.2f of the faults past fault-around, want %d or more and at least %v", r.name, r.ra, r.c.MajorFaults, share, readahead.MinRandomMajorFaults, readahead.RandomMissShare)
		case !r.random && share >= readahead.RandomMissShare:
			t.Errorf("%s at %d KiB: %d major faults, a share %.2f of the faults past fault-around, want below %v", r.name, r.ra, r.c.MajorFaults, share, readahead.RandomMissShare)
		}
		switch {
		case r.c.FaultReadBytes == 0:
			t.Errorf("%s at %d KiB: no READs in faults", r.name, r.ra)
		case r.random && r.ra == 15360 && got <= readahead.MappedRandomOverRead:
			t.Errorf("%s at %d KiB: mapped over-read %.2f, want above %v", r.name, r.ra, got, readahead.MappedRandomOverRead)
		case !r.random && got > readahead.MappedRandomOverRead:
			t.Errorf("%s at %d KiB: mapped over-read %.2f, want at most %v", r.name, r.ra, got, readahead.MappedRandomOverRead)
		}
	}
}

// mappedOverRead is the collector's counters as the classifier reads them.
func mappedOverRead(c podio.Counters) float64 {
	return readahead.FaultEvidence{ReadBytes: c.FaultReadBytes, Faults: max(c.MapFaults, c.Faults)}.OverRead()
}

// missShare is the share of the faults past fault-around that were major faults, as the
// classifier counts them.
func missShare(c podio.Counters) float64 {
	return readahead.FaultEvidence{MajorFaults: c.MajorFaults, FilemapFaults: c.Faults}.MissShare()
}

// cgroupID is the cgroup v2 ID of the cgroup at dir: its directory's inode number.
func cgroupID(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestAgentPodIOWithoutPrivilege runs `nfstune agent --pod-io` without CAP_BPF,
// CAP_PERFMON and CAP_SYS_ADMIN (setpriv takes them out of its bounding set): the agent
// logs once why the collector is off, exports the collector's parts at 0, and goes on
// serving the mounts' metrics.
func TestAgentPodIOWithoutPrivilege(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Version: "4.2"})
	const listen = "127.0.0.1:9487"
	var logs strings.Builder
	agent := exec.Command("setpriv", "--bounding-set=-bpf,-perfmon,-sys_admin", "--inh-caps=-bpf,-perfmon,-sys_admin",
		Bin(t), "agent", "--pid", "0", "--pod-io", "--listen", listen, "--min-scrape-interval", "0", "--observe")
	agent.Stdout, agent.Stderr = &logs, &logs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		_ = agent.Wait()
	})
	url := "http://" + listen + "/metrics"
	// Until the agent listens, and has tried the collector, the series is absent (-1).
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if scrapeSeries(t, url, `nfstune_pod_io_collector_part{part="rpc"}`) >= 0 {
			break
		}
	}
	body := scrape(t, url)
	for _, part := range podio.Parts {
		if v := scrapeSeries(t, url, `nfstune_pod_io_collector_part{part="`+string(part)+`"}`); v != 0 {
			t.Errorf("part %s: %v without the capabilities, want 0", part, v)
		}
	}
	if !slices.ContainsFunc(strings.Split(body, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "nfstune_mount_info{") && strings.Contains(l, `device="`+m.Device+`"`)
	}) {
		t.Errorf("no nfstune_mount_info of %s without the collector:\n%s", m.Device, grepMetrics(body, "nfstune_mount_info"))
	}
	scrape(t, url) // a second scrape: the reason is still logged once
	_ = agent.Process.Signal(syscall.SIGTERM)
	_ = agent.Wait()
	if n := strings.Count(logs.String(), "per-pod NFS I/O is off"); n != 1 {
		t.Errorf("logged %d times that the collector is off, want once:\n%s", n, logs.String())
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "per-pod NFS I/O is off") {
			t.Logf("the agent's reason: %s", l)
		}
	}
}
