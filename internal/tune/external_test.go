package tune

import (
	"context"
	"errors"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TestJournalReadAheadThenRevert: a writer outside a plan (the agent's adaptive read-ahead)
// journals the value before its first change only; revert puts that value back, whatever
// the later changes were, and removes the journal.
func TestJournalReadAheadThenRevert(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	const attr = "sys/devices/virtual/bdi/0:53/read_ahead_kb"
	for _, kb := range []int{1024, 2048, 512} {
		if err := JournalReadAhead(root, "0:53"); err != nil {
			t.Fatal(err)
		}
		if _, err := hostfs.SetReadAhead(root, "0:53", kb); err != nil {
			t.Fatal(err)
		}
	}
	if pending, err := Pending(root); err != nil || !pending {
		t.Fatalf("Pending = %v, %v; want a journal", pending, err)
	}
	if _, err := Revert(root); err != nil {
		t.Fatal(err)
	}
	if got := readFixture(t, root, attr); got != "128\n" {
		t.Errorf("read_ahead_kb after revert = %q, want the original 128", got)
	}
	if pending, _ := Pending(root); pending {
		t.Error("journal left after revert")
	}
}

// TestJournalReadAheadsTogether: several superblocks journaled in one call, one of them
// already journaled, keep each its value from before its first change; one device that
// is not an NFS bdi refuses the whole call and records nothing.
func TestJournalReadAheadsTogether(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	if err := JournalReadAheads(root, []string{"0:53", "../8:0"}); err == nil {
		t.Fatal("a path outside the bdi directory was accepted")
	}
	if pending, _ := Pending(root); pending {
		t.Fatal("a refused call left a journal")
	}
	if err := JournalReadAhead(root, "0:53"); err != nil {
		t.Fatal(err)
	}
	if _, err := hostfs.SetReadAhead(root, "0:53", 1024); err != nil {
		t.Fatal(err)
	}
	if _, err := hostfs.SetReadAhead(root, "0:54", 256); err != nil {
		t.Fatal(err)
	}
	if err := JournalReadAheads(root, []string{"0:53", "0:54"}); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"0:53", "0:54"} {
		if _, err := hostfs.SetReadAhead(root, dev, 4096); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Revert(root); err != nil {
		t.Fatal(err)
	}
	for dev, want := range map[string]string{"0:53": "128\n", "0:54": "256\n"} {
		if got := readFixture(t, root, "sys/devices/virtual/bdi/"+dev+"/read_ahead_kb"); got != want {
			t.Errorf("%s after revert = %q, want %q, its value before its first journaled change", dev, got, want)
		}
	}
}

// TestJournalReadAheadKeepsApplysOriginal: after apply changed a superblock, the agent's
// journaling keeps apply's original.
func TestJournalReadAheadKeepsApplysOriginal(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	if _, err := Apply(context.Background(), root, plan(t, root), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := JournalReadAhead(root, "0:53"); err != nil {
		t.Fatal(err)
	}
	if _, err := hostfs.SetReadAhead(root, "0:53", 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(root); err != nil {
		t.Fatal(err)
	}
	if got := readFixture(t, root, "sys/devices/virtual/bdi/0:53/read_ahead_kb"); got != "128\n" {
		t.Errorf("read_ahead_kb after revert = %q, want the original 128", got)
	}
}

// TestJournalReadAheadRefuses: a device that is not an anonymous one, and a journal another
// nfstune holds, are errors: the caller does not write.
func TestJournalReadAheadRefuses(t *testing.T) {
	t.Parallel()
	root := fixtureRoot(t)
	if err := JournalReadAhead(root, "8:0"); err == nil {
		t.Error("journaled a block device")
	}
	if err := JournalReadAhead(root, "../0:53"); err == nil {
		t.Error("journaled a path")
	}
	unlock, err := lockJournal(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := JournalReadAhead(root, "0:53"); !errors.Is(err, ErrBusy) {
		t.Errorf("err = %v, want ErrBusy", err)
	}
}
