package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"syscall"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/readahead"
)

// KindDir is a journal entry for a directory apply created to hold a file.
const KindDir Kind = "dir"

// journalVersion is the version apply writes. Version 1, of earlier nfstune, journaled a
// file's original only, not what apply wrote: revert still reads it (revertFile).
const (
	journalVersion       = 2
	oldestJournalVersion = 1
)

// MaxJournalSize caps the journal: the originals of a few small files and values, and each
// write of those files. apply refuses to start a journal revert would not read.
const MaxJournalSize = 8 << 20

// Journal records the original of every value and file apply changes, and each write to a
// file, so that Revert can put them back. It is written (and fsync'd) before the first
// change and after each one.
type Journal struct {
	Version int     `json:"version"`
	Entries []Entry `json:"entries"`
	// Created are the directories made to hold the journal itself.
	Created []string `json:"created_dirs,omitempty"`
	// ReadAheadVerdicts are the last verdict on each device whose read-ahead apply
	// --measure changed (RecordVerdicts): evidence, nothing to revert.
	ReadAheadVerdicts []readahead.Change `json:"readahead_verdicts,omitempty"`
}

// Entry is the original state of one attribute, file or directory.
type Entry struct {
	Kind Kind   `json:"kind"`
	Path string `json:"path"`
	// Absent means the file or directory did not exist: revert removes it.
	Absent bool `json:"absent,omitempty"`
	// Original is the attribute value as the kernel printed it, or the file's bytes, before
	// the first apply.
	Original []byte `json:"original,omitempty"`
	// Writes are apply's writes to a file, oldest first: what revert takes back out of it.
	Writes []Write `json:"writes,omitempty"`
	// Mode is the file's permission bits.
	Mode fs.FileMode `json:"mode,omitempty"`
	// Done is set once apply has made its change.
	Done bool `json:"done"`
	// Shutdown is the record of a KindShutdown entry: nothing to restore, only what was done.
	Shutdown *ShutdownRecord `json:"shutdown,omitempty"`
}

// Write is one write of a file by apply: the file as apply read it right before, and the
// content it wrote. The lines that differ are nfstune's change; revert swaps them back
// (undoWrite) and keeps every other line.
type Write struct {
	Old       []byte `json:"old,omitempty"`
	OldAbsent bool   `json:"old_absent,omitempty"`
	New       []byte `json:"new"`
	// Done is set once the file is written.
	Done bool `json:"done"`
}

// isFile reports whether the entry is a file apply wrote.
func (e Entry) isFile() bool {
	return !e.Kind.Live() && e.Kind != KindDir && e.Kind != KindShutdown
}

func (j *Journal) find(p string) int {
	for i, e := range j.Entries {
		if e.Path == p {
			return i
		}
	}
	return -1
}

// loadJournal reads the journal; it returns nil, nil when there is none. A journal larger
// than MaxJournalSize, or naming anything apply could not have written, is refused whole.
func loadJournal(root hostfs.Root) (*Journal, error) {
	b, err := hostfs.ReadFile(root.Path(JournalPath), MaxJournalSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading journal %q: %w", JournalPath, err)
	}
	j, err := decodeJournal(b)
	if err != nil {
		return nil, fmt.Errorf("reading journal %q: %w", JournalPath, err)
	}
	return j, nil
}

// decodeJournal parses a journal and refuses one that is too large, of another version, or
// naming anything apply could not have written.
func decodeJournal(b []byte) (*Journal, error) {
	if len(b) > MaxJournalSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxJournalSize)
	}
	j := &Journal{}
	if err := json.Unmarshal(b, j); err != nil {
		return nil, err
	}
	if j.Version < oldestJournalVersion || j.Version > journalVersion {
		return nil, fmt.Errorf("version %d, want %d to %d", j.Version, oldestJournalVersion, journalVersion)
	}
	if err := j.check(); err != nil {
		return nil, fmt.Errorf("refused: %w", err)
	}
	return j, nil
}

