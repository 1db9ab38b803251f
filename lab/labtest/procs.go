//go:build lab

package labtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

// PodCgroup creates the cgroup rel (and its parents) under the hierarchy at root, and
// removes them, deepest first, at the end of the test.
func PodCgroup(t *testing.T, root, rel string) string {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating cgroup %s: %v", rel, err)
	}
	t.Cleanup(func() {
		for d := dir; d != root; d = filepath.Dir(d) {
			if err := os.Remove(d); err != nil {
				t.Logf("removing cgroup %s: %v", d, err)
				return
			}
		}
	})
	return dir
}

// StartIn starts sh -c script in the cgroup at dir: the shell moves itself there before
// running the script. It is killed and waited for at the end of the test, after the
// server is back.
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
	})
	return cmd
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
