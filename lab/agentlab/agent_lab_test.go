//go:build lab

// Package agentlab runs the node agent against real NFS mounts of the lab's nfsd, inside
// the lab guest (Debian 12 kernel under qemu). Build on the host, run in the guest:
//
//	CGO_ENABLED=0 go test -c -tags lab -o lab/.cache/agentlab.test ./lab/agentlab
//	lab/vm.sh -- lab/.cache/agentlab.test -test.v
package agentlab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/lab/labtest"
)

// source is the lab's tmpfs export as NFSv4 names it (lab/guest/lib.sh: /srv/tmp under the
// pseudo root); sourceV3 is the same export by its path on the server, as NFSv3 needs.
const (
	source   = "127.0.0.1:/tmp"
	sourceV3 = "127.0.0.1:/srv/tmp"
	mntBase  = "/mnt/lab/agent"
	wantKB   = 15360 // the sequential-read profile
)

type labAgent struct {
	a      *agent.Agent
	h      http.Handler
	cancel context.CancelFunc
	done   chan error
}

func startAgent(t *testing.T, resync time.Duration) *labAgent {
	t.Helper()
	root := hostfs.Root("/")
	a, err := agent.New(agent.Config{
		Root: root, PID: 0, Resync: resync,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{})
		},
		ReconcileRead: agent.NewMountTable(root, 0).Read,
		Load: func() (*agent.Policy, error) {
			pol := policy.Default()
			pol.Workload = policy.WorkloadSequentialRead
			// A fixed value: these tests time how fast the agent writes the profile's
			// read-ahead, which an adaptive start would replace with its floor.
			pol.Adaptive = nil
			return &agent.Policy{Resolve: func(m *inventory.Mount) agent.Desired {
				r := pol.Resolve(m)
				return agent.Desired{ReadAheadKB: r.ReadAheadKB, Mode: r.Mode}
			}}, nil
		},
		// Warnings and errors go to the console, to explain a mount that stays untuned.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Handler(agent.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	la := &labAgent{a: a, h: h, cancel: cancel, done: make(chan error, 1)}
	go func() { la.done <- a.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-la.done; err != nil {
			t.Errorf("agent Run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !a.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("agent not ready after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return la
}

// metric scrapes /metrics through the handler and returns the value of one series.
func (la *labAgent) metric(t *testing.T, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	la.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return seriesValue(t, rec.Body, series)
}

// seriesValue returns the value of one series of a text exposition.
func seriesValue(t *testing.T, r io.Reader, series string) float64 {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("series %s not in /metrics", series)
	return 0
}

func mount(t *testing.T, dir, opts string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The lab's mountd now and then refuses a mount right after an unmount ("access
	// denied by server"); a second try succeeds.
	var out []byte
	var err error
	for try := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		src := source
		if strings.Contains(","+opts+",", ",vers=3,") {
			src = sourceV3
		}
		out, err = exec.CommandContext(ctx, "mount", "-t", "nfs", "-o", opts, src, dir).CombinedOutput()
		cancel()
		if err == nil {
			return
		}
		time.Sleep(time.Duration(try+1) * time.Second)
	}
	t.Fatalf("mount %s: %v\n%s", dir, err, out)
}

func umount(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatalf("umount %s: %v", dir, err)
	}
}

// deviceOf returns the superblock device of a mount point from /proc/self/mountinfo (never
// from the mount point itself).
func deviceOf(t *testing.T, dir string) string {
	t.Helper()
	dev, err := lookupDevice(dir)
	if err != nil {
		t.Fatal(err)
	}
	if dev == "" {
		t.Fatalf("%s not in mountinfo", dir)
	}
	return dev
}

// lookupDevice returns the superblock device of dir in /proc/self/mountinfo, or "" when
// dir is not a mount point.
func lookupDevice(dir string) (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			return f[2], nil
		}
	}
	return "", nil
}

func readAhead(dev string) int {
	n, err := hostfs.ReadInt("/sys/class/bdi/" + dev + "/read_ahead_kb")
	if err != nil {
		return -1
	}
	return int(n)
}

