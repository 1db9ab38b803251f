package tune

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// Item statuses in a Result.
const (
	StatusDone      = "done"
	StatusFailed    = "failed"
	StatusUnchanged = "unchanged"
	StatusGone      = "gone"
	// StatusRefused is revert's status for a file changed since apply in a way it cannot
	// separate from nfstune's own change: the file is left as it is.
	StatusRefused = "refused"
)

// ApplyOptions change how a plan is carried out.
type ApplyOptions struct {
	// Delay is slept before each action; the lab uses it to kill apply half way.
	Delay time.Duration
	// PID is the process whose mount and network namespaces the plan was read from (0:
	// this process); each read-ahead write confirms its device there again.
	PID int
	// stopAfter ends Apply after that many actions as if the process had died (tests only).
	stopAfter int
}

// ItemResult is what happened to one action.
type ItemResult struct {
	Action Action `json:"action"`
	Status string `json:"status"`
	// Value is the value read back after a live write.
	Value string `json:"value,omitempty"`
	// Kept counts the lines of a file others added or changed since apply, which revert
	// kept.
	Kept  int    `json:"kept_lines,omitempty"`
	Error string `json:"error,omitempty"`
}

// Result is the outcome of Apply or Revert.
type Result struct {
	Items []ItemResult `json:"items"`
	// Journal is the journal's path (relative to the root) while one exists.
	Journal string `json:"journal,omitempty"`
}

// Failed counts the items that failed or were refused.
func (r *Result) Failed() int {
	n := 0
	for _, it := range r.Items {
		if it.Status == StatusFailed || it.Status == StatusRefused {
			n++
		}
	}
	return n
}

// ErrPartial wraps the per-item errors of an apply or revert that changed some things but not
// all; callers turn it into exit code 1.
var ErrPartial = errors.New("some changes failed")

// Apply carries out the plan. Before the first write it records in the journal the original
// of everything the plan touches (keeping originals already journaled by an earlier run), and
// it marks each action done as it goes. A failing action does not stop the others; their
// errors are returned joined with ErrPartial. An error without ErrPartial means nothing was
// changed.
func Apply(ctx context.Context, root hostfs.Root, p *Plan, opts ApplyOptions) (*Result, error) {
	res := &Result{}
	if p.Empty() {
		return res, nil
	}
	for _, a := range p.Actions {
		if err := checkTarget(a.Kind, a.Path); err != nil {
			return res, fmt.Errorf("refusing the plan: %w", err)
		}
	}
	j, unlock, err := lockLoadJournal(root)
	if err != nil {
		return res, err
	}
	defer unlock()
	// An item whose original cannot be read is not changed: it could not be put back.
	unrecorded := map[int]error{}
	for i, a := range p.Actions {
		if err := j.record(root, a); err != nil {
			unrecorded[i] = fmt.Errorf("not changed, the original could not be recorded: %w", err)
		}
	}
	if len(unrecorded) == len(p.Actions) {
		return res, errors.Join(append([]error{ErrPartial}, slices.Collect(maps.Values(unrecorded))...)...)
	}
	if err := j.save(root); err != nil {
		return res, err
	}
	res.Journal = JournalPath
	var errs []error
	for i, a := range p.Actions {
		if opts.stopAfter > 0 && i == opts.stopAfter {
			return res, nil
		}
		if opts.Delay > 0 {
			select {
			case <-ctx.Done():
				return res, errors.Join(ErrPartial, ctx.Err())
			case <-time.After(opts.Delay):
			}
		}
		it := ItemResult{Action: a, Status: StatusDone}
		idx := j.find(a.Path)
		err := unrecorded[i]
		if err != nil {
			// Already explained.
		} else if a.Kind == KindReadAhead {
			var dev string
			if dev, err = confirmBDI(root, opts.PID, a.Path); err == nil {
				it.Value, err = setReadAhead(root, dev, a.New)
			}
		} else if a.Kind.Live() {
			it.Value, err = writeLive(root, a.Path, a.New)
		} else {
			err = writeAction(root, a, j.Entries[idx].Mode)
		}
		if err != nil {
			it.Status, it.Error = StatusFailed, explain(err)
			errs = append(errs, errors.New(it.Error))
		} else {
			j.Entries[idx].Done = true
			if w := j.Entries[idx].Writes; len(w) > 0 {
				w[len(w)-1].Done = true
			}
			if err := j.save(root); err != nil {
				errs = append(errs, err)
			}
		}
		res.Items = append(res.Items, it)
	}
	if len(errs) > 0 {
		return res, errors.Join(append([]error{ErrPartial}, errs...)...)
	}
	return res, nil
}

// explain adds what to do about the usual reasons a write is refused.
func explain(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.EROFS):
		msg += " (read-only file system: is /sys or /etc mounted read-only, as in an unprivileged container?)"
	case errors.Is(err, fs.ErrPermission):
		msg += " (permission denied: run as root)"
	case errors.Is(err, syscall.EINVAL):
		msg += " (the kernel rejected the value)"
	}
	return msg
}

