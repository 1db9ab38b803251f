package tune

import (
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/readahead"
)

// ReadAheadChanges returns the read-ahead changes of a result that were made: the device,
// its first mount point, and the values before and after, in KiB. Values that are not
// numbers are left out.
func ReadAheadChanges(res *Result) []ReadAheadChange {
	if res == nil {
		return nil
	}
	var out []ReadAheadChange
	for _, it := range res.Items {
		a := it.Action
		if a.Kind != KindReadAhead || it.Status != StatusDone {
			continue
		}
		from, err1 := parseKB(a.Old)
		to, err2 := parseKB(a.New)
		if err1 != nil || err2 != nil {
			continue
		}
		c := ReadAheadChange{Device: a.Device, FromKB: from, ToKB: to}
		if len(a.MountPoints) > 0 {
			c.MountPoint = a.MountPoints[0]
		}
		out = append(out, c)
	}
	return out
}

// ReadAheadChange is one read-ahead write apply made.
type ReadAheadChange struct {
	Device, MountPoint string
	FromKB, ToKB       int
}

// RecordVerdicts keeps the verdicts of read-ahead changes in the journal, one per device,
// replacing an earlier verdict of the same device: the journal already holds the changes
// they judge, and revert removes both. Without a journal (reverted meanwhile) nothing is
// written.
func RecordVerdicts(root hostfs.Root, changes []readahead.Change) error {
	if len(changes) == 0 {
		return nil
	}
	unlock, err := lockJournal(root)
	if err != nil {
		return err
	}
	defer unlock()
	j, err := loadJournal(root)
	if err != nil || j == nil {
		return err
	}
	for _, c := range changes {
		kept := j.ReadAheadVerdicts[:0]
		for _, old := range j.ReadAheadVerdicts {
			if old.Device != c.Device {
				kept = append(kept, old)
			}
		}
		j.ReadAheadVerdicts = append(kept, c)
	}
	return j.save(root)
}

// Verdicts returns the verdicts the journal keeps, none without a journal.
func Verdicts(root hostfs.Root) ([]readahead.Change, error) {
	j, err := loadJournal(root)
	if err != nil || j == nil {
		return nil, err
	}
	return j.ReadAheadVerdicts, nil
}

func parseKB(v string) (int, error) { return strconv.Atoi(strings.TrimSpace(v)) }
