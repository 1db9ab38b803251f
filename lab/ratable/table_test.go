//go:build lab

// Package ratable measures nfstune with no configuration against fixed read-ahead values on
// the lab's real kernel, in one boot: workloads behind an emulated link, each read with every
// fixed value of a sweep and then under `nfstune agent` with no --config (the built-in
// policy), without and with --pod-io. It writes the table docs/benchmarks.md shows (make
// readahead-table). Throughput and over-read come from the kernel's own counters (mountstats
// bytes: of the mount) or, for reads through mmap, from fio's own count, not from nfstune.
package ratable

import (
	"fmt"
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

	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/lab/labtest"
)

// The link and the workloads. Sizes fit the emulated guest: the files live on the server's
// tmpfs export (half the guest's 5 GiB).
const (
	linkDelay  = 2 * time.Millisecond // 4 ms round trip
	linkRate   = "1gbit"
	seqFiles   = 16
	seqFileMiB = 40  // 16 x 40 MiB for the sequential readers
	randMiB    = 320 // the random readers' file: five times the cgroup's memory
	cgroupMax  = "64M"
	// modelMiB and modelCgroupMax are f's file and its reader's memory limit (scenario f).
	modelMiB       = 768
	modelCgroupMax = "128M"
	// switchPhase is each half of the switching workload, measured whole.
	switchPhase = 60 * time.Second
	agentListen = "127.0.0.1:9479"
)

// The measured windows: each run's measured window starts after warmup (a fixed value) or
// after adaptiveRun (an arm of nfstune: the minute within which it should settle, one rsize
// to the cap being four changes, two intervals each: the change's and a settling one; the
// verdict's interval makes the next). NFSTUNE_LAB_WINDOW and NFSTUNE_LAB_SETTLE shorten
// window and adaptiveRun for a smoke run of the harness, whose rates then say little.
var (
	warmup      = 5 * time.Second
	window      = 30 * time.Second
	adaptiveRun = 60 * time.Second
)

// result is one workload read with one read-ahead setting.
type result struct {
	scenario, setting string
	mibps, overRead   float64
	// podRates are, for a scenario of several pods (scenario.pods), each pod's rate in
	// MiB/s; mibps is the first pod's.
	podRates []float64
	// Arm runs only: the read-ahead at the end, the changes the agent made (from its
	// log), and how long after the start (or the switch) the last one came.
	finalKB  int
	changes  []change
	settled  time.Duration
	switchAt time.Duration
	// begin is when the workload started: change times count from it.
	begin time.Time
	// audit is what the audits said about the pods' shared superblock (scenario.audit).
	audit string
}

// change is one adaptive change, as the agent logged it.
type change struct {
	at           time.Duration
	fromKB, toKB int
	reason       string
}

type scenario struct {
	name, description string
	// run starts the workload and returns a function that stops it; switching workloads
	// run the whole measured time themselves (phases).
	start func(t *testing.T) (stop func())
	// phases, when set, replaces start: the workload runs phase 1 then phase 2, each
	// switchPhase long, and the whole run is measured.
	phases []func(t *testing.T) (stop func())
	// counted, when set, replaces start for a workload whose reads the mount's counters do
	// not see (mmap'd pages are not application bytes): it runs the workload for ramp and
	// then window, and wait returns the bytes the workload read in the window, by its own
	// count.
	counted func(t *testing.T, ramp, window time.Duration) (wait func() uint64)
	// pods, when set, names the pods of a workload of two: the first reads with read(2)
	// (its rate: the mount's application bytes), the second through mmap (its rate:
	// counted's count). Each is compared with its own rate at the untuned 128 KiB.
	pods []string
	// prepare, when set, runs before the scenario's first run.
	prepare func(t *testing.T)
	// audit, when set, starts at the window's start of each arm's run; finish, at its
	// end, returns what the audits say about the pods' shared superblock (sharedPods.audit).
	audit func(t *testing.T) (finish func() string)
}

// untunedKB is the kernel's read-ahead of a new NFS mount: the rate nfstune must not fall
// below for any pod.
const untunedKB = 128

