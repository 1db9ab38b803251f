package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/tune"
)

const (
	// agentPod is the agent's own pod.
	agentPod   = "c0ffee00-1234-4abc-8def-0123456789ab"
	deletedPod = "5d7e4a12-0c3b-4e8f-9d21-6a7b8c9d0e1f"
	runningPod = "8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70"
	deadServer = "10.0.0.9"
)

func podPath(uid, vol string) string {
	return "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/" + vol
}

// recoveryCase are facts about one superblock 0:60 of the dead server, stalled for 10
// minutes, mounted for deletedPod only, held by nobody, with kubelet's unmount waiting on
// it, on a node whose kubelet runs with the default root and where the scan sees the
// agent's own pod; each case changes one fact.
func recoveryCase(change func(*recoveryFacts)) recoveryFacts {
	now := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	f := recoveryFacts{
		now: now,
		mounts: []inventory.Mount{
			{Device: "0:60", Server: deadServer, Export: "/exports/a", MountPoints: []string{podPath(deletedPod, "pv-a")}},
			{Device: "0:61", Server: "10.0.0.5", Export: "/healthy", MountPoints: []string{podPath(runningPod, "pv-h")}},
		},
		stalled: []inventory.StalledServer{{Addr: deadServer, Port: 2049}},
		since:   map[string]time.Time{deadServer + ":2049": now.Add(-10 * time.Minute)},
		blocked: []inventory.BlockedMount{{Device: "0:60", ServerAddr: deadServer, Holders: []inventory.Holder{}}},
		procs: &inventory.ProcessScan{Complete: true, PodProcesses: map[string]int{runningPod: 3, agentPod: 1},
			KubeletRoots: []kubelet.Root{kubelet.DefaultRoot},
			Programs:     []inventory.MountProgram{{PID: 77, Comm: "umount", State: "D", Program: inventory.ProgramUnmount, Target: podPath(deletedPod, "pv-a")}}},
		knob:    map[string]bool{"0:60": true, "0:61": true},
		selfPod: agentPod,
	}
	f.mounts[0].Version = "4.2"
	if change != nil {
		change(&f)
	}
	return f
}

func enabledRecovery() policy.Recovery {
	r := policy.DefaultRecovery()
	r.Enabled, r.Mode, r.Window = true, policy.ModeEnforce, 5*time.Minute
	return r
}

