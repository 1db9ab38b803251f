//go:build lab

// Package ratable measures adaptive read-ahead against fixed values on the lab's real
// kernel, in one boot: four workloads behind an emulated link, each read with every fixed
// value of a sweep and then under `nfstune agent` with a readAheadAdaptive rule. It writes
// the table docs/benchmarks.md shows (make readahead-table). Throughput and over-read come
// from the kernel's own counters (mountstats bytes: of the mount), not from nfstune.
package ratable

import (
	"bufio"
	"bytes"
	"encoding/json"
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
// tmpfs export (1 GiB), and each measured run is half a minute.
const (
	linkDelay  = 2 * time.Millisecond // 4 ms round trip
	linkRate   = "1gbit"
	seqFiles   = 16
	seqFileMiB = 40  // 16 x 40 MiB for the sequential readers
	randMiB    = 320 // the random readers' file: five times the cgroup's memory
	cgroupMax  = "64M"
	warmup     = 5 * time.Second
	window     = 30 * time.Second
	// adaptiveRun is how long the agent runs before the measured window: the minute within
	// which it should settle (one rsize to the cap is four changes, two intervals each:
	// the change's and a settling one; the verdict's interval makes the next).
	adaptiveRun = 60 * time.Second
	// switchPhase is each half of the switching workload, measured whole.
	switchPhase = 60 * time.Second
	agentListen = "127.0.0.1:9479"
)

// result is one workload read with one read-ahead setting.
type result struct {
	scenario, setting string
	mibps, overRead   float64
	// Adaptive runs only: the read-ahead at the end, the changes the agent made (from its
	// log), and how long after the start (or the switch) the last one came.
	finalKB  int
	changes  []change
	settled  time.Duration
	switchAt time.Duration
	// begin is when the workload started: change times count from it.
	begin time.Time
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
}

func TestReadAheadTable(t *testing.T) {
	labtest.RequireGuest(t)
	m := labtest.Mount(t, labtest.MountSpec{Version: "4.2", Options: "rsize=1048576"})
	rsizeKB := rsizeOf(t, m.Dir) / 1024
	before := readAhead(t, m.Device)
	t.Cleanup(func() { setReadAhead(t, m.Device, before) })

	logExportSpace(t)
	t.Logf("layout: %d files of %d MiB and one of %d MiB on %s", seqFiles, seqFileMiB, randMiB, m.Dir)
	var files []string
	for i := range seqFiles {
		files = append(files, write(t, filepath.Join(m.Dir, fmt.Sprintf("seq%02d", i)), seqFileMiB))
	}
	randFile := write(t, filepath.Join(m.Dir, "random"), randMiB)
	labtest.Link(t, linkDelay, linkRate, 0)
	cg := labtest.MemoryCgroup(t, "nfstune-readahead-table", cgroupMax)
	agentBin := inMemory(t, labtest.Bin(t))

	seqOne := func(t *testing.T) func() { return labtest.StartReaders(t, "", labtest.SeqReaderLoop(files)) }
	// NFSTUNE_LAB_STAGGER starts b's readers out of step: reader i reads the first pass of
	// its file from i/16 of the way in, so the sixteen open their files at different times.
	// Without it they start together, open their next files together and ramp their
	// windows together for the first minute or so.
	stagger := os.Getenv("NFSTUNE_LAB_STAGGER") != ""
	if stagger {
		t.Logf("b's readers start out of step (NFSTUNE_LAB_STAGGER)")
	}
	seq16 := func(t *testing.T) func() {
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
		return labtest.StartReaders(t, cg, strings.Join(readers, " ")+" wait")
	}
	random := func(t *testing.T) func() {
		return labtest.StartReaders(t, cg, "exec fio --name=rand --rw=randread --bs=16k --ioengine=psync --numjobs=4 --fadvise_hint=0 --invalidate=1 --time_based --runtime=86400 --filename="+randFile+" --output=/dev/null")
	}
	// e is not one of the four: the random reader a large window hurts, which
	// reads through mmap (a page fault reads around itself with the whole window). Its
	// reads are not application bytes, so its rates are fio's own count.
	mmapRandom := func(t *testing.T, ramp, window time.Duration) func() uint64 {
		out := filepath.Join(t.TempDir(), "fio.json")
		stop := labtest.StartReaders(t, cg, fmt.Sprintf("exec fio --name=mmap --rw=randread --bs=16k --ioengine=mmap --numjobs=4 --group_reporting --fadvise_hint=0 --invalidate=1 --time_based --ramp_time=%ds --runtime=%ds --filename=%s --output-format=json --output=%s",
			int(ramp.Seconds()), int(window.Seconds()), randFile, out))
		return func() uint64 {
			defer stop()
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
				b, _ := os.ReadFile(out)
				if o, err := fio.Parse(b); err == nil && len(o.Jobs) == 1 {
					return uint64(o.Jobs[0].Read.IOBytes)
				}
				if time.Now().After(deadline) {
					t.Fatalf("fio wrote no result to %s within a minute of its run's end", out)
				}
			}
		}
	}
	optional := []scenario{
		{name: "e", description: fmt.Sprintf("random 16 KiB reads through mmap (4 jobs) over %d MiB in the %s cgroup; rates by fio's count", randMiB, cgroupMax), counted: mmapRandom},
	}
	scenarios := []scenario{
		{name: "a", description: "one sequential reader, 64 KiB reads", start: seqOne},
		{name: "b", description: fmt.Sprintf("16 sequential readers in a %s memory cgroup", cgroupMax), start: seq16},
		{name: "c", description: fmt.Sprintf("random 16 KiB reads (4 jobs) over %d MiB in the %s cgroup", randMiB, cgroupMax), start: random},
		{name: "d", description: fmt.Sprintf("c for %s, then a for %s", switchPhase, switchPhase), phases: []func(*testing.T) func(){random, seqOne}},
	}
	if only := os.Getenv("NFSTUNE_LAB_SCENARIOS"); only != "" {
		// A part of the table, e.g. "a,b": the whole one is about half an hour under
		// emulation. The optional scenarios run only when named.
		scenarios = slices.DeleteFunc(append(scenarios, optional...), func(sc scenario) bool { return !slices.Contains(strings.Split(only, ","), sc.name) })
		t.Logf("scenarios %s only (NFSTUNE_LAB_SCENARIOS)", only)
	}
	fixed := slices.Compact(slices.Sorted(slices.Values([]int{128, 1024, 4096, 15 * rsizeKB})))
	// Adaptive runs per scenario, each followed by the best fixed value again: their means
	// compare the two over the same stretch of the machine's drifting load.
	pairs := labtest.EnvCount(t, "NFSTUNE_LAB_PAIRS", 1)
	t.Logf("%d adaptive runs per scenario, each followed by the best fixed value (NFSTUNE_LAB_PAIRS)", pairs)

	var results []result
	for _, sc := range scenarios {
		for _, kb := range fixed {
			r := measure(t, m, sc, strconv.Itoa(kb), asFixed, func() {}, fixedUnderAgent(t, agentBin, m, kb))
			stopAgents(t)
			results = append(results, r)
		}
		// Each adaptive run is followed by the best fixed value once more, next to it in
		// time: on a shared machine the load drifts over a scenario's minutes, and the
		// table shows by how much. With pairs > 1 the two alternate. After them comes the
		// control: the best fixed value measured as the adaptive run is (from adaptiveRun
		// into its run), as a controller would read that picked it at once and never moved.
		// Its ratio to the same fixed run is what one run of a perfect controller could
		// show on this machine.
		best := bestFixed(results, sc.name)
		for range pairs {
			var agentLog string
			r := measure(t, m, sc, "adaptive", asAdaptive, func() {
				// A fresh mount's read-ahead, then the agent takes it from there.
				setReadAhead(t, m.Device, 128)
				agentLog = startAgent(t, agentBin, m.Dir, enforce)
			}, nil)
			r.changes = agentChanges(t, agentLog, r)
			if c, ok := lastMove(r.changes); ok {
				// A move into the bounds before the readers started counts as settled at 0.
				r.settled = max(c.at-r.switchAt, 0)
			}
			results = append(results, r)
			stopAgentAndRevert(t, m.Device)
			again := measure(t, m, sc, strconv.Itoa(best.kb), asFixed, func() {}, fixedUnderAgent(t, agentBin, m, best.kb))
			stopAgents(t)
			again.setting = "again"
			results = append(results, again)
			control := measure(t, m, sc, strconv.Itoa(best.kb), asAdaptive, func() {}, fixedUnderAgent(t, agentBin, m, best.kb))
			stopAgents(t)
			control.setting = "control"
			results = append(results, control)
		}
	}
	table := render(scenarios, fixed, results, kernelRelease(t), rsizeKB)
	t.Logf("\n%s", table)
	out := filepath.Join("/lab/lab/.cache", "readahead-table-"+kernelRelease(t)+".md")
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("writing %s: %v", out, err)
	} else {
		t.Logf("table written to %s (lab/.cache on the host)", out)
	}
}