func TestReadAheadTable(t *testing.T) {
	labtest.RequireGuest(t)
	window = envDuration(t, "NFSTUNE_LAB_WINDOW", window)
	adaptiveRun = envDuration(t, "NFSTUNE_LAB_SETTLE", adaptiveRun)
	only := os.Getenv("NFSTUNE_LAB_SCENARIOS") // a part of the table, e.g. "a,b"
	selected := func(name string) bool { return only == "" || slices.Contains(strings.Split(only, ","), name) }
	if selected("g") && window < minTrafficInterval {
		// The agent classifies pods' traffic over at least this long (g's audit).
		t.Fatalf("NFSTUNE_LAB_WINDOW %s: want at least %s", window, minTrafficInterval)
	}
	t.Logf("measured windows: %s after %s (fixed values), after %s (nfstune)", window, warmup, adaptiveRun)
	m := labtest.Mount(t, labtest.MountSpec{Version: "4.2", Options: "rsize=1048576"})
	rsizeKB := rsizeOf(t, m.Dir) / 1024
	before := readAhead(t, m.Device)
	t.Cleanup(func() { setReadAhead(t, m.Device, before) })
	keepLearned(t)

	logExportSpace(t)
	var files []string
	for i := range seqFiles {
		files = append(files, write(t, filepath.Join(m.Dir, fmt.Sprintf("seq%02d", i)), seqFileMiB))
	}
	randFile := write(t, filepath.Join(m.Dir, "random"), randMiB)
	var modelFile string
	if selected("f") {
		modelFile = write(t, filepath.Join(m.Dir, "model"), modelMiB)
	}
	t.Logf("layout: %d files of %d MiB, one of %d MiB and (for f) one of %d MiB on %s", seqFiles, seqFileMiB, randMiB, modelMiB, m.Dir)
	labtest.Link(t, linkDelay, linkRate, 0)
	cg := labtest.MemoryCgroup(t, "nfstune-readahead-table", cgroupMax)
	agentBin := inMemory(t, labtest.Bin(t))
	armList := selectArms(t)
	var baseBin string // the earlier tree's agent, for the base arm
	if slices.ContainsFunc(armList, func(a arm) bool { return a.base }) {
		baseBin = inMemory(t, os.Getenv(labtest.EnvBaseBin))
	}
	if slices.ContainsFunc(armList, func(a arm) bool { return a.podIO }) {
		// The collector names cgroups from the hierarchy at /sys/fs/cgroup and attaches to
		// the nfs trace events.
		labtest.HostCgroup(t)
		labtest.Tracefs(t)
	}

	seqOne := func(t *testing.T) func() { return labtest.StartReaders(t, "", labtest.SeqReaderLoop(files)) }
	// NFSTUNE_LAB_STAGGER starts b's readers out of step: reader i reads the first pass of
	// its file from i/16 of the way in, so the sixteen open their files at different times.
	// Without it they start together, open their next files together and ramp their
	// windows together for the first minute or so.
	stagger := os.Getenv("NFSTUNE_LAB_STAGGER") != ""
	if stagger {
		t.Logf("b's readers start out of step (NFSTUNE_LAB_STAGGER)")
	}
	seq16In := func(t *testing.T, cgroup string, files []string) func() {
		var readers []string
		for i, f := range files {
			loop := labtest.SeqReaderLoop([]string{f})
			if stagger {
				skip := i * seqFileMiB * 16 / len(files) // 64 KiB blocks
				loop = fmt.Sprintf("dd if=%s iflag=nocache count=0 status=none; dd if=%s of=/dev/null bs=64k skip=%d status=none; %s",
					labtest.ShellQuote(f), labtest.ShellQuote(f), skip, loop)
			}
			readers = append(readers, "("+loop+") &")
		}
		return labtest.StartReaders(t, cgroup, strings.Join(readers, " ")+" wait")
	}
	seq16 := func(t *testing.T) func() { return seq16In(t, cg, files) }
	random := func(t *testing.T) func() {
		return labtest.StartReaders(t, cg, "exec fio --name=rand --rw=randread --bs=16k --ioengine=psync --numjobs=4 --fadvise_hint=0 --invalidate=1 --time_based --runtime=86400 --filename="+randFile+" --output=/dev/null")
	}
	// e is the random reader a large window hurts: it reads through mmap (a page fault
	// reads around itself with the whole window). Its reads are not application bytes, so
	// its rates are fio's own count.
	mmapRandomIn := func(cgroup, file string) func(t *testing.T, ramp, window time.Duration) func() uint64 {
		return func(t *testing.T, ramp, window time.Duration) func() uint64 {
			return fioCounted(t, cgroup, 4, "--name=mmap --rw=randread --bs=16k --ioengine=mmap --group_reporting --fadvise_hint=0 --invalidate=1 --filename="+file, ramp, window)
		}
	}
	// f is a model load: one reader that maps a large file and copies it out in order, as
	// loaders of model weights (safetensors, GGUF) read through mmap, with no access advice
	// (fadvise_hint=0). Its limit is generous for the reads: far above any window's pages
	// (at most 15 x rsize), so read-ahead never pushes out a page before it is read. It is
	// well below the file's size only so that each of fio's passes (time_based wraps around
	// the file, whose pages invalidate=1 drops only before the first) reads from the server
	// as a first load does: reclaim keeps some of a pass's mapped pages active, which the
	// next pass then finds in the cache (over-read below 1.00 shows them), and a smaller
	// share of the file the smaller the limit.
	modelCg := ""
	if selected("f") {
		modelCg = labtest.MemoryCgroup(t, "nfstune-readahead-model", modelCgroupMax)
	}
	modelLoad := func(t *testing.T, ramp, window time.Duration) func() uint64 {
		return fioCounted(t, modelCg, 1, "--name=model --rw=read --bs=1M --ioengine=mmap --fadvise_hint=0 --invalidate=1 --filename="+modelFile, ramp, window)
	}
	// g is two pods on one superblock at once, as kubelet lays them out (pods.go): b's
	// readers in one pod's 64 MiB cgroup, e's in another's, each through its own volume
	// path of the same mount.
	pods := &sharedPods{mount: m}
	both := func(t *testing.T, ramp, window time.Duration) func() uint64 {
		// The mapped pod first: fioCounted returns once its jobs run, and the streaming
		// pod's readers start within a second of them.
		wait := mmapRandomIn(pods.cgroups[1], pods.paths([]string{randFile}, 1)[0])(t, ramp, window)
		stopB := seq16In(t, pods.cgroups[0], pods.paths(files, 0))
		return func() uint64 {
			defer stopB()
			return wait()
		}
	}
	scenarios := []scenario{
		{name: "a", description: "one sequential reader, 64 KiB reads", start: seqOne},
		{name: "b", description: fmt.Sprintf("16 sequential readers in a %s memory cgroup", cgroupMax), start: seq16},
		{name: "c", description: fmt.Sprintf("random 16 KiB reads (4 jobs) over %d MiB in the %s cgroup", randMiB, cgroupMax), start: random},
		{name: "d", description: fmt.Sprintf("c for %s, then a for %s", switchPhase, switchPhase), phases: []func(*testing.T) func(){random, seqOne}},
		{name: "e", description: fmt.Sprintf("random 16 KiB reads through mmap (4 jobs) over %d MiB in the %s cgroup; rates by fio's count", randMiB, cgroupMax), counted: mmapRandomIn(cg, randFile)},
		{name: "f", description: fmt.Sprintf("a model load: one reader of a %d MiB file through mmap, 1 MiB copies, in a %s cgroup; rates by fio's count", modelMiB, modelCgroupMax), counted: modelLoad},
		{name: "g", description: fmt.Sprintf("two pods on one superblock at once: b in one %s pod, e in another; b's rate by application bytes, e's by fio's count", cgroupMax),
			counted: both, pods: []string{"b", "e"}, prepare: pods.prepare, audit: pods.audit},
	}
	if only != "" {
		scenarios = slices.DeleteFunc(scenarios, func(sc scenario) bool { return !selected(sc.name) })
		t.Logf("scenarios %s only (NFSTUNE_LAB_SCENARIOS)", only)
	}
	fixed := slices.Compact(slices.Sorted(slices.Values([]int{untunedKB, 1024, 4096, 15 * rsizeKB})))
	// Arm runs per scenario, each followed by the reference fixed value again: their means
	// compare the two over the same stretch of the machine's drifting load.
	pairs := labtest.EnvCount(t, "NFSTUNE_LAB_PAIRS", 1)
	t.Logf("%d runs of each arm per scenario, each followed by the reference fixed value (NFSTUNE_LAB_PAIRS)", pairs)

	var results []result
	for _, sc := range scenarios {
		if sc.prepare != nil {
			sc.prepare(t)
		}
		for _, kb := range fixed {
			r := measure(t, m, sc, strconv.Itoa(kb), asFixed, func() {}, fixedUnderAgent(t, agentBin, m, kb))
			stopAgents(t)
			results = append(results, r)
		}
		// Each arm's run is followed by the reference fixed value once more, next to it in
		// time: on a shared machine the load drifts over a scenario's minutes, and the table
		// shows by how much. The reference is the best fixed value, or for pods sharing a
		// superblock the untuned 128 KiB (each pod's goal). With pairs > 1 the two
		// alternate. After them comes the control: the reference measured as the arm's run
		// is (from adaptiveRun into its run), as a controller would read that picked it at
		// once and never moved, under an observing agent with the arm's collectors (the
		// per-pod eBPF programs of --pod-io cost the emulated machine too). Its ratio to the
		// same fixed run is what one run of a perfect controller could show on this
		// machine.
		ref := bestFixed(results, sc.name)
		if sc.pods != nil {
			ref = fixedResult{kb: untunedKB}
		}
		for range pairs {
			for _, a := range armList {
				var agentLog string
				var bdis map[string]string
				r := measure(t, m, sc, a.name, asAdaptive, func() {
					// A fresh mount's read-ahead, and a node that has learned nothing for
					// the volume; then the agent takes it from there.
					setReadAhead(t, m.Device, untunedKB)
					forgetLearned(t)
					bdis = bdiValues(t)
					bin := agentBin
					if a.base {
						bin = baseBin
					}
					agentLog = startArm(t, bin, a)
				}, nil)
				r.changes = agentChanges(t, agentLog, r)
				if c, ok := lastMove(r.changes); ok {
					// A move into the bounds before the readers started counts as settled at 0.
					r.settled = max(c.at-r.switchAt, 0)
				}
				results = append(results, r)
				stopAgentAndRevert(t, bdis)
				again := measure(t, m, sc, strconv.Itoa(ref.kb), asFixed, func() {}, fixedUnderAgent(t, agentBin, m, ref.kb))
				stopAgents(t)
				again.setting = "again " + a.name
				results = append(results, again)
				control := measure(t, m, sc, strconv.Itoa(ref.kb), asAdaptive, func() {}, fixedUnderAgent(t, agentBin, m, ref.kb, a.collectorArgs()...))
				stopAgents(t)
				control.setting = "control " + a.name
				results = append(results, control)
			}
		}
	}
	table := render(scenarios, fixed, armList, results, kernelRelease(t), rsizeKB)
	t.Logf("\n%s", table)
	out := filepath.Join("/lab/lab/.cache", "readahead-table-"+kernelRelease(t)+".md")
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("writing %s: %v", out, err)
	} else {
		t.Logf("table written to %s (lab/.cache on the host)", out)
	}
}

