//go:build lab

package sidebyside

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/lab/labtest"
)

// The reaction case: `nfstune agent --resync 2s` with no configuration, and 20 NFSv3
// superblocks mounted one after another; a reaction is the time from mount(8) returning to
// the superblock's read_ahead_kb above the kernel's default of 128 (the profile's value,
// written by the agent). Three rounds, each running the base and then the tree under test.
const (
	reactionMounts = 20
	reactionRounds = 3
	// reactionLimit is how long one mount may wait for its tuning: the resync's 2 s, with
	// room for a slow emulated step. Past it the run fails; it is not the figure compared.
	reactionLimit = 15 * time.Second
	defaultKB     = 128
	agentListen   = "127.0.0.1:9477"
)

// TestReactionSideBySide runs the reaction case for the base binary and the one under test,
// alternately, and fails when the tree under test's maximum over all its runs is more than
// maxRatio times the base's.
func TestReactionSideBySide(t *testing.T) {
	ts := trees(t)
	got := make([][]time.Duration, len(ts))
	for n := range labtest.EnvCount(t, EnvRounds, reactionRounds) {
		for i, tr := range ts {
			rs := reactionRun(t, tr, n)
			got[i] = append(got[i], rs...)
			s := summarize(tr.name, rs)
			t.Logf("round %d, %s: p50 %s, max %s; sorted (ms): %s", n+1, tr.name, round(s.p50), round(s.max), fmtRun(rs))
		}
	}
	compare(t, fmt.Sprintf("reaction to a new mount (%d NFSv3 mounts, %d runs each, agent --resync 2s)", reactionMounts, labtest.EnvCount(t, EnvRounds, reactionRounds)),
		summarize(ts[0].name, got[0]), summarize(ts[1].name, got[1]))
}

// reactionRun starts tr's agent, mounts reactionMounts superblocks one after another and
// returns each one's reaction; it stops the agent and unmounts them before it returns.
func reactionRun(t *testing.T, tr tree, n int) []time.Duration {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("agent-%s-%d.log", tr.name, n))
	stop := startAgent(t, tr.bin, logPath)
	base := labtest.MountDir(t)
	var dirs, devs []string
	var reactions []time.Duration
	var mountedAt []time.Time
	defer func() {
		stop()
		for _, d := range dirs {
			labtest.Umount(t, d)
		}
		// nfs-common's udev rule writes each new bdi's read-ahead after the mount: let it
		// finish before the next run's agent starts.
		labtest.WaitUdev(t)
	}()
	for i := range reactionMounts {
		dir := filepath.Join(base, fmt.Sprintf("m%02d", i))
		mountV3(t, dir)
		mounted := time.Now()
		dirs = append(dirs, dir)
		dev := deviceOf(t, dir)
		devs = append(devs, dev)
		set, ok := waitAbove(dev, defaultKB, mounted.Add(reactionLimit))
		if !ok {
			t.Fatalf("%s: %s (%s) read_ahead_kb = %d %s after its mount, want above %d; the agent's log:\n%s",
				tr.name, dir, dev, readAhead(dev), reactionLimit, defaultKB, labtest.TailFile(logPath, 40))
		}
		reactions = append(reactions, max(0, set.Sub(mounted)))
		mountedAt = append(mountedAt, mounted)
	}
	stop()
	// The agent's own account of the slowest mount: its stage timings at debug level.
	slow := 0
	for i, r := range reactions {
		if r > reactions[slow] {
			slow = i
		}
	}
	from := mountedAt[slow].Add(-2 * time.Second)
	t.Logf("%s round %d: slowest %s (%s, %s, mounted at %s); the agent's lines from 2 s before:\n%s", tr.name, n+1,
		round(reactions[slow]), dirs[slow], devs[slow], mountedAt[slow].UTC().Format(time.RFC3339Nano),
		logWindow(logPath, from, mountedAt[slow].Add(reactions[slow]+100*time.Millisecond)))
	return reactions
}

// startAgent starts `bin agent --resync 2s` with its log at debug level in logPath, waits
// until it is ready, and returns the function that stops it (SIGTERM; a second call does
// nothing).
func startAgent(t *testing.T, bin, logPath string) (stop func()) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "agent", "--resync", "2s", "--listen", agentListen, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			var exitErr *exec.ExitError
			if err != nil && !errors.As(err, &exitErr) {
				t.Errorf("agent: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("agent did not stop within 30 s of SIGTERM (killed: %v)", <-done)
		}
		logf.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ready() {
			return stop
		}
		select {
		case err := <-done:
			t.Fatalf("agent %s exited before it was ready: %v\n%s", bin, err, labtest.TailFile(logPath, 40))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("agent %s not ready after 60 s:\n%s", bin, labtest.TailFile(logPath, 40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+agentListen+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// mountV3 mounts the lab's tmpfs export with NFSv3 on dir, a superblock of its own
// (nosharecache). The lab's mountd now and then refuses a mount right after an unmount
// ("access denied by server"); a later try succeeds.
func mountV3(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for try := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err = exec.CommandContext(ctx, "mount", "-t", "nfs", "-o", "vers=3,nosharecache",
			"127.0.0.1:"+labtest.ExportTmp, dir).CombinedOutput()
		cancel()
		if err == nil {
			return
		}
		time.Sleep(time.Duration(try+1) * time.Second)
	}
	t.Fatalf("mount %s: %v\n%s", dir, err, out)
}

// deviceOf returns dir's superblock device from /proc/self/mountinfo, never from dir.
func deviceOf(t *testing.T, dir string) string {
	t.Helper()
	for _, e := range labtest.MountInfo(t) {
		if e.MountPoint == dir {
			return e.Device
		}
	}
	t.Fatalf("%s not in /proc/self/mountinfo after its mount", dir)
	return ""
}

// waitAbove polls dev's read_ahead_kb until it is above kb and returns when it saw it.
func waitAbove(dev string, kb int, deadline time.Time) (time.Time, bool) {
	for {
		now := time.Now()
		if readAhead(dev) > kb {
			return now, true
		}
		if now.After(deadline) {
			return now, false
		}
		// Not tighter: the guest has two emulated CPUs and the agent needs one.
		time.Sleep(time.Millisecond)
	}
}

func readAhead(dev string) int {
	b, err := os.ReadFile("/sys/class/bdi/" + dev + "/read_ahead_kb")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// logWindow returns the lines of the agent's log at path whose time= lies in [from, to].
func logWindow(path string, from, to time.Time) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "time=")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, strings.Fields(v)[0])
		if err == nil && !at.Before(from) && !at.After(to) {
			b.WriteString(sc.Text() + "\n")
		}
	}
	return b.String()
}