// Revert puts back every value and file recorded in the journal, newest first: it writes
// original values, takes apply's own lines back out of each file and puts back the lines
// they replaced, keeping every line others changed since (revertFile), removes files and
// directories apply created once nothing else is in them, and then removes the journal. A
// file whose nfstune lines were edited since is refused (StatusRefused), left as it is and
// kept in the journal, while the rest is reverted. Read-ahead of a superblock that has been
// unmounted since is gone with it. A shutdown record (nfstune shutdown) is reported as not
// reversible and kept: the kernel has no way back, nothing is written, and the journal stays
// with the records of what cannot be undone. Without a journal it does nothing, so it can be
// run any number of times.
//
// restoreOriginal names files to put back byte for byte as they were before the first apply,
// dropping every change made to them since, nfstune's or anyone's: the way out for a file
// revert refuses. A name that is no file in the journal is an error before anything changes.
func Revert(root hostfs.Root, restoreOriginal ...string) (*Result, error) {
	res := &Result{}
	if ok, err := Pending(root); err != nil || !ok {
		return res, err
	}
	unlock, err := lockJournal(root)
	if err != nil {
		return res, err
	}
	defer unlock()
	j, err := loadJournal(root)
	if err != nil || j == nil {
		return res, err
	}
	whole := map[string]bool{}
	for _, p := range restoreOriginal {
		if i := j.find(p); i < 0 || !j.Entries[i].isFile() {
			return res, fmt.Errorf("%s is not a file in the journal: nothing to restore", p)
		}
		whole[p] = true
	}
	var errs []error
	var keep []Entry
	for _, e := range slices.Backward(j.Entries) {
		it := ItemResult{Action: Action{Kind: e.Kind, Path: e.Path, New: string(e.Original), OldAbsent: e.Absent}}
		if e.Kind == KindShutdown {
			it.Action.New = ""
			it.Action.Reason = e.Shutdown.describe()
			if e.Shutdown != nil {
				it.Action.Device, it.Action.MountPoints = e.Shutdown.Device, e.Shutdown.MountPoints
			}
		}
		var err error
		switch {
		case !e.isFile():
			it.Status, it.Value, err = revertEntry(root, e)
		case whole[e.Path]:
			it.Status, err = restoreFile(root, e)
		default:
			it.Status, it.Kept, err = revertFile(root, e)
		}
		switch {
		case it.Status == StatusRefused:
			it.Error = err.Error()
			errs = append(errs, err)
			keep = append([]Entry{e}, keep...)
		case err != nil:
			it.Status, it.Error = StatusFailed, explain(err)
			errs = append(errs, errors.New(it.Error))
			keep = append([]Entry{e}, keep...)
		case it.Status == StatusIrreversible:
			keep = append([]Entry{e}, keep...) // the one record of what cannot be undone
		case e.Kind == KindDir && it.Status == StatusUnchanged && holdsEntry(e.Path, keep):
			keep = append([]Entry{e}, keep...) // to remove once the file kept in it goes
		}
		res.Items = append(res.Items, it)
	}
	if len(keep) > 0 {
		j.Entries = keep
		if err := j.save(root); err != nil {
			errs = append(errs, err)
		}
		res.Journal = JournalPath
	}
	if len(errs) > 0 {
		return res, errors.Join(append([]error{ErrPartial}, errs...)...)
	}
	if len(keep) > 0 {
		return res, nil
	}
	if err := root.RemoveFile(JournalPath); err != nil {
		return res, err
	}
	removeTemps(root, JournalPath)
	for _, d := range slices.Backward(j.Created) {
		os.Remove(root.Path(d)) // only if empty
	}
	return res, nil
}

// holdsEntry reports whether one of the entries is below the directory dir.
func holdsEntry(dir string, entries []Entry) bool {
	return slices.ContainsFunc(entries, func(e Entry) bool { return strings.HasPrefix(e.Path, dir+"/") })
}

// revertEntry puts back a value, or removes a directory apply created; revertFile takes
// care of files.
func revertEntry(root hostfs.Root, e Entry) (status, value string, err error) {
	switch {
	case e.Kind == KindShutdown && !e.Done:
		return StatusUnchanged, "", nil // the write failed: nothing was shut down
	case e.Kind == KindShutdown:
		return StatusIrreversible, "", nil
	case e.Kind == KindDir:
		err := os.Remove(root.Path(e.Path))
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return StatusDone, "", nil
		}
		// Something else now lives in the directory: leave it.
		return StatusUnchanged, "", nil
	case e.Kind == KindReadAhead:
		if _, err := os.Lstat(root.Path(path.Dir(e.Path))); errors.Is(err, fs.ErrNotExist) {
			return StatusGone, "", nil
		}
		// The superblock apply tuned may be unmounted and its device number reused, by NFS
		// or by anything else: only a device that is NFS now is written.
		dev, err := confirmBDIAnywhere(root, e.Path)
		if errors.Is(err, inventory.ErrNotNFS) {
			return StatusGone, "", nil
		}
		if err != nil {
			return "", "", err
		}
		cur, err := readLive(root, e.Path)
		if err != nil {
			return "", "", err
		}
		if sameValue(cur, string(e.Original)) {
			return StatusUnchanged, cur, nil
		}
		got, err := setReadAhead(root, dev, string(e.Original))
		return StatusDone, got, err
	default: // a sysctl
		cur, err := readLive(root, e.Path)
		if err != nil {
			return "", "", err
		}
		if sameValue(cur, string(e.Original)) {
			return StatusUnchanged, cur, nil
		}
		got, err := writeLive(root, e.Path, string(e.Original))
		return StatusDone, got, err
	}
}

// Pending reports whether a journal exists, i.e. whether there is something to revert.
func Pending(root hostfs.Root) (bool, error) {
	j, err := loadJournal(root)
	return j != nil, err
}