// envDuration returns the duration in the environment variable name (time.ParseDuration),
// def when it is unset, and ends the test on any other value.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10s", name, v)
	}
	t.Logf("%s=%s", name, d)
	return d
}

// fioCounted runs fio with args (a job of reads: the name, engine, file and the rest) in the
// cgroup, time based: ramp, then window, and returns the function that waits for its end
// and returns the bytes it read in the window, by its own count (its JSON output).
//
// It returns once fio's jobs run: fio forks them only after it has started, and in the
// emulated guest its own pages come from the host's root over 9p, read in again and again
// under the cgroup's memory limit, which can take most of a minute: the readers of another
// pod started with it would have the superblock to themselves meanwhile.
func fioCounted(t *testing.T, cgroup string, jobs int, args string, ramp, window time.Duration) func() uint64 {
	dir := t.TempDir()
	out, errOut := filepath.Join(dir, "fio.json"), filepath.Join(dir, "fio.err")
	start := time.Now()
	stop := labtest.StartReaders(t, cgroup, fmt.Sprintf("exec fio %s --numjobs=%d --time_based --ramp_time=%ds --runtime=%ds --output-format=json --output=%s 2>%s",
		args, jobs, int(ramp.Seconds()), int(window.Seconds()), out, errOut))
	for procs(t, cgroup) <= jobs { // fio itself and its jobs
		if time.Since(start) > 3*time.Minute {
			stop()
			t.Fatalf("fio's %d jobs did not start within three minutes; the cgroup's processes:\n%s", jobs, labtest.DescribeProcs(cgroup))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("fio's %d jobs started %.1f s after fio", jobs, time.Since(start).Seconds())
	return func() uint64 {
		defer stop()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			b, _ := os.ReadFile(out)
			if o, err := fio.Parse(b); err == nil && len(o.Jobs) == 1 {
				return uint64(o.Jobs[0].Read.IOBytes)
			}
			if time.Now().After(deadline) {
				// What fio said and where its processes wait tell a failed job from a stuck one.
				stderr, _ := os.ReadFile(errOut)
				t.Fatalf("fio wrote no result to %s within a minute of its run's end (%d bytes there); its stderr:\n%s\nthe cgroup's processes:\n%s",
					out, len(b), labtest.Tail(string(stderr), 20), labtest.DescribeProcs(cgroup))
			}
		}
	}
}

// procs is the number of processes in cgroup.
func procs(t *testing.T, cgroup string) int {
	pids, err := labtest.CgroupPIDs(cgroup)
	if err != nil {
		t.Fatal(err)
	}
	return len(pids)
}

// How a run is measured: a fixed value's window starts after the warm-up, an arm's after
// adaptiveRun (switching workloads are measured whole either way).
const (
	asFixed    = false
	asAdaptive = true
)

// measure runs one workload with one setting: setup, then the workload, then the measured
// window (after a warm-up, or after adaptiveRun when late is set; the whole run for
// switching workloads), from the mount's own counters.
func measure(t *testing.T, m labtest.Mounted, sc scenario, setting string, late bool, startAdaptive, setFixed func()) result {
	t.Helper()
	// No drop_caches: it would drop the server's too. The sequential readers drop each
	// file's pages before reading it, and the random readers' cgroup holds little.
	r := result{scenario: sc.name, setting: setting}
	drain(t, m.Dir)
	var samples *raSamples
	if setFixed != nil {
		setFixed()
	} else {
		startAdaptive()
		intoBounds(t, m.Device)
	}
	begin := time.Now()
	r.begin = begin
	samples = sampleReadAhead(m.Device, begin)
	defer samples.stop()
	var a, b counters
	var counted uint64 // the workload's own count of bytes read, for sc.counted
	switch {
	case sc.counted != nil:
		ramp := warmup
		if late {
			ramp = adaptiveRun
		}
		wait := sc.counted(t, ramp, window)
		time.Sleep(ramp)
		a = readCounters(t, m.Dir)
		var audited func() string
		if sc.audit != nil && setFixed == nil {
			audited = sc.audit(t) // the agent's first sample of the window
		}
		time.Sleep(time.Until(a.at.Add(window)))
		b = readCounters(t, m.Dir)
		if audited != nil {
			r.audit = audited()
		}
		counted = wait()
		t.Logf("%s %-8s mountstats: %d application bytes, %d server bytes in the window; the readers' own count: %d bytes",
			sc.name, setting, b.app-a.app, b.server-a.server, counted)
	case sc.phases != nil:
		a = readCounters(t, m.Dir)
		stop := sc.phases[0](t)
		time.Sleep(switchPhase)
		stop()
		r.switchAt = time.Since(begin)
		stop = sc.phases[1](t)
		time.Sleep(switchPhase)
		b = readCounters(t, m.Dir)
		stop()
	default:
		stop := sc.start(t)
		if late {
			time.Sleep(adaptiveRun)
		} else {
			time.Sleep(warmup)
		}
		a = readCounters(t, m.Dir)
		time.Sleep(window)
		b = readCounters(t, m.Dir)
		if setFixed != nil && !late && os.Getenv("NFSTUNE_LAB_FIXED_LATE") != "" {
			// The same value again over the arm's window, for the log: how far apart two
			// windows of one run read.
			time.Sleep(time.Until(begin.Add(adaptiveRun)))
			la := readCounters(t, m.Dir)
			time.Sleep(window)
			lb := readCounters(t, m.Dir)
			early, lateRate := rate(a, b), rate(la, lb)
			t.Logf("%s %-8s %.1f MiB/s from %s, %.1f MiB/s from %s (%+.0f %%)", sc.name, setting,
				early, warmup, lateRate, adaptiveRun, 100*(lateRate/early-1))
		}
		stop()
	}
	app := float64(b.app - a.app)
	r.mibps = rate(a, b)
	switch {
	case sc.pods != nil:
		// The first pod's read(2)s are the mount's application bytes, the second's mapped
		// reads fio's count; over-read is the server's bytes over both.
		r.podRates = []float64{r.mibps, float64(counted) / b.at.Sub(a.at).Seconds() / (1 << 20)}
		app += float64(counted)
	case sc.counted != nil:
		app = float64(counted)
		r.mibps = app / b.at.Sub(a.at).Seconds() / (1 << 20)
	}
	if app > 0 {
		r.overRead = float64(b.server-a.server) / app
	}
	r.finalKB = readAhead(t, m.Device)
	seen := samples.String()
	t.Logf("%s %-8s %s over-read %.2f (read-ahead now %d KiB; seen %s)", sc.name, setting, rateText(sc, r), r.overRead, r.finalKB, seen)
	if setFixed != nil && seen != setting {
		// The agent of a fixed run observes: anything that moved the value spoils the row.
		t.Errorf("%s at %s KiB: read-ahead seen %s during the run", sc.name, setting, seen)
	}
	return r
}

// rateText is r's rate, or each pod's, in MiB/s.
func rateText(sc scenario, r result) string {
	if sc.pods == nil {
		return fmt.Sprintf("%7.1f MiB/s", r.mibps)
	}
	var parts []string
	for i, p := range sc.pods {
		parts = append(parts, fmt.Sprintf("pod %s %.1f MiB/s", p, r.podRates[i]))
	}
	return strings.Join(parts, ", ")
}

// rate is the application read rate between a and b, in MiB/s.
func rate(a, b counters) float64 {
	return float64(b.app-a.app) / b.at.Sub(a.at).Seconds() / (1 << 20)
}

// counters are the mount's application and server read bytes at a time.
type counters struct {
	at          time.Time
	app, server uint64
}

// readCounters reads the mount's application and server read bytes now
// (labtest.ReadBytes: the kernel's counters, not nfstune's).
func readCounters(t *testing.T, dir string) counters {
	t.Helper()
	c := counters{at: time.Now()}
	c.app, c.server = labtest.ReadBytes(t, dir)
	return c
}

// raSamples records read_ahead_kb once a second, for the log.
type raSamples struct {
	mu     sync.Mutex
	values []int
	done   chan struct{}
	wg     sync.WaitGroup
}

func sampleReadAhead(dev string, begin time.Time) *raSamples {
	s := &raSamples{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile("/sys/class/bdi/" + dev + "/read_ahead_kb"); err == nil {
				if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					s.mu.Lock()
					if len(s.values) == 0 || s.values[len(s.values)-1] != v {
						s.values = append(s.values, v)
					}
					s.mu.Unlock()
				}
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *raSamples) stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
}

func (s *raSamples) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make([]string, len(s.values))
	for i, v := range s.values {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, " -> ")
}

