package agent

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWatchMountinfo mounts and unmounts a tmpfs and expects poll(2) on the real
// /proc/self/mountinfo to report each change promptly, and nothing while the table is quiet.
// It needs CAP_SYS_ADMIN; make check runs as root.
func TestWatchMountinfo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }) // in case a step failed mid-way (EINVAL if not)
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() { done <- watchMountinfo(ctx, "/proc/self/mountinfo", changes) }()
	time.Sleep(50 * time.Millisecond) // let poll(2) start

	select {
	case <-changes:
		t.Fatal("change reported while the mount table was quiet")
	case <-time.After(100 * time.Millisecond):
	}
	for i, op := range []func() error{
		func() error { return unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m") },
		func() error { return unix.Unmount(dir, 0) },
	} {
		start := time.Now()
		if err := op(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		select {
		case at := <-changes:
			if d := at.Sub(start); d > 50*time.Millisecond {
				t.Errorf("step %d: change seen after %v, want < 50ms", i, d)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("step %d: no change reported", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch = %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("watch did not stop on cancel")
	}
}

// TestWatchStopsOnPlainFile checks that a fixture file (which never signals) does not spin
// and still stops on cancel.
func TestWatchStopsOnPlainFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(p, []byte("22 1 0:21 / /proc rw - proc proc rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan time.Time, 1)
	done := make(chan error, 1)
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
		t.Fatal(err)
	}
	go func() { done <- watchMountinfo(ctx, p, changes) }()
	time.Sleep(200 * time.Millisecond)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch = %v", err)
	}
	if len(changes) != 0 {
		t.Error("plain file reported a change")
	}
	// A spinning poll loop would burn the whole 200 ms; allow generous slack for the
	// other parallel tests in this process.
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
	if cpu > 150*time.Millisecond*time.Duration(runtime.GOMAXPROCS(0)) {
		t.Errorf("process used %v CPU in 200ms of watching", cpu)
	}
}
