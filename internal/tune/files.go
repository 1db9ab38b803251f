package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// readFile reads the file at p (relative to root). absent is set when it does not exist.
func readFile(root hostfs.Root, p string) (content string, absent bool, err error) {
	b, err := hostfs.ReadSmall(root.Path(p))
	if errors.Is(err, fs.ErrNotExist) {
		return "", true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading %q: %w", p, err)
	}
	return string(b), false, nil
}

// liveRoot splits a kernel attribute path such as "/sys/class/bdi/0:53/read_ahead_kb" into
// the pseudo file system it lives in ("sys" or "proc") and the path inside it. Only paths
// below /sys/class/bdi and /proc/sys are accepted.
func liveRoot(p string) (top, rest string, err error) {
	clean := path.Clean("/" + p)
	if clean != "/"+strings.TrimPrefix(p, "/") {
		return "", "", fmt.Errorf("refusing unclean path %q", p)
	}
	switch {
	case strings.HasPrefix(clean, "/sys/class/bdi/"):
		return "sys", strings.TrimPrefix(clean, "/sys/"), nil
	case strings.HasPrefix(clean, "/proc/sys/"):
		return "proc", strings.TrimPrefix(clean, "/proc/"), nil
	}
	return "", "", fmt.Errorf("refusing to write %q: not below /sys/class/bdi or /proc/sys", p)
}

// openLive opens a kernel attribute inside its pseudo file system with os.OpenRoot, so that
// a crafted name or symlink cannot leave /sys (the bdi entries are symlinks into
// /sys/devices/virtual/bdi) or /proc.
func openLive(root hostfs.Root, p string, flag int) (*os.File, error) {
	top, rest, err := liveRoot(p)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root.Path(top))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.OpenFile(rest, flag, 0)
}

// readLive reads a kernel attribute and trims the trailing newline.
func readLive(root hostfs.Root, p string) (string, error) {
	raw, err := readLiveRaw(root, p)
	return strings.TrimSpace(raw), err
}

// readLiveRaw reads a kernel attribute as the kernel prints it.
func readLiveRaw(root hostfs.Root, p string) (string, error) {
	f, err := openLive(root, p, os.O_RDONLY)
	if err != nil {
		return "", fmt.Errorf("reading %q: %w", p, err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", fmt.Errorf("reading %q: %w", p, err)
	}
	return string(buf[:n]), nil
}

// writeLive writes value to a sysctl below /proc/sys in place, in one write(2), then reads
// it back and returns what it read, trimmed. procfs attributes are never renamed into:
// the kernel would not see the file. Attributes below /sys are refused: read-ahead is
// written by hostfs.SetReadAhead, the one writer of sysfs.
func writeLive(root hostfs.Root, p, value string) (string, error) {
	shown := strings.TrimSpace(value)
	if top, _, err := liveRoot(p); err != nil || top != "proc" {
		return "", fmt.Errorf("refusing to set %q: only sysctls below /proc/sys are written here", p)
	}
	f, err := openLive(root, p, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return "", fmt.Errorf("setting %q to %q: %w", p, shown, err)
	}
	if !strings.HasSuffix(value, "\n") {
		value += "\n" // as echo writes it; the kernel parsers accept the newline
	}
	_, werr := f.Write([]byte(value))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return "", fmt.Errorf("setting %q to %q: %w", p, shown, err)
	}
	got, err := readLive(root, p)
	if err != nil {
		return "", err
	}
	if !sameValue(got, value) {
		return got, fmt.Errorf("setting %q to %q: the kernel kept %q", p, shown, got)
	}
	return got, nil
}

// sameValue compares attribute values field by field, since the kernel prints multi-value
// sysctls with tabs.
func sameValue(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
}

// missingDirs lists the parent directories of p that do not exist yet, outermost first.
func missingDirs(root hostfs.Root, p string) []string {
	var dirs []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		if _, err := os.Lstat(root.Path(d)); err == nil {
			break
		}
		dirs = append([]string{d}, dirs...)
	}
	return dirs
}

// removeTemps removes temporary files an interrupted atomic write left next to p.
func removeTemps(root hostfs.Root, p string) {
	full := root.Path(p)
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(full), "."+filepath.Base(full)+".nfstune-*"))
	for _, m := range matches {
		os.Remove(m)
	}
}