// drain waits, up to 90 s, until the server has sent nothing to the mount at dir for 2 s:
// READs that the last run's readers left in flight (a 15 MiB window each) are not counted
// to the next setting, nor slow its start. It logs a wait of more than a second.
func drain(t *testing.T, dir string) {
	t.Helper()
	start := time.Now()
	last, quiet := readCounters(t, dir), time.Duration(0)
	for quiet < 2*time.Second && time.Since(start) < 90*time.Second {
		time.Sleep(500 * time.Millisecond)
		c := readCounters(t, dir)
		if quiet += 500 * time.Millisecond; c.server != last.server {
			quiet = 0
		}
		last = c
	}
	if d := time.Since(start) - 2*time.Second; d > time.Second {
		t.Logf("the last run's READs drained in %s", d.Round(100*time.Millisecond))
	}
}

// fixedResult is a fixed setting's result with its value.
type fixedResult struct {
	kb    int
	mibps float64
}

// bestFixed returns the fixed setting of scenario that read fastest.
func bestFixed(results []result, scenario string) fixedResult {
	var best fixedResult
	for _, r := range results {
		kb, err := strconv.Atoi(r.setting)
		if r.scenario != scenario || err != nil {
			continue
		}
		if r.mibps > best.mibps {
			best = fixedResult{kb: kb, mibps: r.mibps}
		}
	}
	return best
}