// waitTuned polls read_ahead_kb until it is want and returns when it saw it.
func waitTuned(dev string, want int, limit time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(limit)
	for {
		now := time.Now()
		if readAhead(dev) == want {
			return now, true
		}
		if now.After(deadline) {
			return now, false
		}
		// Not tighter: the guest has two emulated CPUs and the agent needs one.
		time.Sleep(2 * time.Millisecond)
	}
}

// watchChanges timestamps every mount table change, independently of the agent, with the
// same poll(2) mechanism.
func watchChanges(t *testing.T) <-chan time.Time {
	t.Helper()
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan time.Time, 4096)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := unix.Poll(fds, 100)
			if err != nil || n == 0 {
				continue
			}
			ch <- time.Now()
		}
	}()
	return ch
}

func drain(ch <-chan time.Time) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// reaction is one new superblock as an outside observer saw it: when the mount table
// changed and when its read_ahead_kb first held the profile's value.
type reaction struct {
	dev          string
	changed, set time.Time
	err          error
}

// observeReaction waits for the next mount table change, finds dir's superblock in
// mountinfo and polls its read_ahead_kb until it holds want(dev). It runs while the mount
// command is still exiting, so that the time the mount helper takes to finish is not
// counted as the agent's.
func observeReaction(changes <-chan time.Time, dir string, want func(dev string) int, limit time.Duration) reaction {
	var r reaction
	// The mount itself may take long on a busy emulated machine: limit starts at the change.
	const mountLimit = 2 * time.Minute
	select {
	case r.changed = <-changes:
	case <-time.After(mountLimit):
		r.err = fmt.Errorf("no mount table change seen in %v", mountLimit)
		return r
	}
	deadline := r.changed.Add(limit)
	for r.dev == "" {
		dev, err := lookupDevice(dir)
		if err != nil {
			r.err = err
			return r
		}
		if r.dev = dev; dev != "" {
			break
		}
		if time.Now().After(deadline) {
			r.err = fmt.Errorf("%s not in mountinfo %v after the change", dir, limit)
			return r
		}
		time.Sleep(2 * time.Millisecond)
	}
	kb := want(r.dev)
	set, ok := waitTuned(r.dev, kb, time.Until(deadline))
	if !ok {
		r.err = fmt.Errorf("read_ahead_kb = %d after %v, want %d", readAhead(r.dev), limit, kb)
	}
	r.set = set
	return r
}

