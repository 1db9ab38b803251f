package fio

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
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