// lastMove returns the last change that moved the read-ahead for good. A try undone for
// no gain is a look, not a move: a probe (halving) that read no faster, or a rise
// (doubling) that fetched more than was read without reading faster, and its undo
// (no_gain), leave the value where it was and the rate as it was, so neither counts. A change undone because it hurt (hurt) is a move: it cost throughput.
func lastMove(changes []change) (change, bool) {
	look := func(i int) bool { // changes[i] and changes[i+1] are a try and its undo for no gain
		return i+1 < len(changes) && changes[i+1].reason == "no_gain" &&
			(changes[i].reason == "probe" || changes[i].reason == "streaming") &&
			changes[i+1].toKB == changes[i].fromKB
	}
	for i := len(changes) - 1; i >= 0; i-- {
		if look(i) || (i > 0 && look(i-1)) {
			continue
		}
		return changes[i], true
	}
	return change{}, false
}

// render writes the table of docs/benchmarks.md: per scenario, one row per arm of nfstune,
// with the fixed values' rates, the arm's mean over its runs as a share of the best fixed
// value and of the untuned 128 KiB, and each run's ratio, changes and settling. Each run's
// control (the reference fixed value measured as the arm's run is, under an observing agent
// with the arm's collectors) is given over the same fixed run as the arm's run: the spread
// of that ratio is the machine's, and a share of runs at 95 % or more is to be read against
// the control's. A scenario of pods shows each pod's rate and ratios.
func render(scenarios []scenario, fixed []int, armList []arm, results []result, kernel string, rsizeKB int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Kernel %s, rsize %d KiB, link %s each way (%s round trip), %s; each run measured over %s (a fixed value after %s, nfstune after %s). "+
		"nfstune is `nfstune agent` with no configuration (the built-in policy), default+podio the same with --pod-io; "+
		"a control runs under an observing agent with the arm's collectors. "+
		"MiB/s of application reads (mountstats) or, where the workload says so, of fio's own count; over-read = server READ bytes / bytes read.\n\n",
		kernel, rsizeKB, linkDelay, 2*linkDelay, linkRate, window, warmup, adaptiveRun)
	b.WriteString("| workload | nfstune |")
	for _, kb := range fixed {
		fmt.Fprintf(&b, " %d KiB |", kb)
	}
	b.WriteString(" nfstune | nfstune / best fixed | nfstune / 128 KiB (untuned) | reference again, after each run | each run / the reference run after it | control: the reference measured as the run, / the same fixed run | runs at 95 % or more: nfstune, control | changes (reasons) | settled | NFS006 |\n|---|---|")
	for range fixed {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scenarios {
		names := podNames(sc)
		var fixedRuns []result
		best := make([]float64, len(names))
		var untuned []float64
		for _, r := range results {
			if _, err := strconv.Atoi(r.setting); r.scenario != sc.name || err != nil {
				continue
			}
			fixedRuns = append(fixedRuns, r)
			for i, v := range rates(r) {
				best[i] = max(best[i], v)
			}
			if r.setting == strconv.Itoa(untunedKB) {
				untuned = rates(r)
			}
		}
		for _, a := range armList {
			var runs, agains, controls []result
			for _, r := range results {
				if r.scenario != sc.name {
					continue
				}
				switch r.setting {
				case a.name:
					runs = append(runs, r)
				case "again " + a.name:
					agains = append(agains, r)
				case "control " + a.name:
					controls = append(controls, r)
				}
			}
			if len(runs) == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s: %s | %s |", sc.name, sc.description, a.label)
			for _, r := range fixedRuns {
				fmt.Fprintf(&b, " %s (%.2f) |", rateList(names, rates(r), "%.1f"), r.overRead)
			}
			var ends, paired, controlled, changes, settled, audits []string
			var armAt95, controlAt95 int
			for i, run := range runs {
				ends = append(ends, strconv.Itoa(run.finalKB))
				if i < len(agains) {
					paired = append(paired, perRun(names, run, agains[i], &armAt95))
					if i < len(controls) {
						controlled = append(controlled, perRun(names, controls[i], agains[i], &controlAt95))
					}
				}
				changes = append(changes, changeSummary(run.changes))
				st := "-"
				if _, ok := lastMove(run.changes); ok {
					st = fmt.Sprintf("%.0f s", run.settled.Seconds())
					if sc.phases != nil {
						st += " after the switch"
					}
				}
				settled = append(settled, st)
				if run.audit != "" {
					audits = append(audits, run.audit)
				}
			}
			armMean := meanRates(runs, len(names))
			againKB := 0
			if len(agains) > 0 {
				againKB = agains[0].finalKB
			}
			fmt.Fprintf(&b, " %s (%.2f), ends at %s KiB | %s | %s | %d KiB: %s (%.2f) | %s | %s | %d of %d, %d of %d | %s | %s | %s |\n",
				rateList(names, armMean, "%.1f"), meanOverRead(runs), strings.Join(ends, ", "),
				percents(names, armMean, best), percents(names, armMean, untuned),
				againKB, rateList(names, meanRates(agains, len(names)), "%.1f"), meanOverRead(agains),
				strings.Join(paired, "; "), strings.Join(controlled, "; "), armAt95, len(paired), controlAt95, len(controlled),
				strings.Join(changes, "; "), strings.Join(settled, ", "), strings.Join(audits, "; "))
		}
	}
	return b.String()
}

