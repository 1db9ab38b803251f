//go:build lab

package agentlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/lab/labtest"
)

// The pods of TestRecovery, as kubelet's cgroupfs driver and containerd name their cgroups.
const (
	recoveryPod     = "8e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"
	recoverySandbox = "5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b"
	recoveryCtr     = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	healthyPod      = "3c2b1a09-8f7e-4d6c-9b5a-4f3e2d1c0b9a"
	healthyCtr      = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
	// agentPod stands for the agent's own pod (agent.Config.PodUID): the agent runs in the
	// test's process, so a process in this pod's cgroup is what its self-check finds.
	agentPod = "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
	agentCtr = "7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f"
	// kubeletRoot is kubelet's root directory; the test mounts a tmpfs there.
	kubeletRoot = "/var/lib/kubelet"
	// recoveryWindow is the shortest window a policy accepts.
	recoveryWindow = 30 * time.Second
	// journalPath is tune.JournalPath on the guest's root.
	journalPath = "/var/lib/nfstune/journal.json"
)

// TestRecovery runs the agent's recovery policy (window 30 s, action shutdown) on a pod's
// NFS volume whose server goes away: 127.0.0.2 over NFSv3, mounted at the pod's in-tree
// NFS volume path under a tmpfs /var/lib/kubelet, the pod's sandbox and container in
// cgroups named as kubelet's cgroupfs driver names them. A second pod reads from
// 127.0.0.1 throughout. The policy starts in observe mode:
//
//   - while the pod's container reads the volume (blocked), past the window: left alone
//     (kept: a process holds it);
//   - the container killed, the sandbox still there, a kubelet-like stat of the volume
//     blocked: left alone (the pod still runs);
//   - the sandbox killed too (the pod torn down): the would-act counter rises, nothing is
//     written;
//   - the policy turned to enforce: on Linux 6.6 and later the superblock is shut down
//     (the stat fails with EIO, the journal has the record, a plain umount succeeds,
//     nfstune_recovery_actions_total{action="shutdown",result="done"} is 1); before 6.6
//     the action is report and nothing is written.
//
// The healthy pod's reads go on all along, and its superblock is never shut down.
func TestRecovery(t *testing.T) {
	labtest.RequireGuest(t)
	release := kernelRelease(t)
	t.Logf("kernel %s", release)
	mountKubeletRoot(t)
	dead := labtest.Mount(t, labtest.MountSpec{Server: "127.0.0.2", Version: "3", Options: "hard,nosharecache",
		Dir: podVolume(t, recoveryPod, "data")})
	healthy := labtest.Mount(t, labtest.MountSpec{Version: "4.2", Options: "hard,nosharecache",
		Dir: podVolume(t, healthyPod, "data")})
	for _, dir := range []string{dead.Dir, healthy.Dir} {
		if err := os.WriteFile(dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
			t.Fatalf("writing test data: %v", err)
		}
	}
	if out, err := exec.Command("dd", "if="+dead.Dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}

	cg := labtest.Cgroup2(t)
	pod := "kubepods/besteffort/pod" + recoveryPod
	sandboxCG := labtest.PodCgroup(t, cg, pod+"/"+recoverySandbox)
	ctrCG := labtest.PodCgroup(t, cg, pod+"/"+recoveryCtr)
	healthyCG := labtest.PodCgroup(t, cg, "kubepods/besteffort/pod"+healthyPod+"/"+healthyCtr)
	labtest.StartIn(t, labtest.PodCgroup(t, cg, "kubepods/besteffort/pod"+agentPod+"/"+agentCtr), "exec sleep 600")

	// The healthy pod reads its volume every half second and counts its reads.
	reads := filepath.Join(t.TempDir(), "reads")
	labtest.StartIn(t, healthyCG, "while :; do cat "+labtest.ShellQuote(healthy.Dir+"/data")+" >/dev/null && echo >>"+labtest.ShellQuote(reads)+"; sleep 0.5; done")
	pause := labtest.StartIn(t, sandboxCG, "exec sleep 600")
	goRead := filepath.Join(t.TempDir(), "go")
	reader := labtest.StartIn(t, ctrCG, "exec 3<"+labtest.ShellQuote(dead.Dir+"/data")+
		" && while [ ! -e "+labtest.ShellQuote(goRead)+" ]; do sleep 0.1; done && exec cat <&3 >/dev/null")

	var mode atomic.Value
	mode.Store(policy.ModeObserve)
	la, reload := startRecoveryAgent(t, &mode)
	time.Sleep(time.Second)

	labtest.AddrGone(t, "127.0.0.2")
	gone := time.Now()
	if err := os.WriteFile(goRead, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if st := labtest.ProcState(reader.Process.Pid); st != "D" {
		t.Fatalf("the pod's reader of %s is in state %q with 127.0.0.2 gone, want D (blocked)", dead.Dir, st)
	}
	attr := hostfs.NFSShutdownAttr(dead.Device)
	knob := kernelAtLeast(t, 6, 6)
	action := policy.RecoveryReport
	if knob {
		action = policy.RecoveryShutdown
	}

	if !kernelAtLeast(t, 5, 14) {
		// No sunrpc sysfs: no stall is ever seen, and recovery never acts.
		time.Sleep(recoveryWindow + 2*agent.DefaultRecoveryEvery)
		if n := la.actions(t); n != 0 {
			t.Errorf("kernel %s has no sunrpc sysfs, yet %v recovery actions were counted", release, n)
		}
		return
	}

	// 1. The pod's container holds the volume: kept.
	kept := la.waitMetric(t, `nfstune_recovery_superblocks{state="kept"}`, 1, recoveryWindow+3*agent.DefaultRecoveryEvery)
	t.Logf("1. container blocked reading: kept %s after 127.0.0.2 went (window %s)", kept.Sub(gone).Round(time.Second), recoveryWindow)
	la.nothingDone(t, attr, dead)

	// 2. The container killed, the sandbox still running; kubelet-like, a stat of the
	// volume from outside the pod blocks (a LOOKUP of a name never looked up), which keeps
	// a request queued: the server stays stalled, and only the running pod keeps the
	// superblock.
	_ = reader.Process.Kill()
	_ = reader.Wait()
	killed := time.Now()
	statDone := make(chan struct{}) // closed when the stat has ended, with statErr
	var statErr error
	var statOut bytes.Buffer
	stat := exec.Command("stat", dead.Dir+"/kubelet-was-here")
	stat.Stdout, stat.Stderr = &statOut, &statOut
	if err := stat.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { statErr = stat.Wait(); close(statDone) }()
	t.Cleanup(func() {
		// An RPC of a hard mount waits killably, and after the server is back the stat
		// would wait for its retransmit timer (a minute): end it first.
		_ = stat.Process.Kill()
		labtest.ServerBack(t)
		select {
		case <-statDone:
		case <-time.After(60 * time.Second):
			t.Errorf("the stat of %s did not end within 60 s of SIGKILL", dead.Dir)
		}
	})
	time.Sleep(agent.DefaultRecoveryEvery + time.Second) // a run without the reader
	kept = la.waitMetric(t, `nfstune_recovery_superblocks{state="kept"}`, 1, recoveryWindow+3*agent.DefaultRecoveryEvery)
	t.Logf("2. container gone, sandbox running: kept %s after the container went", kept.Sub(killed).Round(time.Second))
	la.nothingDone(t, attr, dead)
	if st := labtest.ProcState(stat.Process.Pid); st != "D" {
		t.Errorf("the kubelet-like stat of %s is in state %q, want D (blocked)", dead.Dir, st)
	}

	// 3. The pod torn down. Observe mode: counted only.
	_ = pause.Process.Kill()
	_ = pause.Wait()
	tornDown := time.Now()
	observed := la.waitMetric(t, fmt.Sprintf(`nfstune_recovery_actions_total{action=%q,result="observed"}`, action), 1, recoveryWindow+3*agent.DefaultRecoveryEvery)
	t.Logf("3. pod torn down, observe mode: would %s %s after the teardown, %s after 127.0.0.2 went", action, observed.Sub(tornDown).Round(100*time.Millisecond), observed.Sub(gone).Round(time.Second))
	la.nothingDone(t, attr, dead)

	// 4. Enforce.
	mode.Store(policy.ModeEnforce)
	enforced := time.Now()
	reload <- struct{}{}
	done := la.waitMetric(t, fmt.Sprintf(`nfstune_recovery_actions_total{action=%q,result="done"}`, action), 1, 3*agent.DefaultRecoveryEvery)
	t.Logf("4. enforce: %s done %s after the switch; %s after 127.0.0.2 went", action, done.Sub(enforced).Round(100*time.Millisecond), done.Sub(gone).Round(time.Second))
	for _, r := range []string{agent.ResultAborted, agent.ResultFailed} {
		if n := la.metric(t, fmt.Sprintf(`nfstune_recovery_actions_total{action="shutdown",result=%q}`, r)); n != 0 {
			t.Errorf(`nfstune_recovery_actions_total{action="shutdown",result=%q} = %v, want 0`, r, n)
		}
	}

	if !knob {
		if _, err := os.Stat(attr); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kernel %s: %s: %v, want it absent (before Linux 6.6)", release, attr, err)
		}
		if recs := shutdownRecords(t, dead.Device); len(recs) != 0 {
			t.Errorf("a report wrote journal records: %+v", recs)
		}
		if st := labtest.ProcState(stat.Process.Pid); st != "D" {
			t.Errorf("the stat of %s is in state %q after a report, want still D", dead.Dir, st)
		}
	} else {
		if v := readTrimmed(t, attr); v != "1" {
			t.Errorf("%s = %q after the shutdown, want 1", attr, v)
		}
		select {
		case <-statDone:
			if statErr == nil || !strings.Contains(statOut.String(), "Input/output error") {
				t.Errorf("the blocked stat ended with %v, %q; want EIO (Input/output error)", statErr, statOut.String())
			}
			t.Logf("the blocked stat ended %s after the shutdown: %q", time.Since(done).Round(100*time.Millisecond), strings.TrimSpace(statOut.String()))
		case <-time.After(30 * time.Second):
			t.Errorf("the stat of %s is still blocked 30 s after the shutdown (state %q)", dead.Dir, labtest.ProcState(stat.Process.Pid))
		}
		if recs := shutdownRecords(t, dead.Device); len(recs) != 1 || !recs[0].Done || recs[0].Shutdown.KernelRelease != release ||
			len(recs[0].Shutdown.MountPoints) != 1 || recs[0].Shutdown.MountPoints[0] != dead.Dir {
			t.Errorf("journal shutdown records of %s: %+v; want one, done, on %s, mount point %s", dead.Device, recs, release, dead.Dir)
		}
		start := time.Now()
		if err := unix.Unmount(dead.Dir, 0); err != nil {
			t.Errorf("umount2(%s, 0) after the shutdown: %v", dead.Dir, err)
		} else {
			t.Logf("umount2(%s, 0) after the shutdown: %s", dead.Dir, time.Since(start).Round(time.Millisecond))
		}
		if v := readTrimmed(t, hostfs.NFSShutdownAttr(healthy.Device)); v != "0" {
			t.Errorf("the healthy superblock %s was shut down (%s)", healthy.Device, v)
		}
	}

	// The healthy pod read all along, and still reads.
	before := countLines(reads)
	time.Sleep(3 * time.Second)
	after := countLines(reads)
	t.Logf("the healthy pod read its volume %d times during the test", after)
	if after <= before || before < 20 {
		t.Errorf("the healthy pod's reads of %s: %d, then %d 3 s later; want them going on", healthy.Dir, before, after)
	}
}

