//go:build lab

package agentlab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/tune"
	"github.com/nfstune/nfstune/lab/labtest"
)

// TestShutdownServerBack: a superblock whose server answers is never shut down, whatever
// its history. An NFSv3 hard mount of 127.0.0.2 (timeo=10,retrans=1, so that major
// timeouts come within seconds) with 127.0.0.2 unreachable while a reader waits on it,
// until the kernel logs a major timeout; then 127.0.0.2 is back, the reader finishes, and
// mountstats counts the major timeouts.
//
//   - nfstune shutdown --yes of it is refused (exit code 3): the major timeouts are old,
//     and no request is waiting;
//   - 127.0.0.2 goes again with a reader waiting: tune.PlanShutdown, the call the agent's
//     recovery makes, sees the server stalled; 127.0.0.2 comes back and the reader
//     finishes; tune.Shutdown of that plan is refused (ErrNotStalled).
//
// The shutdown attribute stays 0, the journal is unchanged, and the mount still writes and
// reads. Before Linux 6.6 there is no attribute, and the first refusal is exit code 4.
func TestShutdownServerBack(t *testing.T) {
	labtest.RequireGuest(t)
	m := labtest.Mount(t, labtest.MountSpec{Server: "127.0.0.2", Version: "3", Options: "hard,nosharecache,timeo=10,retrans=1"})
	attr := hostfs.NFSShutdownAttr(m.Device)
	data := m.Dir + "/data"
	if err := os.WriteFile(data, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatalf("writing test data: %v", err)
	}
	journal := readJournal(t)

	dropCache(t, data)
	// mountstats counts a request's major timeouts when it completes; the kernel logs
	// "not responding" at the first (rpc_check_timeout, net/sunrpc/clnt.c).
	logged := notResponding(t)
	labtest.AddrGone(t, "127.0.0.2")
	reader := startRead(t, data)
	deadline := time.Now().Add(2 * time.Minute)
	for notResponding(t) == logged {
		if time.Now().After(deadline) {
			t.Fatalf("no major timeout logged for 127.0.0.2 2 min after it went")
		}
		time.Sleep(time.Second)
	}
	labtest.ServerBack(t)
	waitRead(t, reader)
	n := majorTimeouts(t, m.Dir)
	if n == 0 {
		t.Fatalf("mountstats counts no major timeout on %s once the read completed", m.Dir)
	}
	t.Logf("major timeouts on %s: %d; 127.0.0.2 answers again", m.Dir, n)

	r := labtest.RunNfstune(t, "shutdown", "--yes", m.Dir)
	t.Logf("nfstune shutdown --yes %s, old major timeouts, the server answering:\n%s%s", m.Dir, r.Stdout, r.Stderr)
	if !kernelAtLeast(t, 6, 6) {
		if r.Code != 4 {
			t.Errorf("shutdown on kernel %s: exit %d, want 4 (no shutdown knob)", kernelRelease(t), r.Code)
		}
		return
	}
	if r.Code != 3 || !strings.Contains(string(r.Stderr), "not seen stalled") {
		t.Errorf("shutdown with old major timeouts and the server answering: exit %d, stderr %q; want 3 and \"not seen stalled\"", r.Code, r.Stderr)
	}
	checkNotShutDown(t, attr, journal)

	dropCache(t, data)
	labtest.AddrGone(t, "127.0.0.2")
	reader = startRead(t, data)
	ctx := context.Background()
	var plan *tune.ShutdownPlan
	deadline = time.Now().Add(2 * time.Minute)
	for {
		p, err := tune.PlanShutdown(ctx, hostfs.Root("/"), m.Device, tune.ShutdownOptions{StallWindow: time.Second})
		if err == nil && p.Stalled != nil {
			plan = p
			break
		}
		if !errors.Is(err, tune.ErrNotStalled) || time.Now().After(deadline) {
			t.Fatalf("PlanShutdown with 127.0.0.2 gone: %v; want a plan with the server stalled", err)
		}
	}
	t.Logf("planned with %s stalled (%d waiting on %s)", plan.Stalled.Addr, plan.Stalled.Waiting, strings.Join(plan.Stalled.Transports, ", "))
	labtest.ServerBack(t)
	waitRead(t, reader)
	res, err := tune.Shutdown(ctx, hostfs.Root("/"), plan, time.Now())
	t.Logf("tune.Shutdown after the server came back: %+v, %v", res, err)
	if !errors.Is(err, tune.ErrNotStalled) || res != nil {
		t.Errorf("Shutdown with the server back since the plan = %+v, %v; want ErrNotStalled and nothing written", res, err)
	}
	checkNotShutDown(t, attr, journal)
	if out, err := writeReadBack(m.Dir); err != nil || string(out) != "still here\n" {
		t.Errorf("%s after the refused shutdowns: %v, %q; want it to write and read", m.Dir, err, out)
	}
}

// dropCache drops the cached pages of file, while its server answers: opening the file
// revalidates it with the server.
func dropCache(t *testing.T, file string) {
	t.Helper()
	if out, err := exec.Command("dd", "if="+file, "iflag=nocache", "count=0", "status=none").CombinedOutput(); err != nil {
		t.Fatalf("dropping cached pages: %v: %s", err, out)
	}
}

// startRead starts reading file: with its server gone, the read waits on it.
func startRead(t *testing.T, file string) <-chan error {
	t.Helper()
	cmd := exec.Command("cat", file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return done
}

// waitRead waits for a read of startRead to finish once the server is back.
func waitRead(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the read with the server back: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the read still waits 3 min after the server came back")
	}
}

// notResponding counts the kernel's "nfs: server 127.0.0.2 not responding" messages.
func notResponding(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		t.Fatalf("dmesg: %v", err)
	}
	return strings.Count(string(out), "nfs: server 127.0.0.2 not responding")
}

// majorTimeouts sums the major timeouts of the per-operation rows of the mount at dir in
// /proc/self/mountstats.
func majorTimeouts(t *testing.T, dir string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountstats")
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	in, perOp := false, false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "device ") {
			in, perOp = strings.Contains(line, " mounted on "+dir+" "), false
			continue
		}
		if !in {
			continue
		}
		if strings.TrimSpace(line) == "per-op statistics" {
			perOp = true
			continue
		}
		f := strings.Fields(line)
		if perOp && len(f) >= 4 && strings.HasSuffix(f[0], ":") {
			v, _ := strconv.ParseUint(f[3], 10, 64)
			n += v
		}
	}
	return n
}

// readJournal returns the journal's bytes, nil when there is none.
func readJournal(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(journalPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b
}

// checkNotShutDown fails the test when attr does not read 0 or the journal changed.
func checkNotShutDown(t *testing.T, attr string, journal []byte) {
	t.Helper()
	if b, err := os.ReadFile(attr); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("%s = %q, %v; want 0: the superblock was shut down", attr, b, err)
	}
	if now := readJournal(t); !bytes.Equal(now, journal) {
		t.Errorf("the journal changed though nothing was shut down:\n%s", now)
	}
}

// writeReadBack writes a file in dir and reads it back, within a minute.
func writeReadBack(dir string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := dir + "/after-refusal"
	return exec.CommandContext(ctx, "sh", "-c", "echo still here > "+labtest.ShellQuote(f)+" && cat "+labtest.ShellQuote(f)).CombinedOutput()
}