// save writes the journal atomically and durably, as the current version: entries of an
// earlier version read the same in it.
func (j *Journal) save(root hostfs.Root) error {
	j.Version = journalVersion
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if len(b)+1 > MaxJournalSize {
		return fmt.Errorf("saving journal: %d bytes, more than revert reads (%d)", len(b)+1, MaxJournalSize)
	}
	if err := root.ReplaceFile(JournalPath, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("saving journal: %w", err)
	}
	return nil
}

// record adds the original state of what an action writes, unless the journal already has
// it: after an interrupted or repeated apply the first original is the one to go back to.
// For a file it also adds the write: the file as it is now and the content the action
// writes.
func (j *Journal) record(root hostfs.Root, a Action) error {
	if !a.Kind.Live() {
		if err := checkWritable(root, a.Path); err != nil {
			return err
		}
		for _, d := range missingDirs(root, a.Path) {
			if j.find(d) < 0 {
				j.Entries = append(j.Entries, Entry{Kind: KindDir, Path: d, Absent: true})
			}
		}
	}
	if i := j.find(a.Path); i >= 0 {
		if a.Kind.Live() {
			return nil
		}
		w, err := newWrite(root, a)
		if err != nil {
			return err
		}
		j.Entries[i].Writes = append(j.Entries[i].Writes, w)
		return nil
	}
	e := Entry{Kind: a.Kind, Path: a.Path}
	if a.Kind.Live() {
		v, err := readLiveRaw(root, a.Path)
		if err != nil {
			return err
		}
		e.Original = []byte(v)
	} else {
		content, absent, err := readFile(root, a.Path)
		if err != nil {
			return err
		}
		e.Absent = absent
		e.Mode = 0o644
		e.Writes = []Write{{Old: []byte(content), OldAbsent: absent, New: []byte(a.New)}}
		if !absent {
			e.Original = []byte(content)
			attr, err := root.Attr(a.Path)
			if err != nil {
				return err
			}
			e.Mode = attr.Perm
			if err := checkMode(e.Mode); err != nil {
				return fmt.Errorf("%s: %w", a.Path, err)
			}
		}
	}
	j.Entries = append(j.Entries, e)
	return nil
}

// newWrite reads the file an action is about to write, for its Write.
func newWrite(root hostfs.Root, a Action) (Write, error) {
	content, absent, err := readFile(root, a.Path)
	if err != nil {
		return Write{}, err
	}
	return Write{Old: []byte(content), OldAbsent: absent, New: []byte(a.New)}, nil
}

// ErrBusy means another apply, revert or shutdown holds the journal.
var ErrBusy = errors.New("another nfstune apply, revert or shutdown is running")

// lockLoadJournal locks the journal (lockJournal) and loads it, or starts a new one naming
// the directories the lock created, for a writer that adds entries. The caller calls unlock
// once it has saved.
func lockLoadJournal(root hostfs.Root) (j *Journal, unlock func(), err error) {
	created := missingDirs(root, JournalPath)
	unlock, err = lockJournal(root)
	if err != nil {
		return nil, nil, err
	}
	j, err = loadJournal(root)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	if j == nil {
		j = &Journal{Version: journalVersion, Created: created}
	}
	return j, unlock, nil
}

// lockJournal takes an exclusive flock(2) on the journal's directory, creating it, so that
// two applies (or an apply and a revert) never interleave their journal updates. The lock
// is on the directory so that no lock file outlives a revert. A symbolic link on the way
// is refused: the journal would be written elsewhere.
func lockJournal(root hostfs.Root) (unlock func(), err error) {
	d, err := root.OpenDir(path.Dir(JournalPath), 0o700)
	if err != nil {
		return nil, fmt.Errorf("locking journal: %w", err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("locking journal: %w", err)
	}
	return func() { d.Close() }, nil
}