// podNames are the names render gives a scenario's rates: its pods', or one unnamed.
func podNames(sc scenario) []string {
	if sc.pods == nil {
		return []string{""}
	}
	return sc.pods
}

// rates are r's rates in MiB/s: each pod's, or the workload's.
func rates(r result) []float64 {
	if r.podRates != nil {
		return r.podRates
	}
	return []float64{r.mibps}
}

// rateList formats values with format, each after its pod's name when there are pods.
func rateList(names []string, values []float64, format string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		v := 0.0
		if i < len(values) {
			v = values[i]
		}
		parts[i] = strings.TrimSpace(n + " " + fmt.Sprintf(format, v))
	}
	return strings.Join(parts, ", ")
}

// percents is each of values over the same of refs, in whole percent; "-" without refs.
func percents(names []string, values, refs []float64) string {
	if len(refs) < len(names) {
		return "-"
	}
	ratios := make([]float64, len(names))
	for i := range names {
		if refs[i] > 0 {
			ratios[i] = 100 * values[i] / refs[i]
		}
	}
	return rateList(names, ratios, "%.0f %%")
}

// perRun is run's rates over the fixed run beside it, to a tenth of a percent (a whole
// percent would show 94.6 as 95), counting it in *at95 when every one is 95 % or more.
func perRun(names []string, run, fixed result, at95 *int) string {
	r, f := rates(run), rates(fixed)
	ratios := make([]float64, len(names))
	all := true
	for i := range names {
		if i < len(f) && f[i] > 0 && i < len(r) {
			ratios[i] = 100 * r[i] / f[i]
		}
		all = all && ratios[i] >= 95
	}
	if all {
		*at95++
	}
	return rateList(names, ratios, "%.1f %%")
}

