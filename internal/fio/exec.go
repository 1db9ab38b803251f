package fio

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// RunFunc runs name with args and returns its standard output; tests pass a fake.
type RunFunc func(ctx context.Context, name string, args ...string) ([]byte, error)

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

// Exec is the production RunFunc. When ctx is cancelled the command gets SIGINT, so fio
// stops its jobs and closes its files, and SIGKILL five seconds later.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.Bytes(), &RunError{Cmd: append([]string{name}, args...), Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
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
