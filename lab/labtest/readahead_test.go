//go:build lab

package labtest

// Read-ahead evidence on the kernel's own counters: apply --measure's verdict under a running
// sequential reader and under a random one, behind a 10 ms round trip, and the audit's
// findings for read-ahead that bounds a reader (NFS004) and that wastes (NFS003: sequential
// readers in a small memory cgroup).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/readahead"
)

// raMeasure is apply --measure's window: long enough for 64 MiB of reads at the 12.8 MiB/s a
// 128 KiB window allows over a 10 ms round trip.
const raMeasure = "30s"

// raPolicy gives the test's mounts (their mount points start with the test's name) 4096 KiB.
const raPolicy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - name: read-ahead evidence
    match:
      mountpoint: ` + MountBase + `/TestReadAhead*
    readAheadKB: 4096
`

// runNfstuneFor is RunNfstune with a longer limit, for commands that watch traffic.
func runNfstuneFor(t *testing.T, limit time.Duration, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, Bin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Elapsed: time.Since(start)}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.Exited():
		r.Code = exitErr.ExitCode()
	default:
		t.Fatalf("nfstune %s: %v after %s\nstderr:\n%s", strings.Join(args, " "), err, r.Elapsed, r.Stderr)
	}
	t.Logf("nfstune %s: exit %d in %s", strings.Join(args, " "), r.Code, r.Elapsed.Round(time.Millisecond))
	return r
}

// setReadAheadKB writes read_ahead_kb of dev, as a user would before the test.
func setReadAheadKB(t *testing.T, dev string, kb int) {
	t.Helper()
	if err := os.WriteFile("/sys/class/bdi/"+dev+"/read_ahead_kb", []byte(fmt.Sprint(kb)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// layout writes n files of mib MiB each under dir (fio's layout), and returns their paths.
func layout(t *testing.T, dir string, n, mib int) []string {
	t.Helper()
	var files []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		out, err := exec.Command("dd", "if=/dev/zero", "of="+p, "bs=1M", "count="+fmt.Sprint(mib), "status=none").CombinedOutput()
		if err != nil {
			t.Fatalf("dd to %s: %v: %s", p, err, out)
		}
		files = append(files, p)
	}
	return files
}

// startReader runs script in a shell of its own process group until the end of the test,
// in the cgroup at cgroupDir when it is not empty (the shell moves itself there first, and
// its children inherit it); at the end the whole group is killed and the shell waited for.
func startReader(t *testing.T, cgroupDir, script string) {
	t.Helper()
	if cgroupDir != "" {
		script = "echo $$ > " + ShellQuote(cgroupDir+"/cgroup.procs") + " && " + script
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", script, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		// Give the killed readers time to leave the cgroup and release the mount.
		time.Sleep(2 * time.Second)
	})
}

// seqReaderLoop reads each file once per fio run, 64 KiB at a time, the page cache dropped
// for the file first (invalidate): every run opens its file again, so it reads with the
// read-ahead in force when it starts.
func seqReaderLoop(files []string) string {
	return fmt.Sprintf("while :; do for f in %s; do fio --name=seq --rw=read --bs=64k --ioengine=psync --invalidate=1 --filename=$f --output=/dev/null; done; done",
		strings.Join(files, " "))
}

// randReaderLoop reads 64 KiB at random offsets with 8 jobs, a minute per fio run.
func randReaderLoop(file string) string {
	return "while :; do fio --name=rand --rw=randread --bs=64k --ioengine=psync --numjobs=8 --invalidate=1 --time_based --runtime=60 --filename=" + file + " --output=/dev/null; done"
}

// applyMeasure runs apply --measure with raPolicy and returns the verdict on dev.
func applyMeasure(t *testing.T, dev string) readahead.Change {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cfg, []byte(raPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RunNfstune(t, "revert") })
	r := runNfstuneFor(t, 5*time.Minute, "apply", "--config", cfg, "--persist", "none", "--measure", raMeasure, "-o", "json")
	if r.Code != 0 {
		t.Fatalf("apply --measure: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	var rep struct {
		Verdicts []readahead.Change `json:"readahead_verdicts"`
	}
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("apply -o json: %v\n%s", err, r.Stdout)
	}
	for _, v := range rep.Verdicts {
		if v.Device == dev {
			t.Logf("verdict on %s: %s %d -> %d KiB: %s", dev, v.Verdict, v.FromKB, v.ToKB, v.Reason)
			return v
		}
	}
	t.Fatalf("no verdict on %s in %+v", dev, rep.Verdicts)
	return readahead.Change{}
}

// findings runs audit -o json with more arguments and returns the IDs found on dev.
func findings(t *testing.T, dev string, args ...string) []string {
	t.Helper()
	r := runNfstuneFor(t, 3*time.Minute, append([]string{"audit", "-o", "json", "--fail-on", "none"}, args...)...)
	var rep struct {
		Findings []struct {
			ID, Device, Actual string
		} `json:"findings"`
	}
	if err := json.Unmarshal(r.Stdout, &rep); err != nil {
		t.Fatalf("audit -o json: %v\n%s", err, r.Stdout)
	}
	var ids []string
	for _, f := range rep.Findings {
		if f.Device == dev {
			ids = append(ids, f.ID)
			t.Logf("%s on %s: %s", f.ID, dev, f.Actual)
		}
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, s := range ids {
		if s == id {
			return true
		}
	}
	return false
}

// TestReadAheadVerdictSequential: a sequential reader (64 KiB reads) behind a 10 ms round
// trip with the kernel's 128 KiB read-ahead is bound by its window (NFS004 over a traffic
// window); apply --measure raising it to 4096 KiB under the running reader says "helped".
func TestReadAheadVerdictSequential(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576"})
	files := layout(t, m.Dir, 4, 64)
	setReadAheadKB(t, m.Device, 128)
	Link(t, 5*time.Millisecond, "", 0)
	startReader(t, "", seqReaderLoop(files))
	if ids := findings(t, m.Device, "--traffic-window", "20s"); !contains(ids, "NFS004") {
		t.Errorf("audit --traffic-window 20s at 128 KiB: findings %v, want NFS004", ids)
	}
	if v := applyMeasure(t, m.Device); v.Verdict != readahead.Helped || v.ToKB != 4096 {
		t.Errorf("verdict %s (%d -> %d KiB): %s; want helped, to 4096", v.Verdict, v.FromKB, v.ToKB, v.Reason)
	}
}

// TestReadAheadVerdictRandom: a random reader's rate does not depend on read-ahead, which the
// kernel does not use for reads it sees as random: apply --measure says "no_change".
func TestReadAheadVerdictRandom(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576"})
	files := layout(t, m.Dir, 1, 256)
	setReadAheadKB(t, m.Device, 128)
	Link(t, 5*time.Millisecond, "", 0)
	startReader(t, "", randReaderLoop(files[0]))
	if v := applyMeasure(t, m.Device); v.Verdict != readahead.NoChange {
		t.Errorf("verdict %s (%d -> %d KiB): %s; want no_change", v.Verdict, v.FromKB, v.ToKB, v.Reason)
	}
}

// TestReadAheadWasteSmallCgroup: 16 sequential readers in a 64 MiB memory cgroup with 15360
// KiB of read-ahead each (240 MiB of windows) have their pages evicted before they read
// them; the server sends well over what they read, and the audit says so (NFS003).
func TestReadAheadWasteSmallCgroup(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Version: "4.2", Options: "rsize=1048576"})
	files := layout(t, m.Dir, 16, 16)
	setReadAheadKB(t, m.Device, 15360)
	Link(t, time.Millisecond, "", 0)
	cg := Cgroup2(t)
	if err := os.WriteFile(filepath.Join(cg, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
		t.Fatalf("enabling the memory controller: %v", err)
	}
	small := PodCgroup(t, cg, "nfstune-readahead-small")
	if err := os.WriteFile(filepath.Join(small, "memory.max"), []byte("64M"), 0o644); err != nil {
		t.Fatal(err)
	}
	var readers []string
	for _, f := range files {
		readers = append(readers, "(while :; do fio --name=seq --rw=read --bs=64k --ioengine=psync --invalidate=1 --filename="+f+" --output=/dev/null; done) &")
	}
	startReader(t, small, strings.Join(readers, " ")+" wait")
	// NFS003 needs 256 MiB from the server since the mount.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		time.Sleep(30 * time.Second)
		ids := findings(t, m.Device)
		if contains(ids, "NFS003") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no NFS003 on %s after 5 min of 16 readers in a 64 MiB cgroup: %v", m.Device, ids)
		}
	}
}
