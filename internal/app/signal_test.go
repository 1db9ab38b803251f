package app

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/cli"
)

// TestWatchSignals: the first signal cancels the context with the signal as its cause; the
// second exits at once with 128 + its number and says why.
func TestWatchSignals(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	var errOut bytes.Buffer
	exited := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		watchSignals(sigs, cancel, &errOut, func(code int) { exited <- code })
		close(done)
	}()

	sigs <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not cancel the context")
	}
	var in *cli.Interrupted
	if !errors.As(context.Cause(ctx), &in) || in.Signal != syscall.SIGTERM {
		t.Errorf("cause = %v, want cli.Interrupted{SIGTERM}", context.Cause(ctx))
	}
	select {
	case code := <-exited:
		t.Fatalf("exited with %d on the first signal", code)
	default:
	}

	sigs <- syscall.SIGINT
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit code %d on a second SIGINT, want 130", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not exit")
	}
	<-done
	if !strings.Contains(errOut.String(), "interrupt again: exiting now") {
		t.Errorf("stderr = %q", errOut.String())
	}
}
