//go:build lab

// Package podiocost measures what the agent's per-pod NFS I/O collector (`nfstune agent
// --pod-io`, internal/podio) costs on the lab's real kernel, in one boot: a sequential
// reader and 16 KiB random reads on one NFS mount, each run without an agent, under
// `nfstune agent --observe`, and under `nfstune agent --observe --pod-io`, alternately,
// for several rounds. It reports the readers' throughput with the collector against
// without it, and the agent's CPU per 10,000 READs a second (make podio-overhead). The
// eBPF programs run in the readers' context, so their cost shows in the throughput; the
// agent's own CPU is the maps' reading and the series' export. The programs' own run time
// is read from the kernel (BPF_ENABLE_STATS, held over the whole test): what they cost
// each READ, whichever way the host's load moves the throughput.
//
// Nothing here fails on a rate: the emulating host's load moves the figures from minute
// to minute. The test fails only when a run did not happen as described: the collector
// not loaded, or not counting the readers' bytes.
package podiocost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/lab/labtest"
)

const (
	// fileMiB is the file both workloads read: five times the readers' memory limit, so
	// that what they read comes from the server, not from a cache a previous run left.
	fileMiB = 320
	// memoryMax is the readers' pod cgroup's memory.max, which bounds their page cache.
	memoryMax = "64M"
	// runtime is each measured run; scrapeEvery is how often /metrics is read meanwhile
	// (more often than Prometheus's usual 15 to 30 s: the agent reads the collector's maps
	// on each scrape, so this errs towards the agent's cost).
	runtime     = 20 * time.Second
	scrapeEvery = 5 * time.Second
	// settle is how long the agent runs, scraped, before a measured run: its start (the
	// first inventory and reconcile, the collector's load) is not what it costs a node.
	settle = 10 * time.Second
	// readAheadKB is the kernel's default read-ahead (VM_READAHEAD_PAGES in
	// include/linux/mm.h), set on the mount for every run.
	readAheadKB = 128
	listen      = "127.0.0.1:9488"
	podUID      = "7b1c2d3e-0000-4000-8000-0000000000c0"
	// userHZ is the unit of utime and stime in /proc/<pid>/stat (proc(5): clock ticks,
	// sysconf(_SC_CLK_TCK), which is USER_HZ, 100 on every Linux architecture nfstune
	// builds for).
	userHZ = 100
)

// arm is one way a workload runs: without an agent, or under the agent with args.
type arm struct {
	name  string
	agent bool
	args  []string
}

var arms = []arm{
	{name: "no agent"},
	{name: "agent", agent: true, args: []string{"--observe"}},
	{name: "agent --pod-io", agent: true, args: []string{"--observe", "--pod-io"}},
}

// workload is one fio job line, run in the readers' pod cgroup.
type workload struct {
	name, description, fio string
}

// run is one measured run's figures.
type run struct {
	workload, arm string
	round         int
	mibps, iops   float64
	// reads is the mount's READ operations in the run, from mountstats; fioTime is fio's
	// own run time of the reads, in which they were sent.
	reads   uint64
	fioTime time.Duration
	// wall is the whole run, fio's start included, over which the agent's CPU is taken.
	wall time.Duration
	// cpu is the agent's utime+stime over the run; zero without an agent.
	cpu time.Duration
	// progTime and progRuns are the collector's programs' run time and runs over fio's
	// run, as the kernel counts them (bpf_prog_info run_time_ns and run_cnt); zero
	// without the collector.
	progTime time.Duration
	progRuns uint64
}

// readsPerSec is the READ rate the readers reached.
func (r run) readsPerSec() float64 { return float64(r.reads) / r.fioTime.Seconds() }

// cpuShare is the agent's CPU over the run, in CPUs (1 is one CPU the whole run).
func (r run) cpuShare() float64 { return r.cpu.Seconds() / r.wall.Seconds() }

// per10k is the agent's CPU share per 10,000 READs a second.
func (r run) per10k() float64 {
	if r.reads == 0 {
		return 0
	}
	return r.cpuShare() / (r.readsPerSec() / 10000)
}

// progPerRead is the collector's programs' run time per READ the mount sent.
func (r run) progPerRead() time.Duration {
	if r.reads == 0 {
		return 0
	}
	return r.progTime / time.Duration(r.reads)
}