// profileKB is the sequential-read profile's read-ahead, whatever the superblock.
func profileKB(string) int { return wantKB }

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestReaction50 mounts 50 new NFS superblocks one after another and measures, for each, the
// time from the mount table change (seen by the test's own poll on mountinfo) to
// read_ahead_kb holding the profile's value.
func TestReaction50(t *testing.T) {
	la := startAgent(t, 30*time.Second)
	changes := watchChanges(t)
	retries0 := la.metric(t, `nfstune_agent_repairs_total{reason="retry"}`)
	writeErrors0 := la.metric(t, `nfstune_agent_errors_total{stage="write"}`)
	watched0 := la.metric(t, "nfstune_agent_reaction_seconds_count")
	var reactions []time.Duration
	var devs []string
	for i := range 50 {
		dir := filepath.Join(mntBase, fmt.Sprintf("ra%02d", i))
		drain(changes)
		observed := make(chan reaction, 1)
		go func() { observed <- observeReaction(changes, dir, profileKB, 5*time.Second) }()
		// nosharecache: every mount is its own superblock, as distinct exports would be.
		mount(t, dir, "vers=4.2,nosharecache")
		r := <-observed
		if r.err != nil {
			t.Fatalf("mount %d (%s): %v", i, dir, r.err)
		}
		dev, changed, set := r.dev, r.changed, r.set
		devs = append(devs, dev)
		reactions = append(reactions, max(0, set.Sub(changed)))
		t.Logf("mount %02d %s: %v", i, dev, reactions[len(reactions)-1])
		defer umount(t, dir)
	}
	// udev's nfsrahead (99-nfs.rules) writes read_ahead_kb after the bdi appears, racing
	// with the agent (13 s after the agent's write under a host at full load); the agent's
	// settle re-checks, the last 20 s after it tuned the superblock, must leave every mount
	// tuned.
	time.Sleep(22 * time.Second)
	for _, dev := range devs {
		if got := readAhead(dev); got != wantKB {
			t.Errorf("%s: read_ahead_kb = %d after settling, want %d", dev, got, wantKB)
		}
	}
	p50, p99 := percentile(reactions, 0.50), percentile(reactions, 0.99)
	t.Logf("reaction over %d mounts: p50 %v, p99 %v, max %v (agent's own histogram: %v s over %v mounts)",
		len(reactions), p50, p99, slices.Max(reactions),
		la.metric(t, "nfstune_agent_reaction_seconds_sum"), la.metric(t, "nfstune_agent_reaction_seconds_count"))
	// What this test asserts is the path, not the clock: every superblock was tuned within
	// observeReaction's 5 s (the resync comes at 30 s), by its first write (no write failed
	// and none was retried), and the mountinfo watch wrote most of them: the agent's
	// reaction histogram counts only those. A reconcile already running for a settle
	// re-check can find a mount first (4 of 50 with the host at full load); without the
	// watch, none would be counted. The figures are reported above; docs/agent.md records
	// them. Under software emulation on a shared two-core machine the median itself passed a
	// second with the host at full load, so time bounds are opt-in:
	// NFSTUNE_LAB_REACTION_P99=50ms on KVM or hardware.
	if got := la.metric(t, `nfstune_agent_errors_total{stage="write"}`) - writeErrors0; got != 0 {
		t.Errorf("%v read-ahead writes failed, want none", got)
	}
	if got := la.metric(t, `nfstune_agent_repairs_total{reason="retry"}`) - retries0; got != 0 {
		t.Errorf("read-ahead written %v times as a retry, want every mount tuned by its first write", got)
	}
	if got := la.metric(t, "nfstune_agent_reaction_seconds_count") - watched0; got < float64(len(devs))/2 {
		t.Errorf("the mountinfo watch tuned %v of %d new mounts, want most of them", got, len(devs))
	}
	if s := os.Getenv("NFSTUNE_LAB_REACTION_P99"); s != "" {
		limit, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("NFSTUNE_LAB_REACTION_P99=%q: %v", s, err)
		}
		if p99 > limit {
			t.Errorf("reaction p99 = %v, want <= %v", p99, limit)
		}
	}
}

