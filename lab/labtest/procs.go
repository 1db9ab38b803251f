//go:build lab

package labtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/podio"
)

// StartAgent starts `nfstune agent --pid 0` with args, its output on the test's stderr,
// and returns the function that stops it (SIGTERM, then waits), which the test's cleanup
// also calls; calling it again does nothing.
func StartAgent(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	agent := exec.Command(Bin(t), append([]string{"agent", "--pid", "0"}, args...)...)
	agent.Stdout, agent.Stderr = os.Stderr, os.Stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = agent.Process.Signal(syscall.SIGTERM)
			_ = agent.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// Cgroup2 mounts a cgroup v2 hierarchy of its own for the test and returns its path. The
// paths in /proc/<pid>/cgroup are relative to the hierarchy's root, wherever it is mounted.
func Cgroup2(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "cgroup2", "cgroup2", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting cgroup2: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// HostCgroup mounts the cgroup v2 hierarchy on /sys/fs/cgroup when nothing is there, until
// the end of the test: the agent finds pods' cgroups there, and a cgroup made under
// Cgroup2's mount is the same directory in it (cgroup v2 has one hierarchy).
func HostCgroup(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		return
	}
	if out, err := exec.Command("mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup").CombinedOutput(); err != nil {
		t.Fatalf("mounting cgroup2 on /sys/fs/cgroup: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "/sys/fs/cgroup").Run() })
}

// Tracefs returns the tracefs directory the per-pod collector reads (podio.FindTracefs),
// mounting tracefs on /sys/kernel/tracing, until the end of the test, when neither place
// has it.
func Tracefs(t *testing.T) string {
	t.Helper()
	if dir, err := podio.FindTracefs(); err == nil {
		return dir
	}
	if out, err := exec.Command("mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing").CombinedOutput(); err != nil {
		t.Fatalf("mounting tracefs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "/sys/kernel/tracing").Run() })
	dir, err := podio.FindTracefs()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// PodCgroup creates the cgroup rel (and its parents) under the hierarchy at root, and
// removes them, deepest first, at the end of the test. A parent that another PodCgroup
// still uses is left to that one's cleanup.
func PodCgroup(t *testing.T, root, rel string) string {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup %s: %v", rel, err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Logf("removing cgroup %s: %v", dir, err)
			return
		}
		for d := filepath.Dir(dir); d != root; d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				return // still used by another PodCgroup, whose cleanup removes it
			}
		}
	})
	return dir
}

// MemoryCgroup returns a cgroup whose memory.max is limit, as a pod's memory limit is, in a
// cgroup2 hierarchy mounted for the test; name is its directory.
func MemoryCgroup(t *testing.T, name, limit string) string {
	t.Helper()
	root := Cgroup2(t)
	if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
		t.Fatalf("enabling the memory controller: %v", err)
	}
	dir := PodCgroup(t, root, name)
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(limit), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// StartReaders runs sh -c script in a process group of its own, in the cgroup at
// cgroupDir when it is not empty (the shell moves itself there first, and its children
// inherit it). The returned function, also run at the end of the test, kills the group
// and then every process left in the cgroup, and waits up to 60 s for the cgroup to empty:
// fio's job processes call setsid(), so killing the group kills fio and leaves its jobs
// reading. A reader killed in an NFS READ leaves when the READ ends.
func StartReaders(t *testing.T, cgroupDir, script string) (stop func()) {
	t.Helper()
	if cgroupDir != "" {
		script = "echo $$ > " + ShellQuote(cgroupDir+"/cgroup.procs") + " && " + script
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", script, err)
	}
	stop = sync.OnceFunc(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if cgroupDir == "" {
			return
		}
		if left := killCgroup(cgroupDir, 60*time.Second); len(left) > 0 {
			t.Errorf("readers %v still in %s 60 s after they were killed", left, cgroupDir)
		}
	})
	t.Cleanup(stop)
	return stop
}

