package tune

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"slices"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// InstalledPath records the files the installer copied onto the node (InstallNode), so that
// UninstallNode removes them and nothing else: the udev rule and the drop-in are in the
// journal, the binary and the policy here.
const InstalledPath = "/var/lib/nfstune/installed.json"

// maxInstalledSize caps the record: two paths and their digests.
const maxInstalledSize = 64 << 10

// installed is the record at InstalledPath.
type installed struct {
	Files []installedFile `json:"files"`
}

// installedFile is one file the installer copied: its host path and the SHA-256 digests
// of the contents it may hold. It has two while a new copy replaces an older one (the
// record is written before the copy and again, with the new digest only, after it), so
// that a copy cut short still matches.
type installedFile struct {
	Path   string   `json:"path"`
	SHA256 []string `json:"sha256"`
}

func loadInstalled(root hostfs.Root) (*installed, error) {
	var rec installed
	if found, err := ReadState(root, InstalledPath, maxInstalledSize, &rec); !found || err != nil {
		return nil, err
	}
	for _, f := range rec.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("reading %q: %q is not a clean absolute path", InstalledPath, f.Path)
		}
	}
	return &rec, nil
}

func (rec *installed) save(root hostfs.Root) error { return WriteState(root, InstalledPath, rec) }

// recordInstall writes the record of files about to be copied, each with the digest of its
// new content and, for a path already recorded, the digests it may hold now.
func recordInstall(root hostfs.Root, files map[string][]byte) (*installed, error) {
	old, err := loadInstalled(root)
	if err != nil {
		return nil, err
	}
	held := map[string][]string{} // the digests each recorded path may hold now
	if old != nil {
		for _, f := range old.Files {
			held[f.Path] = f.SHA256
		}
	}
	rec := &installed{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256(files[p])
		digests := []string{hex.EncodeToString(sum[:])}
		for _, d := range held[p] {
			if !slices.Contains(digests, d) {
				digests = append(digests, d)
			}
		}
		rec.Files = append(rec.Files, installedFile{Path: p, SHA256: digests})
	}
	return rec, rec.save(root)
}

// installDone keeps in the record only each file's new digest, once every copy is made.
func (rec *installed) installDone(root hostfs.Root) error {
	for i := range rec.Files {
		rec.Files[i].SHA256 = rec.Files[i].SHA256[:1]
	}
	return rec.save(root)
}

// Uninstalled is what UninstallNode did with each file the installer copied.
type Uninstalled struct {
	// Revert is the journal's revert: the udev rule and the drop-in.
	Revert *Result
	// Removed are the copies removed; Absent those already gone; Kept those left because
	// they changed since the install, each with why.
	Removed []string
	Absent  []string
	Kept    map[string]string
}

// ErrChangedSinceInstall marks a copy UninstallNode left in place: its content is no longer
// what the installer wrote.
var ErrChangedSinceInstall = errors.New("changed since the install")

// UninstallNode undoes InstallNode on the node below root: it reverts the journal (Revert:
// the udev rule and the nfsmount.conf drop-in, keeping what others wrote), then removes the
// binary and the policy the installer copied, each only while it holds what the installer
// wrote (InstalledPath): a file changed since is kept, named, and makes the result an
// error. When the journal cannot be reverted whole, no copy is removed: a rule left in place
// still runs the binary. Without a record there is nothing to remove; run again, it does
// nothing.
func UninstallNode(root hostfs.Root, logger *slog.Logger) (*Uninstalled, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	out := &Uninstalled{Kept: map[string]string{}}
	rec, err := loadInstalled(root)
	if err != nil {
		return out, err
	}
	res, err := Revert(root)
	out.Revert = res
	for _, it := range res.Items {
		logger.Info("reverted", "path", it.Action.Path, "status", it.Status, "error", it.Error)
	}
	if err != nil {
		return out, fmt.Errorf("reverting the journal (the installer's copies are kept while the rule may run them): %w", err)
	}
	if rec == nil {
		logger.Info("no installer record: no binary or policy to remove", "record", InstalledPath)
		removeStateDir(root)
		return out, nil
	}
	var errs []error
	for _, f := range rec.Files {
		removed, err := removeInstalled(root, f)
		switch {
		case err != nil:
			out.Kept[f.Path] = err.Error()
			errs = append(errs, err)
			logger.Warn("kept", "path", f.Path, "why", err.Error())
		case removed:
			out.Removed = append(out.Removed, f.Path)
			logger.Info("removed", "path", f.Path)
		default:
			out.Absent = append(out.Absent, f.Path)
		}
	}
	if len(errs) > 0 {
		return out, errors.Join(append([]error{ErrPartial}, errs...)...)
	}
	if err := root.RemoveFile(InstalledPath); err != nil {
		return out, err
	}
	removeTemps(root, InstalledPath)
	removeStateDir(root)
	return out, nil
}

// removeInstalled removes one copy if it is a regular file holding one of its recorded
// digests; removed is false, without an error, when it is gone already.
func removeInstalled(root hostfs.Root, f installedFile) (removed bool, err error) {
	if _, err := root.Attr(f.Path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("%s: %w", f.Path, err)
	}
	sum, err := fileSHA256(root.Path(f.Path))
	if err != nil {
		return false, fmt.Errorf("%s: %w", f.Path, err)
	}
	if !slices.Contains(f.SHA256, sum) {
		return false, fmt.Errorf("%s: %w: left as it is", f.Path, ErrChangedSinceInstall)
	}
	if err := root.RemoveFile(f.Path); err != nil {
		return false, err
	}
	return true, nil
}

// fileSHA256 hashes a regular file, never through a final symbolic link, in chunks: the
// binary is tens of MiB.
func fileSHA256(p string) (string, error) {
	f, err := hostfs.OpenNoFollow(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// removeStateDir removes the journal's directory if nothing is left in it (in the revert
// pod it is a volume's mount point and stays, empty).
func removeStateDir(root hostfs.Root) {
	_ = os.Remove(root.Path(path.Dir(InstalledPath)))
}