// TestChurn runs mount/unmount cycles, 30 or NFSTUNE_LAB_CHURN: every mount must be tuned,
// the agent must forget every unmounted superblock, and goroutines and open descriptors
// must not grow (by more than 2: a leak of one per cycle shows after a few). A cycle takes
// about 4 s under emulation; make check runs 30, the README's figure is from 200.
func TestChurn(t *testing.T) {
	la := startAgent(t, 30*time.Second)
	dir := filepath.Join(mntBase, "churn")
	// One warm-up cycle so that lazily created runtime goroutines exist before the baseline.
	mount(t, dir, "vers=4.2")
	waitTuned(deviceOf(t, dir), wantKB, 5*time.Second)
	umount(t, dir)
	time.Sleep(200 * time.Millisecond)
	g0, fd0 := la.metric(t, "go_goroutines"), la.metric(t, "process_open_fds")
	// The lab scenario's own mounts stay mounted: they are the baseline the agent must
	// come back to.
	known0 := la.a.Known()

	untuned := 0
	cycles := labtest.EnvCount(t, "NFSTUNE_LAB_CHURN", 30)
	for i := range cycles {
		opts := "vers=4.2"
		if i%2 == 1 {
			opts = "vers=3"
		}
		mount(t, dir, opts)
		dev := deviceOf(t, dir)
		if _, ok := waitTuned(dev, wantKB, 5*time.Second); !ok {
			untuned++
			t.Errorf("cycle %d (%s, %s): read_ahead_kb = %d, want %d", i, opts, dev, readAhead(dev), wantKB)
		}
		umount(t, dir)
	}
	deadline := time.Now().Add(5 * time.Second)
	for la.a.Known() != known0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := la.a.Known(); n != known0 {
		t.Errorf("agent tracks %d superblocks after every churn unmount, want the %d it tracked before", n, known0)
	}
	// A read the last cycles started (a scrape's inventory read that outlived its deadline
	// on a busy machine) holds descriptors and a goroutine until it ends: a leak stays, so
	// let such reads finish for up to 10 s.
	var g1, fd1 float64
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		g1, fd1 = la.metric(t, "go_goroutines"), la.metric(t, "process_open_fds")
		if (g1 <= g0+2 && fd1 <= fd0+2) || time.Now().After(end) {
			break
		}
	}
	t.Logf("%d cycles: %d untuned; goroutines %v -> %v, open fds %v -> %v", cycles, untuned, g0, g1, fd0, fd1)
	if g1 > g0+2 {
		t.Errorf("goroutines grew from %v to %v", g0, g1)
	}
	if fd1 > fd0+2 {
		fds, _ := filepath.Glob("/proc/self/fd/*")
		var open []string
		for _, f := range fds {
			target, _ := os.Readlink(f)
			open = append(open, filepath.Base(f)+" -> "+target)
		}
		t.Errorf("open descriptors grew from %v to %v: %s", fd0, fd1, strings.Join(open, ", "))
	}
}

// TestNewMountsTuned mounts one new superblock of each NFS version with the agent running
// and expects each to get the profile's read-ahead: the smallest check of the agent on a
// kernel (make lab-matrix runs it on every kernel line).
func TestNewMountsTuned(t *testing.T) {
	startAgent(t, 30*time.Second)
	for _, vers := range []string{"3", "4.1", "4.2"} {
		dir := filepath.Join(mntBase, "new-v"+vers)
		mount(t, dir, "vers="+vers+",nosharecache")
		defer umount(t, dir)
		dev := deviceOf(t, dir)
		if _, ok := waitTuned(dev, wantKB, 10*time.Second); !ok {
			t.Errorf("NFS %s mount %s (%s): read_ahead_kb = %d 10 s after the mount, want %d", vers, dir, dev, readAhead(dev), wantKB)
		}
	}
}

// TestDriftRepaired lowers a tuned mount's read-ahead behind the agent's back and expects
// the next resync to restore it and count the drift.
func TestDriftRepaired(t *testing.T) {
	la := startAgent(t, 300*time.Millisecond)
	dir := filepath.Join(mntBase, "drift")
	mount(t, dir, "vers=4.2")
	defer umount(t, dir)
	dev := deviceOf(t, dir)
	if _, ok := waitTuned(dev, wantKB, 5*time.Second); !ok {
		t.Fatalf("read_ahead_kb = %d, want %d", readAhead(dev), wantKB)
	}
	if err := os.WriteFile("/sys/class/bdi/"+dev+"/read_ahead_kb", []byte("128\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitTuned(dev, wantKB, 5*time.Second); !ok {
		t.Fatalf("read_ahead_kb = %d 5 s after the drift, want %d", readAhead(dev), wantKB)
	}
	if n := la.metric(t, "nfstune_agent_drifts_total"); n < 1 {
		t.Errorf("drifts_total = %v, want >= 1", n)
	}
	if n := la.metric(t, `nfstune_agent_repairs_total{reason="drift"}`); n < 1 {
		t.Errorf(`repairs_total{reason="drift"} = %v, want >= 1`, n)
	}
}

// TestDeadServerScrape makes the server unreachable under a hard mount and expects
// /metrics to answer in under a second, twice.
func TestDeadServerScrape(t *testing.T) {
	la := startAgent(t, 30*time.Second)
	dir := filepath.Join(mntBase, "dead")
	mount(t, dir, "vers=4.2,hard")
	// A scrape while the server is up, as Prometheus would have done: if a later read is
	// slow, the agent serves this snapshot.
	la.metric(t, "nfstune_scrape_success")
	if out, err := exec.Command("labctl", "server-gone", "loss").CombinedOutput(); err != nil {
		t.Fatalf("labctl server-gone: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("labctl", "server-back").CombinedOutput(); err != nil {
			t.Errorf("labctl server-back: %v\n%s", err, out)
		}
		// MNT_DETACH: the server may still be recovering. EINVAL if the test unmounted it.
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	})
	for i := range 2 {
		start := time.Now()
		rec := httptest.NewRecorder()
		la.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		took := time.Since(start)
		t.Logf("scrape %d with the server gone: %v, %d bytes", i, took, rec.Body.Len())
		if took >= time.Second || rec.Code != http.StatusOK {
			t.Errorf("scrape %d: %v, status %d; want < 1 s, 200", i, took, rec.Code)
		}
		if !strings.Contains(rec.Body.String(), `mountpoint="`+dir+`"`) {
			t.Errorf("scrape %d does not show the dead mount", i)
		}
	}
}