func TestDecideRecovery(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rules  func(*policy.Recovery)
		change func(*recoveryFacts)
		state  string // "" when no decision is made at all
		action string
		why    string
	}{
		{name: "eligible", state: RecoveryEligible, action: policy.RecoveryShutdown, why: "an unmount waits on it (pid 77)"},
		{name: "eligible without a visible unmount", state: RecoveryEligible, action: policy.RecoveryShutdown,
			change: func(f *recoveryFacts) { f.procs.Programs = nil }, why: "which run no process any more"},
		{name: "report action", rules: func(r *policy.Recovery) { r.Action = policy.RecoveryReport }, state: RecoveryEligible, action: policy.RecoveryReport},
		{name: "kernel without the knob reports", change: func(f *recoveryFacts) { f.knob = map[string]bool{} },
			state: RecoveryEligible, action: policy.RecoveryReport, why: "umount -f then umount -l"},
		{name: "off", rules: func(r *policy.Recovery) { r.Enabled = false }},
		{name: "server not selected", rules: func(r *policy.Recovery) { r.Servers = []policy.ServerPattern{{Glob: "*.example.com"}} }},
		{name: "server not stalled", change: func(f *recoveryFacts) { f.stalled = nil }},
		{name: "within the window", change: func(f *recoveryFacts) { f.since[deadServer+":2049"] = f.now.Add(-4 * time.Minute) },
			state: RecoveryWaiting, why: "stalled for 4m0s of the 5m0s window"},
		{name: "a host mount point", state: RecoveryKept, why: "/mnt/data, which is not a volume path below kubelet's root /var/lib/kubelet",
			change: func(f *recoveryFacts) { f.mounts[0].MountPoints = append(f.mounts[0].MountPoints, "/mnt/data") }},
		{name: "a CSI staging path alone", state: RecoveryEligible, action: policy.RecoveryShutdown, why: "CSI staging path",
			change: func(f *recoveryFacts) {
				f.mounts[0].MountPoints = []string{"/var/lib/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/ab12/globalmount"}
			}},
		{name: "a held file", state: RecoveryKept, why: "pid 900 (app) of pod " + runningPod + " holds it (fd)",
			change: func(f *recoveryFacts) {
				f.blocked[0].Holders = []inventory.Holder{{PID: 900, Comm: "app", Via: []string{"fd"}, PodUID: runningPod}}
			}},
		{name: "a process named as an unmount holding it", state: RecoveryKept, why: "pid 78 (umount.nfs4) holds it (cwd)",
			change: func(f *recoveryFacts) {
				f.blocked[0].Holders = []inventory.Holder{{PID: 78, Comm: "umount.nfs4", Via: []string{"cwd"}}}
			}},
		{name: "kubelet root configured", state: RecoveryEligible, action: policy.RecoveryShutdown,
			change: func(f *recoveryFacts) { f.kubeletRoot, f.procs.KubeletRoots = kubelet.DefaultRoot, nil }},
		{name: "kubelet root configured elsewhere", state: RecoveryKept, why: "below kubelet's root /data/kubelet",
			change: func(f *recoveryFacts) { f.kubeletRoot = "/data/kubelet" }},
		{name: "kubelet running with another root", state: RecoveryKept, why: "below kubelet's root /data/kubelet",
			change: func(f *recoveryFacts) { f.procs.KubeletRoots = []kubelet.Root{"/data/kubelet"} }},
		{name: "another directory named kubelet", state: RecoveryKept, why: "not a volume path below kubelet's root",
			change: func(f *recoveryFacts) {
				f.mounts[0].MountPoints = []string{"/srv/kubelet/pods/" + deletedPod + "/volumes/kubernetes.io~nfs/pv-a"}
			}},
		{name: "no kubelet seen", state: RecoveryBlind, why: "kubelet's root directory is not known",
			change: func(f *recoveryFacts) { f.procs.KubeletRoots = nil }},
		{name: "kubelets naming two roots", state: RecoveryBlind, why: "do not name one root directory",
			change: func(f *recoveryFacts) { f.procs.KubeletRoots = []kubelet.Root{"/data/kubelet", kubelet.DefaultRoot} }},
		{name: "a kubelet whose root cannot be told", state: RecoveryBlind, why: "do not name one root directory",
			change: func(f *recoveryFacts) { f.procs.KubeletRoots = []kubelet.Root{""} }},
		{name: "the agent's own pod not seen", state: RecoveryBlind, why: "found no process of the agent's own pod " + agentPod,
			change: func(f *recoveryFacts) { delete(f.procs.PodProcesses, agentPod) }},
		{name: "the agent outside a pod", state: RecoveryBlind, why: "does not know its own pod",
			change: func(f *recoveryFacts) { f.selfPod = "" }},
		{name: "holder scan incomplete", state: RecoveryKept, why: "3 uninspected",
			change: func(f *recoveryFacts) { f.blocked[0].Incomplete, f.blocked[0].Uninspected = true, 3 }},
		{name: "holders not read", state: RecoveryKept, change: func(f *recoveryFacts) { f.blocked = nil }},
		{name: "processes not scanned", state: RecoveryBlind, why: "not known yet", change: func(f *recoveryFacts) { f.procs = nil }},
		{name: "processes not scanned, kubelet root configured", state: RecoveryKept, why: "not scanned",
			change: func(f *recoveryFacts) { f.procs, f.kubeletRoot = nil, kubelet.DefaultRoot }},
		{name: "process scan incomplete", state: RecoveryKept, why: "stopped before the end",
			change: func(f *recoveryFacts) { f.procs.Complete = false }},
		{name: "pod still running", state: RecoveryKept, why: "pod " + deletedPod + " still runs 1 process(es)",
			change: func(f *recoveryFacts) { f.procs.PodProcesses[deletedPod] = 1 }},
		{name: "shared with a running pod", state: RecoveryKept, why: "pod " + runningPod + " still runs 3",
			change: func(f *recoveryFacts) {
				f.mounts[0].MountPoints = append(f.mounts[0].MountPoints, podPath(runningPod, "pv-a"))
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := enabledRecovery()
			if tt.rules != nil {
				tt.rules(&r)
			}
			ds := decideRecovery(r, recoveryCase(tt.change))
			if tt.state == "" {
				if len(ds) != 0 {
					t.Fatalf("decisions = %+v, want none", ds)
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("decisions = %+v, want one for 0:60", ds)
			}
			d := ds[0]
			if d.Device != "0:60" || d.State != tt.state || d.Action != tt.action || !strings.Contains(d.Why, tt.why) {
				t.Errorf("decision = %s %s %q (why %q); want %s %q, why containing %q", d.Device, d.State, d.Action, d.Why, tt.state, tt.action, tt.why)
			}
		})
	}
}

