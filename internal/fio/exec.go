package fio

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// RunFunc runs name with args and returns its standard output; tests pass a fake.
type RunFunc func(ctx context.Context, name string, args ...string) ([]byte, error)

// ErrNotFound is in the chain of a RunError whose program is not installed.
var ErrNotFound = exec.ErrNotFound

// RunError is a failed command with its standard error kept for the message.
type RunError struct {
	Cmd    []string
	Stderr string
	Err    error
}

func (e *RunError) Error() string {
	msg := fmt.Sprintf("running %s: %v", strings.Join(e.Cmd, " "), e.Err)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + s
	}
	return msg
}

func (e *RunError) Unwrap() error { return e.Err }

// StopGrace is how long fio has to stop its jobs after SIGINT before what is left of it
// gets SIGKILL.
const StopGrace = 5 * time.Second

// Exec is the production RunFunc. When ctx is cancelled fio gets SIGINT, so it stops its
// jobs and closes its files, and StopGrace later SIGKILL: fio itself, and then each of its
// job processes that is still running. fio's jobs call setsid(), so they share no process
// group with fio and outlive it unless each is killed (they would go on reading until
// their runtime ends).
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return execGrace(ctx, StopGrace, name, args...)
}

func execGrace(ctx context.Context, grace time.Duration, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var (
		mu   sync.Mutex
		jobs []*os.Process
	)
	cmd.Cancel = func() error {
		mu.Lock()
		jobs = children(cmd.Process.Pid)
		mu.Unlock()
		return cmd.Process.Signal(syscall.SIGINT)
	}
	cmd.WaitDelay = grace
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	mu.Lock()
	for _, p := range jobs {
		_ = p.Kill() // os.ErrProcessDone for a job that stopped on fio's word
		_ = p.Release()
	}
	mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.Bytes(), &RunError{Cmd: append([]string{name}, args...), Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// children returns handles on the processes whose parent is pid, read from /proc. On
// Linux 5.4 and later a handle is a pidfd, so a job that exits before it is killed is
// not mistaken for a later process given its number; the parent is read again once the
// handle is held, so a number reused before that is dropped.
func children(pid int) []*os.Process {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return nil
	}
	var out []*os.Process
	for _, p := range procs {
		if st, err := p.Stat(); err != nil || st.PPID != pid {
			continue
		}
		h, err := os.FindProcess(p.PID)
		if err != nil {
			continue
		}
		if st, err := p.Stat(); err != nil || st.PPID != pid {
			_ = h.Release()
			continue
		}
		out = append(out, h)
	}
	return out
}

// Version returns the "fio-3.33" string fio prints for --version.
func Version(ctx context.Context, run RunFunc, bin string) (string, error) {
	out, err := run(ctx, bin, "--version")
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if !strings.HasPrefix(v, "fio-") {
		return "", fmt.Errorf("unexpected output of %s --version: %q", bin, v)
	}
	return v, nil
}