// TestDeadServerStuckMetrics: a reader that opened its file while the server answered
// blocks in a READ once the server is gone. Two scrapes more than the stall window apart
// count the stuck transport to 127.0.0.1 and the blocked reader on the mount's
// superblock; neither scrape sleeps for it.
func TestDeadServerStuckMetrics(t *testing.T) {
	la := startAgent(t, 30*time.Second)
	dir := filepath.Join(mntBase, "stuck")
	mount(t, dir, "vers=4.1,hard,nosharecache")
	dev := deviceOf(t, dir)
	if err := os.WriteFile(dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dd", "if="+dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
	f, err := os.Open(dir + "/data")
	if err != nil {
		t.Fatal(err)
	}
	la.metric(t, "nfstune_scrape_success") // the first transport sample, server up
	if out, err := exec.Command("labctl", "server-gone", "loss").CombinedOutput(); err != nil {
		t.Fatalf("labctl server-gone: %v\n%s", err, out)
	}
	reader := exec.Command("cat")
	reader.Stdin = f
	if err := reader.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() {
		if out, err := exec.Command("labctl", "server-back").CombinedOutput(); err != nil {
			t.Errorf("labctl server-back: %v\n%s", err, out)
		}
		_ = reader.Process.Kill()
		_ = reader.Wait()
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	})
	time.Sleep(2 * time.Second)
	var body string
	for i := range 2 {
		start := time.Now()
		rec := httptest.NewRecorder()
		la.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body = rec.Body.String()
		t.Logf("scrape %d with the server gone: %v", i, time.Since(start))
		time.Sleep(inventory.DefaultStallWindow + 500*time.Millisecond)
	}
	stuck := lineValue(t, body, "nfstune_server_stuck_transports{", `server_addr="127.0.0.1"`)
	total := lineValue(t, body, "nfstune_server_transports{", `server_addr="127.0.0.1"`)
	blocked := lineValue(t, body, "nfstune_mount_blocked_processes{", `device="`+dev+`"`)
	t.Logf("127.0.0.1: %v of %v transports stuck; %v process(es) blocked on %s (%s)", stuck, total, blocked, dir, dev)
	if stuck < 1 || stuck > total {
		t.Errorf("stuck transports to 127.0.0.1 = %v of %v, want at least 1", stuck, total)
	}
	if blocked < 1 {
		t.Errorf("blocked processes on %s = %v, want at least the reader %d", dev, blocked, reader.Process.Pid)
	}
}

// lineValue returns the value of the series of family (its name and "{") whose labels
// contain label; it fails the test when there is none.
func lineValue(t *testing.T, body, family, label string) float64 {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, family) || !strings.Contains(line, label) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Fatalf("no %s...%s...} series in /metrics", family, label)
	return 0
}
