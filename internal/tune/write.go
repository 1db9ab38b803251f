package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// bdiDevice returns the device of a read-ahead attribute path,
// "/sys/class/bdi/<device>/read_ahead_kb".
func bdiDevice(p string) (string, error) {
	dir, file := path.Split(p)
	dev := path.Base(dir)
	if path.Clean(p) != p || file != "read_ahead_kb" || path.Dir(path.Clean(dir)) != "/sys/class/bdi" || !hostfs.ValidDevice(dev) {
		return "", fmt.Errorf("%q is not a bdi read_ahead_kb attribute", p)
	}
	return dev, nil
}

// confirmBDI re-reads mountinfo and nfsfs volumes of pid's namespaces and returns the
// device of the attribute p if it is still an NFS superblock: between planning (or apply)
// and this write the superblock may have been unmounted and its number reused.
func confirmBDI(root hostfs.Root, pid int, p string) (string, error) {
	dev, err := bdiDevice(p)
	if err != nil {
		return "", err
	}
	if _, err := inventory.ConfirmNFS(root, pid, dev); err != nil {
		return "", fmt.Errorf("not writing %q: %w", p, err)
	}
	return dev, nil
}

// revertPIDs are the processes in whose namespaces revert confirms a device: its own and
// PID 1's, where "apply --pid 1" from a container with hostPID found the mounts. A device
// number belongs to one superblock at a time, whatever namespace shows it.
var revertPIDs = []int{0, 1}

// confirmBDIAnywhere is confirmBDI for revert, which does not know the namespace apply
// read: the device is NFS if one of revertPIDs' namespaces confirms it, and not NFS (an
// error matching inventory.ErrNotNFS) only when all of them could be read and none does.
func confirmBDIAnywhere(root hostfs.Root, p string) (string, error) {
	var notNFS, unreadable []error
	for _, pid := range revertPIDs {
		dev, err := confirmBDI(root, pid, p)
		if err == nil {
			return dev, nil
		}
		if errors.Is(err, inventory.ErrNotNFS) {
			notNFS = append(notNFS, err)
		} else {
			unreadable = append(unreadable, err)
		}
	}
	if len(unreadable) > 0 {
		return "", errors.Join(unreadable...)
	}
	return "", errors.Join(notNFS...)
}

// setReadAhead writes value, a decimal number of KiB, through hostfs.SetReadAhead and
// returns the value the kernel kept.
func setReadAhead(root hostfs.Root, dev, value string) (string, error) {
	kb, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil {
		return "", fmt.Errorf("setting read-ahead of %s: %w", dev, err)
	}
	got, err := hostfs.SetReadAhead(root, dev, kb)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(got), nil
}

// backupOf names the file a backup copies; the backup gets its owner and mode, since it
// holds the same content.
var backupOf = map[string]string{FstabBackup: FstabPath}

// writeAction replaces the file of a file action. A backup takes the owner and mode of the
// file it copies; any other file keeps its owner and gets mode, the one journaled.
func writeAction(root hostfs.Root, a Action, mode fs.FileMode) error {
	if src, ok := backupOf[a.Path]; ok && a.Kind == KindBackup {
		attr, err := root.Attr(src)
		if err != nil {
			return fmt.Errorf("writing %q: %w", a.Path, err)
		}
		return root.ReplaceFileAttr(a.Path, []byte(a.New), attr)
	}
	return root.ReplaceFile(a.Path, []byte(a.New), mode)
}

// checkWritable refuses, at planning time, a file nfstune would write through a symbolic
// link (the file itself or a directory on its way): apply would refuse it half way.
func checkWritable(root hostfs.Root, p string) error {
	_, err := root.Attr(p)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