// progPer10k is the CPU, in CPUs, that the collector's programs take at 10,000 READs a
// second, at this run's cost per READ: 10,000 x its seconds per READ.
func (r run) progPer10k() float64 { return 10000 * r.progPerRead().Seconds() }

func TestPodIOOverhead(t *testing.T) {
	labtest.RequireGuest(t)
	// The agent attributes cgroups to pods from /sys/fs/cgroup; the collector reads tracefs.
	labtest.HostCgroup(t)
	labtest.Tracefs(t)
	m := labtest.Mount(t, labtest.MountSpec{Version: "4.2"})
	before := labtest.ReadAheadKB(t, m.Device)
	setReadAhead(t, m.Device, readAheadKB)
	t.Cleanup(func() { setReadAhead(t, m.Device, before) })
	t.Logf("mount %s (%s), rsize %d, read_ahead_kb %d (was %d)", m.Dir, m.Device, rsizeOf(t, m.Dir), readAheadKB, before)

	file := filepath.Join(m.Dir, "data")
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+file, "bs=1M", fmt.Sprintf("count=%d", fileMiB), "conv=fsync", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	t.Cleanup(func() { os.Remove(file) })
	pod := podCgroup(t)
	bin := inMemory(t, labtest.Bin(t))
	enableProgramStats(t)

	secs := int(runtime.Seconds())
	// --invalidate=1 drops the file's pages when fio opens it, fadvise_hint=0 leaves the
	// kernel's read-ahead as it is (buffered reads: the collector counts read(2), not
	// O_DIRECT).
	common := fmt.Sprintf("--ioengine=psync --fadvise_hint=0 --invalidate=1 --time_based --runtime=%d --group_reporting --filename=%s --output-format=json", secs, file)
	workloads := []workload{
		{name: "sequential", description: "one sequential reader, 1 MiB read(2)s", fio: "--name=seq --rw=read --bs=1M --numjobs=1 " + common},
		{name: "random", description: "random 16 KiB read(2)s, 4 jobs", fio: "--name=rand --rw=randread --bs=16k --numjobs=4 " + common},
	}
	if only := os.Getenv("NFSTUNE_LAB_SCENARIOS"); only != "" {
		// One workload, e.g. "sequential": the whole run is about a quarter of an hour.
		workloads = slices.DeleteFunc(workloads, func(w workload) bool { return !slices.Contains(strings.Split(only, ","), w.name) })
		if len(workloads) == 0 {
			t.Fatalf("NFSTUNE_LAB_SCENARIOS=%q names none of the workloads (sequential, random)", only)
		}
		t.Logf("workloads %s only (NFSTUNE_LAB_SCENARIOS)", only)
	}
	rounds := labtest.EnvCount(t, "NFSTUNE_LAB_ROUNDS", 4)
	t.Logf("%d rounds; each: every workload without an agent, under the agent, under the agent with --pod-io, %s a run, the agent scraped for %s before it, /metrics read every %s; file %d MiB, readers in a %s memory cgroup",
		rounds, runtime, settle, scrapeEvery, fileMiB, memoryMax)

	var runs []run
	for round := 1; round <= rounds; round++ {
		for _, w := range workloads {
			// Each round starts with the next arm, so that no arm always runs first or
			// last in its workload's three.
			for i := range arms {
				a := arms[(i+round-1)%len(arms)]
				r := measure(t, bin, m, pod, w, a)
				r.round = round
				t.Logf("round %d, %s, %s: %.1f MiB/s, %.0f IOPS, %d READs in fio's %s (%.0f/s), agent CPU %s in %s (%.2f %% of one CPU, %.3f %% per 10,000 READs/s); collector's programs %d runs, %s (%s per READ)",
					round, w.name, a.name, r.mibps, r.iops, r.reads, r.fioTime, r.readsPerSec(), r.cpu, r.wall.Round(10*time.Millisecond), 100*r.cpuShare(), 100*r.per10k(),
					r.progRuns, r.progTime, r.progPerRead())
				runs = append(runs, r)
			}
		}
	}
	table := render(workloads, runs, kernelRelease(t), rounds)
	t.Logf("\n%s", table)
	out := filepath.Join("/lab/lab/.cache", "podio-overhead-"+kernelRelease(t)+".md")
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("writing %s: %v", out, err)
	} else {
		t.Logf("table written to %s (lab/.cache on the host)", out)
	}
}

