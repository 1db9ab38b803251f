package tune

import (
	"fmt"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// JournalReadAhead records in the journal the read-ahead of the NFS superblock dev as it is
// now, before a change made outside a plan (the agent's adaptive read-ahead), unless the
// journal already holds it: `nfstune revert` then puts back the value from before the
// first such change, as it does for apply's. It returns ErrBusy while an apply, revert or
// shutdown holds the journal, and any error when the value could not be recorded; the
// caller must not write then.
func JournalReadAhead(root hostfs.Root, dev string) error {
	return JournalReadAheads(root, []string{dev})
}

// JournalReadAheads is JournalReadAhead for several devices at once, in one journal write:
// the agent's start of every new superblock it finds in one reconcile. Nothing is recorded
// when one of them cannot be.
func JournalReadAheads(root hostfs.Root, devs []string) error {
	actions := make([]Action, 0, len(devs))
	for _, dev := range devs {
		a := Action{Kind: KindReadAhead, Path: "/sys/class/bdi/" + dev + "/read_ahead_kb", Device: dev}
		if err := checkTarget(a.Kind, a.Path); err != nil {
			return fmt.Errorf("journaling read-ahead: %w", err)
		}
		actions = append(actions, a)
	}
	j, unlock, err := lockLoadJournal(root)
	if err != nil {
		return err
	}
	defer unlock()
	recorded := false
	for _, a := range actions {
		if j.find(a.Path) >= 0 {
			continue
		}
		if err := j.record(root, a); err != nil {
			return fmt.Errorf("journaling read-ahead of %s: %w", a.Device, err)
		}
		// The change follows at once; revert writes the original back whatever Done says.
		j.Entries[len(j.Entries)-1].Done = true
		recorded = true
	}
	if !recorded {
		return nil
	}
	return j.save(root)
}