func TestDecideRecoveryFacts(t *testing.T) {
	ds := decideRecovery(enabledRecovery(), recoveryCase(nil))
	want := []recoveryDecision{{
		Device: "0:60", Source: deadServer + ":/exports/a", ServerAddr: deadServer,
		MountPoints: []string{podPath(deletedPod, "pv-a")}, Pods: []string{deletedPod},
		StalledFor: 10 * time.Minute, State: RecoveryEligible, Action: policy.RecoveryShutdown,
		Unmounting: []int{77},
	}}
	if diff := cmp.Diff(want, ds, cmpIgnoreWhy); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}

var cmpIgnoreWhy = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Why" }, cmp.Ignore())

// recoveryRoot is the agent's fixture host on Linux 6.12 where the v3 server 10.0.0.6 has
// stopped answering (a request waits on its transport), and its superblock 0:54 is mounted
// only for pod 6f1b3a52-..., whose containers are gone.
func recoveryRoot(t *testing.T) hostfs.Root {
	t.Helper()
	root := copyTree(t, "testdata/root")
	rewrite := func(p, old, new string) {
		t.Helper()
		b, err := os.ReadFile(root.Path(p))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", p, old)
		}
		if err := os.WriteFile(root.Path(p), []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(root.Path(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root.Path(p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(root.Proc("1", "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(l, " /mnt/home ") {
			lines = append(lines, l)
		}
	}
	write("proc/1/mountinfo", strings.Join(lines, ""))
	write("proc/version", "Linux version 6.12.107+deb13-amd64 (debian-kernel@lists.debian.org) #1 SMP\n")
	rewrite("sys/kernel/sunrpc/xprt-switches/switch-1/xprt-4-tcp/xprt_info", "pending_q_len=0", "pending_q_len=1")
	write("sys/fs/nfs/0:54/shutdown", "0\n")
	write("proc/uptime", "1000.00 1800.00\n")
	// kubelet, with its default root directory, and the agent in its own pod.
	addProcess(t, root, 4000, "kubelet", "0::/system.slice/kubelet.service\n", "/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml")
	addProcess(t, root, 4001, "nfstune", agentPodCgroup, "nfstune", "agent")
	return root
}

// addProcess adds a process to a fixture root: its stat, its cgroup, its command line, a
// mount table with only the root file system and no open file.
func addProcess(t *testing.T, root hostfs.Root, pid int, comm, cgroup string, cmdline ...string) {
	t.Helper()
	dir := root.Proc(strconv.Itoa(pid))
	for name, content := range map[string]string{
		"stat":      fmt.Sprintf("%d (%s) D 1 %d %d 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 90000 5619712 229\n", pid, comm, pid, pid),
		"cgroup":    cgroup,
		"cmdline":   strings.Join(cmdline, "\x00") + "\x00",
		"mountinfo": "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, "fdinfo"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// agentPodCgroup is the cgroup of the agent's container in agentPod (cgroupfs driver).
const agentPodCgroup = "0::/kubepods/besteffort/pod" + agentPod + "/" + "1111111111111111111111111111111111111111111111111111111111111111\n"

const fixturePod = "6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71"

// runRecovery runs Recover on root as the agent's run loop would: a first sample, a
// comparison that sees the server stalled, and a run past the window.
func runRecovery(t *testing.T, root hostfs.Root, mode policy.Mode) *Agent {
	t.Helper()
	r := policy.DefaultRecovery()
	r.Enabled, r.Mode, r.Window = true, mode, 5*time.Minute
	a, err := New(Config{
		Root: root, PID: 1, PodUID: agentPod,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load: func() (*Policy, error) {
			return &Policy{Resolve: func(*inventory.Mount) Desired { return Desired{} }, Recovery: r}, nil
		},
		// The fixture's mountstats age stands still: the checks before the write must
		// take less than the slack inventory.SuperblockID.Same allows.
		RecoveryStallWindow: 100 * time.Millisecond,
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.Recover(context.Background(), start)
	a.Recover(context.Background(), start.Add(2*time.Second))
	if got := testutil.ToFloat64(a.cfg.Metrics.RecoverySuperblocks.WithLabelValues(RecoveryWaiting)); got != 1 {
		t.Errorf("superblocks waiting after 2 s = %v, want 1", got)
	}
	a.Recover(context.Background(), start.Add(6*time.Minute))
	return a
}

func TestRecoverShutsDown(t *testing.T) {
	root := recoveryRoot(t)
	addProcess(t, root, 4300, "umount", "0::/system.slice/kubelet.service\n",
		"umount", "/var/lib/kubelet/pods/"+fixturePod+"/volumes/kubernetes.io~nfs/home")
	a := runRecovery(t, root, policy.ModeEnforce)
	if got := readFile(t, root.Sys("fs", "nfs", "0:54", "shutdown")); got != "1\n" {
		t.Fatalf("shutdown attribute = %q, want 1", got)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.RecoveryActions.WithLabelValues(policy.RecoveryShutdown, ResultDone)); got != 1 {
		t.Errorf("nfstune_recovery_actions_total{shutdown,done} = %v, want 1", got)
	}
	j := readFile(t, root.Path(tune.JournalPath))
	if !strings.Contains(j, `"kind": "shutdown"`) || !strings.Contains(j, "10.0.0.6:/home") {
		t.Errorf("journal has no record of the shutdown:\n%s", j)
	}
	// Acted once: a later run, the superblock still there, writes and counts nothing more.
	a.Recover(context.Background(), time.Now().Add(7*time.Minute))
	if got := testutil.ToFloat64(a.cfg.Metrics.RecoveryActions.WithLabelValues(policy.RecoveryShutdown, ResultDone)); got != 1 {
		t.Errorf("after a second run, {shutdown,done} = %v, want 1", got)
	}
}

func TestRecoverLeavesAlone(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mode   policy.Mode
		setup  func(t *testing.T, root hostfs.Root)
		result string
		state  string
	}{
		{name: "observe mode", mode: policy.ModeObserve, result: ResultObserved, state: RecoveryEligible},
		{name: "pod still running", mode: policy.ModeEnforce, state: RecoveryKept, setup: func(t *testing.T, root hostfs.Root) {
			addProcess(t, root, 4400, "pause", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"+strings.ReplaceAll(fixturePod, "-", "_")+".slice/cri-containerd-"+strings.Repeat("ab", 32)+".scope\n", "/pause")
		}},
		{name: "a process named umount holding it", mode: policy.ModeEnforce, state: RecoveryKept, setup: func(t *testing.T, root hostfs.Root) {
			addProcess(t, root, 4300, "umount", "0::/system.slice/kubelet.service\n", "umount", "/var/lib/kubelet/pods/"+fixturePod+"/volumes/kubernetes.io~nfs/home")
			link(t, root, 4300, "root", "/")
			link(t, root, 4300, "cwd", "/var/lib/kubelet/pods/"+fixturePod+"/volumes/kubernetes.io~nfs/home")
			copyFile(t, root, "proc/1/mountinfo", "proc/4300/mountinfo")
		}},
		{name: "the agent's pod under a cgroup layout not recognised", mode: policy.ModeEnforce, state: RecoveryBlind, setup: func(t *testing.T, root hostfs.Root) {
			// kubelet --cgroup-root=/custom: its pods' cgroups are not where kubelet names
			// them by default, so every pod would look empty.
			addProcess(t, root, 4001, "nfstune", "0::/custom/kubepods/besteffort/pod"+agentPod+"/"+strings.Repeat("1", 64)+"\n", "nfstune", "agent")
		}},
		{name: "a process whose mount table cannot be read", mode: policy.ModeEnforce, state: RecoveryKept, setup: func(t *testing.T, root hostfs.Root) {
			addProcess(t, root, 4500, "app", "0::/user.slice\n", "app")
			if err := os.WriteFile(root.Proc("4500", "mountinfo"), make([]byte, hostfs.MaxSmall+1), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "kubelet running with another root", mode: policy.ModeEnforce, state: RecoveryKept, setup: func(t *testing.T, root hostfs.Root) {
			addProcess(t, root, 4000, "kubelet", "0::/system.slice/kubelet.service\n", "/usr/bin/kubelet", "--root-dir=/data/kubelet")
		}},
		{name: "kernel without the knob", mode: policy.ModeEnforce, result: ResultDone, state: RecoveryEligible, setup: func(t *testing.T, root hostfs.Root) {
			if err := os.RemoveAll(root.Sys("fs")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := recoveryRoot(t)
			if tt.setup != nil {
				tt.setup(t, root)
			}
			a := runRecovery(t, root, tt.mode)
			if b, err := os.ReadFile(root.Sys("fs", "nfs", "0:54", "shutdown")); err == nil && string(b) != "0\n" {
				t.Errorf("shutdown attribute = %q, want it left at 0", b)
			}
			if _, err := os.Stat(root.Path(tune.JournalPath)); err == nil {
				t.Error("a journal was written")
			}
			if got := testutil.ToFloat64(a.cfg.Metrics.RecoverySuperblocks.WithLabelValues(tt.state)); got != 1 {
				t.Errorf("superblocks %s = %v, want 1", tt.state, got)
			}
			total := 0.0
			for action, results := range recoveryResults {
				for _, r := range results {
					v := testutil.ToFloat64(a.cfg.Metrics.RecoveryActions.WithLabelValues(action, r))
					total += v
					if v != 0 && (r != tt.result) {
						t.Errorf("{%s,%s} = %v, want 0", action, r, v)
					}
				}
			}
			if want := map[bool]float64{true: 1, false: 0}[tt.result != ""]; total != want {
				t.Errorf("actions counted = %v, want %v", total, want)
			}
		})
	}
}

// link makes /proc/<pid>/<name> of a fixture root a link to target.
func link(t *testing.T, root hostfs.Root, pid int, name, target string) {
	t.Helper()
	if err := os.Symlink(target, root.Proc(strconv.Itoa(pid), name)); err != nil {
		t.Fatal(err)
	}
}

// copyFile copies a file of a fixture root to another path of it.
func copyFile(t *testing.T, root hostfs.Root, from, to string) {
	t.Helper()
	b, err := os.ReadFile(root.Path(from))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path(to), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A superblock observed in observe mode is acted on once the policy turns to enforce: what
// observe mode saw is no action taken.
func TestRecoverActsAfterObserve(t *testing.T) {
	root := recoveryRoot(t)
	a := runRecovery(t, root, policy.ModeObserve)
	if got := testutil.ToFloat64(a.cfg.Metrics.RecoveryActions.WithLabelValues(policy.RecoveryShutdown, ResultObserved)); got != 1 {
		t.Fatalf("{shutdown,observed} = %v, want 1", got)
	}
	a.mu.Lock()
	enforce := *a.policy
	enforce.Recovery.Mode = policy.ModeEnforce
	a.policy = &enforce
	a.mu.Unlock()
	a.Recover(context.Background(), time.Now().Add(6*time.Minute+10*time.Second))
	if got := readFile(t, root.Sys("fs", "nfs", "0:54", "shutdown")); got != "1\n" {
		t.Errorf("shutdown attribute = %q after the switch to enforce, want 1", got)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.RecoveryActions.WithLabelValues(policy.RecoveryShutdown, ResultDone)); got != 1 {
		t.Errorf("{shutdown,done} = %v after the switch to enforce, want 1", got)
	}
}