// recoveryAgent is an agent with a recovery policy whose mode the test switches.
type recoveryAgent struct{ *labAgent }

// startRecoveryAgent runs an agent whose policy turns recovery on for every server with
// the shortest window and action shutdown, in the mode *mode holds when the policy is
// (re)loaded; a value sent on the returned channel reloads it.
func startRecoveryAgent(t *testing.T, mode *atomic.Value) (recoveryAgent, chan<- struct{}) {
	t.Helper()
	root := hostfs.Root("/")
	a, err := agent.New(agent.Config{
		Root: root, PID: 0,
		// No kubelet runs in the guest: its root is given, as --kubelet-root-dir does.
		PodUID: agentPod, KubeletRoot: kubeletRoot,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{})
		},
		Load: func() (*agent.Policy, error) {
			r := policy.DefaultRecovery()
			r.Enabled, r.Window, r.Action, r.Mode = true, recoveryWindow, policy.RecoveryShutdown, mode.Load().(policy.Mode)
			return &agent.Policy{Resolve: func(*inventory.Mount) agent.Desired { return agent.Desired{} }, Recovery: r}, nil
		},
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
	reload := make(chan struct{}, 1)
	go func() { la.done <- a.Run(ctx, reload) }()
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
	return recoveryAgent{la}, reload
}