// measure runs w once under a: the page cache dropped (the export is a tmpfs, which keeps
// its pages), the agent started and ready, then fio, with the agent's CPU and the mount's
// READs counted over fio's run.
func measure(t *testing.T, bin string, m labtest.Mounted, pod string, w workload, a arm) run {
	t.Helper()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run{workload: w.name, arm: a.name}
	var pid int
	var stopScrapes func()
	var progs []*ebpf.Program
	if a.agent {
		before := programIDs(t)
		var stop func()
		pid, stop = startAgent(t, bin, a.args)
		defer stop()
		if slices.Contains(a.args, "--pod-io") {
			progs = newPrograms(t, before)
			defer closeAll(progs)
		}
		stopScrapes = scrapeLoop(t)
		time.Sleep(settle)
	}
	out := filepath.Join(t.TempDir(), "fio.json")
	cpu0 := agentCPU(t, pid)
	prog0, runs0 := programStats(t, progs)
	reads0 := readOps(t, m.Dir)
	start := time.Now()
	cmd := exec.Command("sh", "-c", "echo $$ > "+labtest.ShellQuote(pod+"/cgroup.procs")+" && exec fio "+w.fio+" --output="+labtest.ShellQuote(out))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fio %s: %v: %s", w.fio, err, b)
	}
	r.wall = time.Since(start)
	r.reads = readOps(t, m.Dir) - reads0
	r.cpu = agentCPU(t, pid) - cpu0
	prog1, runs1 := programStats(t, progs)
	r.progTime, r.progRuns = prog1-prog0, runs1-runs0
	if stopScrapes != nil {
		stopScrapes()
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	o, err := fio.Parse(b)
	if err != nil || len(o.Jobs) != 1 {
		t.Fatalf("fio's result %s: %v (%d job entries, want 1 with --group_reporting)\n%s", out, err, len(o.Jobs), b)
	}
	r.mibps = float64(o.Jobs[0].Read.BWBytes) / (1 << 20)
	r.iops = o.Jobs[0].Read.IOPS
	// The reads' run time, the longest job's: with --group_reporting, job_runtime is the
	// jobs' sum.
	r.fioTime = time.Duration(o.Jobs[0].Read.Runtime) * time.Millisecond
	if r.fioTime <= 0 {
		t.Fatalf("fio's result %s: read runtime %d ms", out, o.Jobs[0].Read.Runtime)
	}
	if slices.Contains(a.args, "--pod-io") {
		// The collector must have counted the readers: a run it slept through measures
		// nothing.
		series := `nfstune_pod_read_bytes_total{device="` + m.Device + `",pod_uid="` + podUID + `",source="application"}`
		if v := scrapeSeries(t, series); v <= 0 {
			t.Fatalf("%s = %v after the run: the collector counted nothing", series, v)
		}
		if r.progRuns == 0 || r.progTime <= 0 {
			t.Fatalf("the collector's %d programs: %d runs, %s over the run: the kernel's statistics counted nothing", len(progs), r.progRuns, r.progTime)
		}
	}
	return r
}

// enableProgramStats turns on the kernel's run time and run count of every BPF program
// (BPF_ENABLE_STATS, Linux 5.8; what sysctl kernel.bpf_stats_enabled=1 does) until the
// test ends. It adds two clock reads to each program's run, which count against the
// collector.
func enableProgramStats(t *testing.T) {
	t.Helper()
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	t.Cleanup(func() { c.Close() })
}

// programIDs returns the IDs of the BPF programs loaded now.
func programIDs(t *testing.T) map[ebpf.ProgramID]bool {
	t.Helper()
	ids := map[ebpf.ProgramID]bool{}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return ids
		}
		if err != nil {
			t.Fatalf("BPF_PROG_GET_NEXT_ID: %v", err)
		}
		ids[next] = true
		id = next
	}
}

// newPrograms opens the programs loaded since before was taken: the agent's collector,
// the only loader in the guest meanwhile.
func newPrograms(t *testing.T, before map[ebpf.ProgramID]bool) []*ebpf.Program {
	t.Helper()
	var progs []*ebpf.Program
	for id := range programIDs(t) {
		if before[id] {
			continue
		}
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			closeAll(progs)
			t.Fatalf("program %d: %v", id, err)
		}
		progs = append(progs, p)
	}
	if len(progs) == 0 {
		t.Fatal("the agent with --pod-io loaded no BPF program")
	}
	return progs
}

