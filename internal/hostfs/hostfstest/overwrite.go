// Package hostfstest stands in for other writers of the host's pseudo-files in tests of the
// packages that write them: test support, not part of the binary.
package hostfstest

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// OverwriteAfterWrite replaces the attribute at path with a FIFO and plays another writer
// on it: it takes the next write, then writes value for the read-back that follows, as
// udev's nfsrahead can between a write of read_ahead_kb and its read-back. The function it
// returns gives what was written, and fails the test when nothing was within 10 s.
func OverwriteAfterWrite(t *testing.T, path, value string) (written func() string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		b, err := os.ReadFile(path) // the write under test
		if err != nil {
			t.Error(err)
		}
		got <- string(b)
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil { // the other writer's
			t.Error(err)
		}
	}()
	return func() string {
		t.Helper()
		select {
		case b := <-got:
			return b
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing wrote %s", path)
			return ""
		}
	}
}