// waitMetric polls series every 200 ms until it equals want, and returns when it did; it
// fails the test after limit.
func (la recoveryAgent) waitMetric(t *testing.T, series string, want float64, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		now := time.Now()
		got := la.metric(t, series)
		if got == want {
			return now
		}
		if now.After(deadline) {
			t.Fatalf("%s = %v after %s, want %v", series, got, limit, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// actions is the sum of nfstune_recovery_actions_total.
func (la recoveryAgent) actions(t *testing.T) float64 {
	t.Helper()
	var n float64
	for _, a := range []string{policy.RecoveryShutdown, policy.RecoveryReport} {
		for _, r := range []string{agent.ResultDone, agent.ResultObserved} {
			n += la.metric(t, fmt.Sprintf(`nfstune_recovery_actions_total{action=%q,result=%q}`, a, r))
		}
	}
	for _, r := range []string{agent.ResultAborted, agent.ResultFailed} {
		n += la.metric(t, fmt.Sprintf(`nfstune_recovery_actions_total{action="shutdown",result=%q}`, r))
	}
	return n
}

// nothingDone checks that no action but observe was taken on m: nothing written to its
// shutdown attribute (where the kernel has one) or the journal.
func (la recoveryAgent) nothingDone(t *testing.T, attr string, m labtest.Mounted) {
	t.Helper()
	for _, a := range []string{policy.RecoveryShutdown, policy.RecoveryReport} {
		if n := la.metric(t, fmt.Sprintf(`nfstune_recovery_actions_total{action=%q,result="done"}`, a)); n != 0 {
			t.Errorf("%s done %v times, want 0", a, n)
		}
	}
	if b, err := os.ReadFile(attr); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Errorf("%s = %q, want 0", attr, b)
	}
	if recs := shutdownRecords(t, m.Device); len(recs) != 0 {
		t.Errorf("journal shutdown records of %s: %+v, want none", m.Device, recs)
	}
}

// mountKubeletRoot mounts a tmpfs on /var/lib/kubelet until the end of the test.
func mountKubeletRoot(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(kubeletRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("kubelet", kubeletRoot, "tmpfs", 0, "size=1m,mode=755"); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v", kubeletRoot, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(kubeletRoot, unix.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", kubeletRoot, err)
		}
	})
}