// DescribeProcs lists the processes of the cgroup at dir, one line each: pid, state and
// command, and where the kernel has it wait (/proc/<pid>/stat and wchan, through procfs),
// then the cgroup's memory; for a test to say why a workload in it did not finish.
func DescribeProcs(dir string) string {
	pids, err := CgroupPIDs(dir)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	var out strings.Builder
	for _, pid := range pids {
		st := procfs.ProcStat{Comm: "?", State: "?"}
		var wchan string
		if p, err := procfs.NewProc(pid); err == nil {
			if s, err := p.Stat(); err == nil {
				st = s
			}
			wchan, _ = p.Wchan()
		}
		fmt.Fprintf(&out, "%d %s %s wchan=%s\n", pid, st.State, st.Comm, wchan)
	}
	if out.Len() == 0 {
		out.WriteString("(no process)\n")
	}
	// Its memory: what the limit leaves the page cache once the programs' own pages are in.
	current, _ := os.ReadFile(filepath.Join(dir, "memory.current"))
	limit, _ := os.ReadFile(filepath.Join(dir, "memory.max"))
	fmt.Fprintf(&out, "memory.current %s memory.max %s", bytes.TrimSpace(current), bytes.TrimSpace(limit))
	if stat, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
		for line := range strings.SplitSeq(string(stat), "\n") {
			if k, _, _ := strings.Cut(line, " "); k == "anon" || k == "file" || k == "shmem" || k == "workingset_refault_file" || k == "pgmajfault" {
				out.WriteString(" " + line)
			}
		}
	}
	if events, err := os.ReadFile(filepath.Join(dir, "memory.events")); err == nil {
		out.WriteString("; memory.events " + strings.Join(strings.Fields(string(events)), " "))
	}
	return out.String()
}

// CgroupPIDs returns the processes of the cgroup at dir, from its cgroup.procs.
func CgroupPIDs(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("reading the processes of %s: %w", dir, err)
	}
	var pids []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TailFile returns the last n lines of the file at path, or the error reading it in
// parentheses, so that a failure message does not pass it off as the file's text.
func TailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return Tail(string(b), n)
}

// killCgroup sends SIGKILL to every process of the cgroup at dir until none is left, or
// until limit has passed; it returns the processes left.
func killCgroup(dir string, limit time.Duration) []int {
	for deadline := time.Now().Add(limit); ; {
		pids, err := CgroupPIDs(dir)
		if err != nil {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StartIn starts sh -c script in the cgroup at dir: the shell moves itself there before
// running the script. It is killed and waited for at the end of the test, after the
// server is back, and so is whatever it left in the cgroup (a child of a loop).
func StartIn(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "echo $$ > "+ShellQuote(dir+"/cgroup.procs")+" && "+script)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", script, err)
	}
	t.Cleanup(func() {
		ServerBack(t)
		_ = cmd.Process.Kill()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done: //nolint:errcheck // killed above: the exit status says so
		case <-time.After(60 * time.Second):
			t.Errorf("process %d (%q) did not end within 60 s of the server's return", cmd.Process.Pid, script)
		}
		if left := killCgroup(dir, 10*time.Second); len(left) > 0 {
			t.Logf("processes %v of %q still in %s 10 s after they were killed", left, script, dir)
		}
	})
	return cmd
}

// SeqReaderLoop is a shell loop for StartReaders that reads files in turn, forever, 64 KiB
// at a time with dd, each after dropping its pages (iflag=nocache count=0:
// POSIX_FADV_DONTNEED): every pass opens the file again and reads it from the server with
// the read-ahead in force then. dd gives no access advice (fio's default fadvise_hint
// doubles the window of a sequential job).
func SeqReaderLoop(files []string) string {
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = ShellQuote(f)
	}
	return `while :; do for f in ` + strings.Join(quoted, " ") +
		`; do dd if="$f" iflag=nocache count=0 status=none; dd if="$f" of=/dev/null bs=64k status=none; done; done`
}

// ShellQuote quotes s for sh.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ProcState is the state letter of /proc/<pid>/stat ("D", "S", "Z"...), "" if it is gone.
func ProcState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, so split after the last ')'.
	i := strings.LastIndex(string(b), ") ")
	if i < 0 || i+3 > len(b) {
		return ""
	}
	return string(b[i+2 : i+3])
}
