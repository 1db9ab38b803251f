package tune

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/nfstune/nfstune/internal/policy"
)

// fileTargets are the files apply writes, by kind: the only files revert puts back.
var fileTargets = map[Kind]string{
	KindUdevRule:   UdevRulePath,
	KindNFSConf:    NFSConfPath,
	KindSysctlFile: SysctlFilePath,
	KindFstab:      FstabPath,
	KindBackup:     FstabBackup,

	KindNFSMountDropIn: NFSMountDropInPath,
	KindNFSMountConf:   NFSMountConfPath,
}

// checkTarget is the one allow-list of what apply writes and revert restores: each kind
// at its own paths (relative to the root), so that a crafted journal cannot make revert
// write anything else. Live kinds are the read_ahead_kb of an anonymous (NFS) bdi and the
// sysctls policy allows; KindDir is a parent directory of one of the files; KindShutdown
// records the shutdown attribute of an anonymous (NFS) superblock.
func checkTarget(k Kind, p string) error {
	ok := false
	switch k {
	case KindReadAhead:
		dev, found := strings.CutPrefix(p, "/sys/class/bdi/")
		dev, suffixed := strings.CutSuffix(dev, "/read_ahead_kb")
		ok = found && suffixed && isAnonDevice(dev)
	case KindShutdown:
		dev, found := strings.CutPrefix(p, "/sys/fs/nfs/")
		dev, suffixed := strings.CutSuffix(dev, "/shutdown")
		ok = found && suffixed && isAnonDevice(dev)
	case KindSysctl:
		for _, name := range policy.KnownSysctls() {
			ok = ok || p == sysctlPath(name)
		}
	case KindDir:
		for _, f := range fileTargets {
			ok = ok || isParent(p, f)
		}
	default:
		f, known := fileTargets[k]
		if !known {
			return fmt.Errorf("unknown kind %q", k)
		}
		ok = p == f
	}
	if !ok {
		return fmt.Errorf("%s %q: not a path nfstune writes", k, p)
	}
	return nil
}

// isParent reports whether dir is a proper ancestor of file, other than "/".
func isParent(dir, file string) bool {
	for d := path.Dir(file); d != "/" && d != "."; d = path.Dir(d) {
		if d == dir {
			return true
		}
	}
	return false
}

// checkMode refuses file modes apply never writes: anything but permission bits (setuid,
// setgid, sticky, a type), and world-writable files.
func checkMode(m fs.FileMode) error {
	if m&^fs.ModePerm != 0 || m&0o002 != 0 {
		return fmt.Errorf("mode %s: nfstune writes no setuid, setgid or world-writable files", m)
	}
	return nil
}

// check refuses a journal that names anything apply could not have written.
func (j *Journal) check() error {
	for _, d := range j.Created {
		if !isParent(d, JournalPath) {
			return fmt.Errorf("created directory %q: not a parent of %s", d, JournalPath)
		}
	}
	for _, e := range j.Entries {
		if err := checkTarget(e.Kind, e.Path); err != nil {
			return err
		}
		if e.Kind.Live() || e.Kind == KindDir || e.Kind == KindShutdown {
			continue
		}
		if err := checkMode(e.Mode); err != nil {
			return fmt.Errorf("%s %s: %w", e.Kind, e.Path, err)
		}
	}
	return nil
}