// podVolume makes the directory of pod uid's in-tree NFS volume vol, as kubelet lays it
// out.
func podVolume(t *testing.T, uid, vol string) string {
	t.Helper()
	dir := filepath.Join(kubeletRoot, "pods", uid, "volumes", "kubernetes.io~nfs", vol)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

// journalRecord is a shutdown entry of nfstune's journal as the test reads it.
type journalRecord struct {
	Kind     string `json:"kind"`
	Done     bool   `json:"done"`
	Shutdown struct {
		Device        string   `json:"device"`
		MountPoints   []string `json:"mountpoints"`
		KernelRelease string   `json:"kernel_release"`
	} `json:"shutdown"`
}

// shutdownRecords returns the journal's shutdown entries for device.
func shutdownRecords(t *testing.T, device string) []journalRecord {
	t.Helper()
	b, err := os.ReadFile(journalPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var j struct{ Entries []journalRecord }
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatalf("journal: %v", err)
	}
	var out []journalRecord
	for _, e := range j.Entries {
		if e.Kind == "shutdown" && e.Shutdown.Device == device {
			out = append(out, e)
		}
	}
	return out
}

func readTrimmed(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}

func countLines(p string) int {
	b, _ := os.ReadFile(p)
	return bytes.Count(b, []byte("\n"))
}

func kernelRelease(t *testing.T) string {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	f := strings.FieldsFunc(kernelRelease(t), func(r rune) bool { return r == '.' || r == '-' })
	if len(f) < 2 {
		t.Fatalf("kernel release %q", kernelRelease(t))
	}
	ma, _ := strconv.Atoi(f[0])
	mi, _ := strconv.Atoi(f[1])
	return ma > major || ma == major && mi >= minor
}
