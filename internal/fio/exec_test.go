package fio

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestExecKeepsStderr(t *testing.T) {
	t.Parallel()
	out, err := Exec(context.Background(), "sh", "-c", "echo partial; echo 'fio: bad option' >&2; exit 3")
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *RunError", err)
	}
	if !strings.Contains(err.Error(), "fio: bad option") {
		t.Errorf("error %q lacks stderr", err)
	}
	if string(out) != "partial\n" {
		t.Errorf("stdout = %q", out)
	}
}

func TestExecNotFound(t *testing.T) {
	t.Parallel()
	_, err := Exec(context.Background(), "nfstune-no-such-program")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound in its chain", err)
	}
	if _, err := Exec(context.Background(), "sh", "-c", "exit 127"); errors.Is(err, ErrNotFound) {
		t.Errorf("a program that ran and failed: err = %v matches ErrNotFound", err)
	}
}

func TestExecInterrupt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	// SIGINT, not SIGKILL, is what stops it: sleep dies of the signal.
	_, err := Exec(ctx, "sleep", "5")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "signal: interrupt") {
		t.Errorf("err = %v, want death by SIGINT", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v to stop", d)
	}
}

// A fio that does not stop on SIGINT, with a job that called setsid(): after the grace
// both are killed, the job by its own handle (no process group reaches it).
func TestExecKillsJobsAfterGrace(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Fatalf("setsid (util-linux) is needed: %v", err)
	}
	pidFile := filepath.Join(t.TempDir(), "job.pid")
	script := `trap '' INT TERM
setsid sh -c 'trap "" INT TERM; echo $$ > ` + pidFile + `; exec sleep 60' &
wait`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	if _, err := execGrace(ctx, 300*time.Millisecond, "sh", "-c", script); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v to stop", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The job is gone, or a zombie where nothing reaps orphans (a container's PID 1).
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := procfs.NewProc(pid)
		if err != nil {
			return
		}
		st, err := p.Stat()
		if err != nil || st.State == "Z" {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("job %d (%s) still runs in state %s after fio was stopped", pid, st.Comm, st.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	fake := func(out string) RunFunc {
		return func(context.Context, string, ...string) ([]byte, error) { return []byte(out), nil }
	}
	if v, err := Version(context.Background(), fake("fio-3.33\n"), "fio"); err != nil || v != "fio-3.33" {
		t.Errorf("Version = %q, %v", v, err)
	}
	if _, err := Version(context.Background(), fake("sh: fio: not found"), "fio"); err == nil {
		t.Error("want error for unexpected output")
	}
}