// changeSummary is one adaptive run's changes: their number, the values it went through
// and the count of each reason, e.g. "3: 128 -> 256 -> 512 -> 256 (streaming up 2, hurt down 1)".
func changeSummary(changes []change) string {
	if len(changes) == 0 {
		return "0"
	}
	reasons := map[string]int{}
	var order, path []string
	for i, c := range changes {
		k := c.reason + " down"
		if c.toKB > c.fromKB {
			k = c.reason + " up"
		}
		if reasons[k] == 0 {
			order = append(order, k)
		}
		reasons[k]++
		if i == 0 {
			path = append(path, strconv.Itoa(c.fromKB))
		}
		path = append(path, strconv.Itoa(c.toKB))
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%s %d", k, reasons[k]))
	}
	return fmt.Sprintf("%d: %s (%s)", len(changes), strings.Join(path, " -> "), strings.Join(parts, ", "))
}

// meanRates are the means of each of n rates over runs, and meanOverRead the mean
// over-read; 0 for none.
func meanRates(rs []result, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean(rs, func(r result) float64 {
			if v := rates(r); i < len(v) {
				return v[i]
			}
			return 0
		})
	}
	return out
}

func meanOverRead(rs []result) float64 {
	return mean(rs, func(r result) float64 { return r.overRead })
}