func closeAll(progs []*ebpf.Program) {
	for _, p := range progs {
		p.Close()
	}
}

// programStats sums the programs' run time and run count since they were loaded.
func programStats(t *testing.T, progs []*ebpf.Program) (time.Duration, uint64) {
	t.Helper()
	var d time.Duration
	var n uint64
	for _, p := range progs {
		s, err := p.Stats()
		if err != nil {
			t.Fatalf("program statistics: %v", err)
		}
		d += s.Runtime
		n += s.RunCount
	}
	return d, n
}

// podCgroup makes the readers' cgroup, named as kubelet names a container's, in a pod
// cgroup whose memory.max is memoryMax (the memory controller enabled on the way down).
func podCgroup(t *testing.T) string {
	t.Helper()
	const root = "/sys/fs/cgroup"
	podRel := "kubepods/besteffort/pod" + podUID
	dir := labtest.PodCgroup(t, root, podRel+"/cri-containerd-0123456789abcdef")
	for _, d := range []string{root, root + "/kubepods", root + "/kubepods/besteffort"} {
		if err := os.WriteFile(d+"/cgroup.subtree_control", []byte("+memory"), 0o644); err != nil {
			t.Fatalf("enabling the memory controller in %s: %v", d, err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, podRel, "memory.max"), []byte(memoryMax), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startAgent starts the agent with args and waits until /metrics answers and, with
// --pod-io, every part of the collector is loaded. It returns the agent's pid and the
// function that stops it.
func startAgent(t *testing.T, bin string, args []string) (int, func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"agent", "--pid", "0", "--listen", listen, "--min-scrape-interval", "0"}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	t.Cleanup(stop)
	// The mounts' series come with the first inventory; the collector's parts with its
	// first read.
	ready := func() bool { return scrapePrefix(t, "nfstune_mount_info") }
	if slices.Contains(args, "--pod-io") {
		ready = func() bool { return scrapeSeries(t, `nfstune_pod_io_collector_part{part="rpc"}`) == 1 }
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(time.Second) {
		if ready() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent %v: not ready on /metrics within 60 s", args)
		}
	}
	if slices.Contains(args, "--pod-io") {
		for _, part := range podio.Parts {
			if v := scrapeSeries(t, `nfstune_pod_io_collector_part{part="`+string(part)+`"}`); v != 1 {
				t.Fatalf("collector part %s: %v, want 1 (loaded)", part, v)
			}
		}
	}
	return cmd.Process.Pid, stop
}

// scrapeLoop reads /metrics every scrapeEvery, as Prometheus would, until the returned
// function is called.
func scrapeLoop(t *testing.T) func() {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(scrapeEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := scrape(); err != nil {
					t.Logf("scrape: %v", err)
				}
			}
		}
	})
	return sync.OnceFunc(func() { close(done); wg.Wait() })
}

