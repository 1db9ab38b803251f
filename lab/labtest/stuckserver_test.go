//go:build lab

package labtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
)

// Pods as kubelet and containerd name their cgroups: one with the systemd cgroup driver,
// one with cgroupfs.
const (
	stuckPodSystemd   = "5f0c7a52-3d1e-4b8a-9c6d-7e8f90a1b2c3"
	stuckCtrSystemd   = "a3f1c2d4e5b60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	stuckPodCgroupfs  = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f7a"
	stuckCtrCgroupfs  = "1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a"
	stuckAuditRuns    = 3
	stuckReaderSettle = 3 * time.Second
)

// stuckReport is the part of `nfstune audit -o json` the stuck-server view adds.
type stuckReport struct {
	Stalled  []inventory.StalledServer `json:"stalled"`
	Blocked  []inventory.BlockedMount  `json:"blocked"`
	Warnings []string                  `json:"warnings"`
}

// TestStuckServerView: two pod-like processes use a hard mount whose server is gone. A
// reader, in a container cgroup named as kubelet's systemd driver and containerd name it,
// blocks in a READ; a shell, in a cgroup named as the cgroupfs driver names it, has its
// working directory on the mount. The audit (-o json) names the server's stuck transports
// among all of its transports, and lists both processes with their PID, state, how they
// use the mount, pod UID and container ID; it returns within the stall window and 1 s
// (more only as far as the same audit with the server up was slower than the window).
// Before Linux 5.14 there is no sunrpc sysfs: the audit says it cannot see transports
// and lists no stalled server.
func TestStuckServerView(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Export: ExportTmp, Version: "4.1", Options: "hard,nosharecache"})
	if err := os.WriteFile(m.Dir+"/data", make([]byte, 4<<20), 0o644); err != nil {
		t.Fatalf("writing test data: %v", err)
	}
	if out, err := exec.Command("dd", "if="+m.Dir+"/data", "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
	cg := Cgroup2(t)
	systemdCG := PodCgroup(t, cg, "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"+strings.ReplaceAll(stuckPodSystemd, "-", "_")+".slice/cri-containerd-"+stuckCtrSystemd+".scope")
	cgroupfsCG := PodCgroup(t, cg, "kubepods/burstable/pod"+stuckPodCgroupfs+"/"+stuckCtrCgroupfs)

	var up []time.Duration
	for range stuckAuditRuns {
		_, r := stuckAudit(t)
		up = append(up, r.Elapsed)
	}
	base := median(up)

	// The shell enters the mount while the server answers, then sleeps there. The reader
	// opens the file while the server answers, as a program that already has its files
	// open, and reads it once the server is gone: a process that blocks in open() has no
	// file descriptor on the mount yet (NFSv4 OPEN goes to the server unless the client
	// holds a delegation), so only its working directory or root can name it.
	shell := StartIn(t, cgroupfsCG, "cd "+ShellQuote(m.Dir)+" && exec sleep 600")
	goRead := filepath.Join(t.TempDir(), "go")
	reader := StartIn(t, systemdCG, "exec 3<"+ShellQuote(m.Dir+"/data")+
		" && while [ ! -e "+ShellQuote(goRead)+" ]; do sleep 0.1; done && exec cat <&3 >/dev/null")
	time.Sleep(time.Second)
	ServerGone(t, GoneLoss)
	if err := os.WriteFile(goRead, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stuckReaderSettle)
	if st := ProcState(reader.Process.Pid); st == "" || st == "Z" {
		t.Fatalf("the reader of %s finished with the server gone (state %q): nothing was blocked", m.Dir, st)
	}
	t.Logf("reader %d state %s, shell %d state %s", reader.Process.Pid, ProcState(reader.Process.Pid), shell.Process.Pid, ProcState(shell.Process.Pid))

	limit := max(inventory.DefaultStallWindow, base) + time.Second
	var gone []time.Duration
	var rep stuckReport
	var out []byte
	for i := range stuckAuditRuns {
		var r Result
		rep, r = stuckAudit(t, "--log-level", "debug")
		out = r.Stdout
		gone = append(gone, r.Elapsed)
		t.Logf("server gone, audit %d: %s; stages:\n%s", i+1, r.Elapsed, r.Stderr)
	}
	// The table, for people (docs/agent.md quotes it).
	table := RunNfstune(t, "audit", "--fail-on", "none")
	if _, view, ok := strings.Cut(string(table.Stdout), "\nstalled servers\n"); ok {
		t.Logf("nfstune audit, its stuck-server view:\nstalled servers\n%s", view)
	} else if kernelAtLeast(t, 5, 14) {
		t.Errorf("the audit table has no stalled servers section:\n%s", table.Stdout)
	}
	t.Logf("stalled and blocked of the last audit:\n%s", jsonOf(t, struct {
		Stalled []inventory.StalledServer `json:"stalled"`
		Blocked []inventory.BlockedMount  `json:"blocked"`
	}{rep.Stalled, rep.Blocked}))
	if got := median(gone); got > limit {
		t.Errorf("audit took %s (median of %v) with the server gone, want at most %s (%s with the server up)", got, gone, limit, base)
	}

	if !kernelAtLeast(t, 5, 14) {
		if !slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.HasPrefix(w, noSunrpcSysfs) }) {
			t.Errorf("kernel %s has no sunrpc sysfs, and the audit does not say so; warnings: %q", kernelRelease(t), rep.Warnings)
		}
		if len(rep.Stalled) != 0 || len(rep.Blocked) != 0 {
			t.Errorf("kernel %s shows no transports, yet the audit reports stalled servers or blocked processes:\n%s", kernelRelease(t), out)
		}
		return
	}

	// The stuck transports, among every transport to the server.
	var server *inventory.StalledServer
	for i := range rep.Stalled {
		if rep.Stalled[i].Addr == "127.0.0.1" {
			server = &rep.Stalled[i]
		}
	}
	if server == nil {
		t.Fatalf("127.0.0.1 is not among the stalled servers:\n%s", out)
	}
	stuck := 0
	for _, x := range server.Each {
		if x.Stuck {
			stuck++
			if !slices.Contains(server.Transports, x.Name) {
				t.Errorf("transport %s is marked stuck but not named in %q", x.Name, server.Transports)
			}
		}
	}
	if stuck == 0 || stuck != len(server.Transports) || len(server.Each) < stuck {
		t.Errorf("127.0.0.1: %d transports marked stuck of %d listed, %d named stuck", stuck, len(server.Each), len(server.Transports))
	}
	t.Logf("127.0.0.1: %d of %d transports stuck", stuck, len(server.Each))

	// Both processes, with their pods.
	var holders []inventory.Holder
	for _, b := range rep.Blocked {
		if b.Device == m.Device {
			holders = b.Holders
		}
	}
	find := func(pid int) *inventory.Holder {
		for i := range holders {
			if holders[i].PID == pid {
				return &holders[i]
			}
		}
		return nil
	}
	if h := find(reader.Process.Pid); h == nil {
		t.Errorf("the blocked reader %d is not listed for %s (%s): %+v", reader.Process.Pid, m.Dir, m.Device, holders)
	} else {
		// A hard mount waits in TASK_KILLABLE, which /proc shows as D.
		if h.State != "D" || h.BlockedThreads != 1 || !slices.Contains(h.Via, inventory.ViaFD) || h.Comm != "cat" {
			t.Errorf("reader: %+v, want state D, 1 blocked thread, via fd, command cat", *h)
		}
		if h.PodUID != stuckPodSystemd || h.ContainerID != stuckCtrSystemd {
			t.Errorf("reader: pod %q container %q, want %s %s (systemd cgroup driver)", h.PodUID, h.ContainerID, stuckPodSystemd, stuckCtrSystemd)
		}
	}
	if h := find(shell.Process.Pid); h == nil {
		t.Errorf("the process %d with its working directory on %s is not listed: %+v", shell.Process.Pid, m.Dir, holders)
	} else {
		if !slices.Contains(h.Via, inventory.ViaCwd) || h.Comm != "sleep" {
			t.Errorf("shell: %+v, want via cwd, command sleep", *h)
		}
		if h.PodUID != stuckPodCgroupfs || h.ContainerID != stuckCtrCgroupfs {
			t.Errorf("shell: pod %q container %q, want %s %s (cgroupfs driver)", h.PodUID, h.ContainerID, stuckPodCgroupfs, stuckCtrCgroupfs)
		}
	}
	if t.Failed() {
		t.Logf("audit:\n%s", out)
	}
}

// stuckAudit runs nfstune audit -o json and decodes the stuck-server view.
func stuckAudit(t *testing.T, args ...string) (stuckReport, Result) {
	t.Helper()
	r := RunNfstune(t, append([]string{"audit", "-o", "json", "--fail-on", "none"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("nfstune audit exited %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	var rep stuckReport
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("decoding audit JSON: %v\n%s", err, r.Stdout)
	}
	return rep, r
}

// jsonOf is v as indented JSON, for logs.
func jsonOf(t *testing.T, v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