func mean(rs []result, f func(result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	var sum float64
	for _, r := range rs {
		sum += f(r)
	}
	return sum / float64(len(rs))
}

// write makes a file of mib MiB at path, removed at the end of the test.
func write(t *testing.T, path string, mib int) string {
	t.Helper()
	t.Cleanup(func() { os.Remove(path) })
	out, err := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=1M", "count="+strconv.Itoa(mib), "status=none").CombinedOutput()
	if err != nil {
		t.Fatalf("dd to %s: %v: %s", path, err, out)
	}
	return path
}

func readAhead(t *testing.T, dev string) int { t.Helper(); return labtest.ReadAheadKB(t, dev) }

func setReadAhead(t *testing.T, dev string, kb int) {
	t.Helper()
	if err := os.WriteFile("/sys/class/bdi/"+dev+"/read_ahead_kb", []byte(strconv.Itoa(kb)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rsizeOf returns the effective rsize of the mount at dir, from mountinfo.
func rsizeOf(t *testing.T, dir string) int {
	t.Helper()
	for _, e := range labtest.NFSMounts(t) {
		if e.MountPoint != dir {
			continue
		}
		if v, ok := e.Options["rsize"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rsize for %s in mountinfo", dir)
	return 0
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

// logExportSpace logs what the server's tmpfs export holds: earlier tests' files that a
// process still held when they were removed stay there (as .nfs* files) until it closes them.
func logExportSpace(t *testing.T) {
	t.Helper()
	out, _ := exec.Command("sh", "-c", "df -m "+labtest.ExportTmp+" && ls -la "+labtest.ExportTmp).CombinedOutput()
	t.Logf("server export:\n%s", out)
}