func scrape() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// scrapeSeries returns the value of one series on /metrics; -1 when the scrape fails or
// the series is absent.
func scrapeSeries(t *testing.T, series string) float64 {
	t.Helper()
	s, err := scrape()
	if err != nil {
		return -1
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// scrapePrefix reports whether /metrics answers with a series named name (any labels).
func scrapePrefix(t *testing.T, name string) bool {
	t.Helper()
	s, err := scrape()
	if err != nil {
		return false
	}
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}

// agentCPU returns the process's utime+stime, all its threads (proc(5): fields 14 and 15
// of /proc/<pid>/stat); zero for pid 0 (no agent).
func agentCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name in parentheses may hold spaces: the fields count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, v := range f[11:13] { // fields 14 and 15: f[0] is field 3
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q: %v", pid, s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// readOps returns the mount's READ operations since it was mounted: the first field of
// its per-op "READ:" line in /proc/self/mountstats (fs/nfs/iostat.h, rpc_iostats: ops),
// read independently of nfstune.
func readOps(t *testing.T, dir string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "device ") {
			in = strings.Contains(line, " mounted on "+dir+" with fstype nfs")
			continue
		}
		if f := strings.Fields(line); in && len(f) >= 2 && f[0] == "READ:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("mountstats %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no READ: line for %s in mountstats", dir)
	return 0
}

func setReadAhead(t *testing.T, dev string, kb int) {
	t.Helper()
	if err := os.WriteFile("/sys/class/bdi/"+dev+"/read_ahead_kb", []byte(strconv.Itoa(kb)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rsizeOf returns the effective rsize of the mount at dir, from mountinfo; 0 when absent.
func rsizeOf(t *testing.T, dir string) int {
	t.Helper()
	for _, e := range labtest.NFSMounts(t) {
		if e.MountPoint != dir {
			continue
		}
		n, _ := strconv.Atoi(e.Options["rsize"])
		return n
	}
	return 0
}

// inMemory copies the binary at path to a tmpfs, as a node has its agent on a local disk:
// the guest's own files are the host's, over 9p, whose page faults would count in the
// agent's CPU.
func inMemory(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "podiocost-bin", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs for the agent: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

func kernelRelease(t *testing.T) string {
	t.Helper()
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// medianOf is the median of f over the runs of one workload and arm.
func medianOf(runs []run, w, a string, f func(run) float64) float64 {
	var xs []float64
	for _, r := range runs {
		if r.workload == w && r.arm == a {
			xs = append(xs, f(r))
		}
	}
	return median(xs)
}

// render writes the table: per workload, the medians of each arm's throughput, the
// collector's ratio to no agent and to the agent without it, the READ rate, and the
// agent's CPU per 10,000 READs a second without and with the collector.
func render(workloads []workload, runs []run, kernel string, rounds int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Per-pod NFS I/O collector overhead, Linux %s, one boot, %d runs of %s per cell (medians), alternately, each round starting with the next arm\n\n", kernel, rounds, runtime)
	fmt.Fprintf(&b, "| workload | MiB/s: no agent / agent / agent --pod-io | --pod-io / no agent | --pod-io / agent | READs/s: no agent / agent / --pod-io | agent CPU, %% of one CPU: agent / --pod-io | per 10,000 READs/s: agent / --pod-io | collector's programs: runs per READ, time per READ, %% of one CPU at 10,000 READs/s |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	mibps := func(r run) float64 { return r.mibps }
	runsPerRead := func(r run) float64 { return float64(r.progRuns) / float64(max(r.reads, 1)) }
	perRead := func(r run) float64 { return float64(r.progPerRead()) }
	for _, w := range workloads {
		none, agent, pio := medianOf(runs, w.name, arms[0].name, mibps), medianOf(runs, w.name, arms[1].name, mibps), medianOf(runs, w.name, arms[2].name, mibps)
		fmt.Fprintf(&b, "| %s: %s | %.1f / %.1f / %.1f | %.1f %% | %.1f %% | %.0f / %.0f / %.0f | %.2f / %.2f | %.3f / %.3f %% | %.1f, %s, %.3f %% |\n",
			w.name, w.description, none, agent, pio, 100*pio/none, 100*pio/agent,
			medianOf(runs, w.name, arms[0].name, run.readsPerSec), medianOf(runs, w.name, arms[1].name, run.readsPerSec), medianOf(runs, w.name, arms[2].name, run.readsPerSec),
			100*medianOf(runs, w.name, arms[1].name, run.cpuShare), 100*medianOf(runs, w.name, arms[2].name, run.cpuShare),
			100*medianOf(runs, w.name, arms[1].name, run.per10k), 100*medianOf(runs, w.name, arms[2].name, run.per10k),
			medianOf(runs, w.name, arms[2].name, runsPerRead), time.Duration(medianOf(runs, w.name, arms[2].name, perRead)).Round(10*time.Nanosecond),
			100*medianOf(runs, w.name, arms[2].name, run.progPer10k))
	}
	fmt.Fprintf(&b, "\nEach run (round, workload, arm: MiB/s, IOPS, READs/s, agent CPU %% of one CPU; with the collector, its programs' runs and time per READ):\n\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "- %d, %s, %s: %.1f, %.0f, %.0f, %.2f", r.round, r.workload, r.arm, r.mibps, r.iops, r.readsPerSec(), 100*r.cpuShare())
		if r.progRuns > 0 {
			fmt.Fprintf(&b, "; %.1f, %s", float64(r.progRuns)/float64(max(r.reads, 1)), r.progPerRead())
		}
		b.WriteString("\n")
	}
	return b.String()
}