// How a run is measured: a fixed value's window starts after the warm-up, the adaptive
// run's after adaptiveRun (switching workloads are measured whole either way).
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
		time.Sleep(window)
		b = readCounters(t, m.Dir)
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
			// The same value again over the adaptive row's window, for the log: how far
			// apart two windows of one run read.
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
	if sc.counted != nil {
		app = float64(counted)
		r.mibps = app / b.at.Sub(a.at).Seconds() / (1 << 20)
	}
	if app > 0 {
		r.overRead = float64(b.server-a.server) / app
	}
	r.finalKB = readAhead(t, m.Device)
	seen := samples.String()
	t.Logf("%s %-8s %7.1f MiB/s over-read %.2f (read-ahead now %d KiB; seen %s)", sc.name, setting, r.mibps, r.overRead, r.finalKB, seen)
	if setFixed != nil && seen != setting {
		// The agent of a fixed run observes: anything that moved the value spoils the row.
		t.Errorf("%s at %s KiB: read-ahead seen %s during the run", sc.name, setting, seen)
	}
	return r
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

// intoBounds waits for the agent just started to take the mount from the 128 KiB of a
// fresh mount into its rule's bounds, as it does at once for a mount that appears while it
// runs (a pod's volume is tuned before its first process): the readers start after that,
// and the adaptive run's times count from them. Started together, the readers opened
// their first files at 128 KiB while the agent started, and read them so for 20 to 40 s.
func intoBounds(t *testing.T, dev string) {
	t.Helper()
	start := time.Now()
	for readAhead(t, dev) == 128 {
		if time.Since(start) > time.Minute {
			t.Fatalf("the agent did not take %s into its bounds within a minute", dev)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the agent took %s into its bounds (%d KiB) %.1f s after it started", dev, readAhead(t, dev), time.Since(start).Seconds())
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

// fixedUnderAgent returns the setup of a fixed value's run: kb written to the mount, and
// the agent started with the adaptive rule in observe mode, which reads and decides as in
// the adaptive run but writes nothing. The agent shares the guest's two emulated CPUs with
// the readers (about 5 % of one CPU at a 5 s interval), so every row pays for it, as every
// node that runs it does.
func fixedUnderAgent(t *testing.T, bin string, m labtest.Mounted, kb int) func() {
	return func() {
		setReadAhead(t, m.Device, kb)
		startAgent(t, bin, m.Dir, observe)
	}
}

// The modes of startAgent's rule.
const (
	enforce = "enforce"
	observe = "observe"
)

// startAgent runs `nfstune agent` with a policy that makes dir's mount adaptive, in mode
// (enforce or observe), and leaves every other mount alone (observe), logging JSON to a
// file whose path it returns.
func startAgent(t *testing.T, bin, dir, mode string) string {
	t.Helper()
	tmp := t.TempDir()
	cfg := filepath.Join(tmp, "policy.yaml")
	policy := fmt.Sprintf(`apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults:
  mode: observe
rules:
  - match: {mountpoint: %q}
    mode: %s
    readAheadAdaptive: {}
`, dir, mode)
	if err := os.WriteFile(cfg, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(tmp, "agent.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "--pid", "0", "--config", cfg, "--listen", agentListen, "--log-format", "json", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	running = append(running, agentProc{cmd: cmd, log: logPath, started: time.Now()})
	t.Cleanup(func() { stopAgents(t); logFile.Close() })
	return logPath
}

// inMemory copies the binary at path to a tmpfs, as a node has its agent on a local disk.
// The guest's own files are the host's, over 9p: while 16 readers in a 64 MiB cgroup fault
// their programs back in through it, the agent's first page faults from there waited for
// more than the whole 90 s run (Linux 6.12: state D, not one line logged).
func inMemory(t *testing.T, path string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128m", "ratable-bin", dir).CombinedOutput(); err != nil {
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

// agentProc is an agent the table started, with its log.
type agentProc struct {
	cmd     *exec.Cmd
	log     string
	started time.Time
}

var running []agentProc

// stopAgents stops the agents. One that has logged nothing yet is described first (its
// state, wait channel and kernel stack, the load) and asked for its goroutines (SIGQUIT).
func stopAgents(t *testing.T) {
	for _, a := range running {
		if fi, err := os.Stat(a.log); err == nil && fi.Size() == 0 {
			pid := a.cmd.Process.Pid
			var b strings.Builder
			for _, f := range []string{fmt.Sprintf("/proc/%d/status", pid), fmt.Sprintf("/proc/%d/wchan", pid), fmt.Sprintf("/proc/%d/stack", pid), "/proc/loadavg", "/proc/pressure/cpu", "/proc/pressure/memory"} {
				c, err := os.ReadFile(f)
				fmt.Fprintf(&b, "%s: %s%v\n", f, c, err)
			}
			t.Logf("agent %d logged nothing:\n%s", pid, b.String())
			_ = a.cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(2 * time.Second)
		}
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		_ = a.cmd.Wait()
		// The agent shares the guest's emulated CPUs with the readers it measures: its
		// cost is a part of every row (fixedUnderAgent).
		wall, cpu := time.Since(a.started), a.cmd.ProcessState.UserTime()+a.cmd.ProcessState.SystemTime()
		t.Logf("agent %d: %.1f s of CPU in %s (%.1f %% of one CPU)", a.cmd.Process.Pid, cpu.Seconds(), wall.Round(time.Second), 100*cpu.Seconds()/wall.Seconds())
	}
	running = nil
}

// stopAgentAndRevert stops the agent and runs `nfstune revert`, which puts back the value
// from before its first change.
func stopAgentAndRevert(t *testing.T, dev string) {
	t.Helper()
	stopAgents(t)
	r := labtest.RunNfstune(t, "revert")
	if r.Code != 0 {
		t.Fatalf("nfstune revert: exit %d: %s", r.Code, r.Stderr)
	}
	if got := readAhead(t, dev); got != 128 {
		t.Errorf("after revert: read_ahead_kb %d, want the 128 it had before the agent", got)
	}
}

// agentChanges reads the agent's "adaptive read-ahead changed" lines.
func agentChanges(t *testing.T, logPath string, r result) []change {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []change
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Time   time.Time `json:"time"`
			Level  string    `json:"level"`
			Msg    string    `json:"msg"`
			From   int       `json:"from_kb"`
			To     int       `json:"to_kb"`
			Reason string    `json:"reason"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			t.Logf("agent: %s", sc.Text()) // not a log record: a panic's trace, say
			continue
		}
		if strings.HasPrefix(l.Msg, "adaptive read-ahead") || l.Level == "WARN" || l.Level == "ERROR" {
			t.Logf("agent: %s", sc.Text())
		}
		if l.Msg == "adaptive read-ahead changed" {
			out = append(out, change{at: l.Time.Sub(r.begin), fromKB: l.From, toKB: l.To, reason: l.Reason})
		}
	}
	if len(out) == 0 {
		// Not one change: the whole log, to say why.
		t.Logf("agent made no change; its log:\n%s", b)
	}
	return out
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

// render writes the table of docs/benchmarks.md. A scenario run with several adaptive
// runs (NFSTUNE_LAB_PAIRS) shows their means, and each run's ratio, changes and settling.
// Each pair's control (the best fixed value measured as the adaptive run) is given over the
// same fixed run as the adaptive run: the spread of that ratio is the machine's, and a
// share of runs at 95 % or more is to be read against the control's.
func render(scenarios []scenario, fixed []int, results []result, kernel string, rsizeKB int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Kernel %s, rsize %d KiB, link %s each way (%s round trip), %s; MiB/s of application reads (mountstats), over-read = server READ bytes / application bytes.\n\n",
		kernel, rsizeKB, linkDelay, 2*linkDelay, linkRate)
	b.WriteString("| workload |")
	for _, kb := range fixed {
		fmt.Fprintf(&b, " %d KiB |", kb)
	}
	b.WriteString(" adaptive | adaptive / best fixed | best fixed again, after each adaptive run | adaptive / mean of the best fixed value's runs | each adaptive run / the best fixed run after it | control: the best fixed value measured as the adaptive run, / the same fixed run | runs at 95 % or more: adaptive, control | changes (reasons) | settled |\n|---|")
	for range fixed {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "| %s: %s |", sc.name, sc.description)
		var best result
		var ads, agains, controls []result
		for _, r := range results {
			if r.scenario != sc.name {
				continue
			}
			switch r.setting {
			case "adaptive":
				ads = append(ads, r)
				continue
			case "again":
				agains = append(agains, r)
				continue
			case "control":
				controls = append(controls, r)
				continue
			}
			if r.mibps > best.mibps {
				best = r
			}
			fmt.Fprintf(&b, " %.1f (%.2f) |", r.mibps, r.overRead)
		}
		var ends, paired, controlled, changes, settled []string
		var adaptiveAt95, controlAt95 int
		for i, ad := range ads {
			ends = append(ends, strconv.Itoa(ad.finalKB))
			if i < len(agains) && agains[i].mibps > 0 {
				paired = append(paired, perRun(ad, agains[i], &adaptiveAt95))
				if i < len(controls) {
					controlled = append(controlled, perRun(controls[i], agains[i], &controlAt95))
				}
			}
			changes = append(changes, changeSummary(ad.changes))
			st := "-"
			if _, ok := lastMove(ad.changes); ok {
				st = fmt.Sprintf("%.0f s", ad.settled.Seconds())
				if sc.phases != nil {
					st += " after the switch"
				}
			}
			settled = append(settled, st)
		}
		// The best fixed value was measured before the adaptive runs and again right after
		// each: their mean is its rate over the adaptive runs' time, when the load drifts.
		adMean, againMean := meanRate(ads), meanRate(agains)
		ratio, bracketed := 0.0, 0.0
		if best.mibps > 0 {
			ratio = adMean / best.mibps
			bracketed = adMean / meanRate(append([]result{best}, agains...))
		}
		againKB := 0
		if len(agains) > 0 {
			againKB = agains[0].finalKB
		}
		fmt.Fprintf(&b, " %.1f (%.2f), ends at %s KiB | %.0f %% | %d KiB: %.1f (%.2f) | %.0f %% | %s | %s | %d of %d, %d of %d | %s | %s |\n",
			adMean, meanOverRead(ads), strings.Join(ends, ", "), 100*ratio, againKB, againMean, meanOverRead(agains), 100*bracketed,
			strings.Join(paired, ", "), strings.Join(controlled, ", "), adaptiveAt95, len(paired), controlAt95, len(controlled),
			strings.Join(changes, "; "), strings.Join(settled, ", "))
	}
	return b.String()
}

// perRun is run's rate over the fixed run beside it, to a tenth of a percent (a whole
// percent would show 94.6 as 95), counting it in *at95 when it is 95 % or more.
func perRun(run, fixed result, at95 *int) string {
	ratio := run.mibps / fixed.mibps
	if ratio >= 0.95 {
		*at95++
	}
	return fmt.Sprintf("%.1f %%", 100*ratio)
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

// meanRate and meanOverRead are the means over runs, 0 for none.
func meanRate(rs []result) float64 {
	return mean(rs, func(r result) float64 { return r.mibps })
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
