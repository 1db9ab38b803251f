package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
)

// NodeInstall is what the installer DaemonSet's init container (`nfstune k8s
// install-node`) puts on a node.
type NodeInstall struct {
	// BinDir and ConfigDir are the host directories for the nfstune binary and for
	// policy.yaml: clean, absolute, not "/", and without characters the udev rule cannot
	// carry.
	BinDir    string
	ConfigDir string
	// PolicyFile is the policy to install, a path in this container; it must parse.
	PolicyFile string
	// Executable is the binary to install; empty for this executable (os.Executable).
	Executable string
	// NFSMountConf also writes the policy's mount options as nfsmount.conf sections, for
	// the servers and mount points its rules name literally (Options.NFSMountConf).
	NFSMountConf bool
	Logger       *slog.Logger
}

// InstallNode copies the binary to BinDir and the policy to ConfigDir below root (atomic
// replaces, never through a symbolic link, files already up to date left alone), then
// writes nfstune's udev rule through a journaled Apply, so that "nfstune revert" on the
// node removes it. The rule runs "<BinDir>/nfstune udev-readahead --config
// <ConfigDir>/policy.yaml" for every new NFS superblock; mounts that exist keep their
// read-ahead.
func InstallNode(ctx context.Context, root hostfs.Root, in NodeInstall) error {
	logger := in.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range []struct{ flag, dir string }{{"bin-dir", in.BinDir}, {"config-dir", in.ConfigDir}} {
		if err := safeHostDir(d.flag, d.dir); err != nil {
			return err
		}
	}
	polBytes, err := hostfs.ReadFile(in.PolicyFile, policy.MaxConfigSize)
	if err != nil {
		return fmt.Errorf("reading policy: %w", err)
	}
	pol, err := policy.Parse(in.PolicyFile, polBytes)
	if err != nil {
		return fmt.Errorf("loading policy: %w", err)
	}
	exe := in.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("finding this executable: %w", err)
		}
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		return fmt.Errorf("reading this executable: %w", err)
	}
	hostBin := path.Join(in.BinDir, "nfstune")
	hostPolicy := path.Join(in.ConfigDir, "policy.yaml")
	files := []struct {
		hostPath string
		data     []byte
		mode     os.FileMode
	}{{hostBin, bin, 0o755}, {hostPolicy, polBytes, 0o644}}
	// Refuse a link on either path before writing anything.
	for _, f := range files {
		if _, err := root.Attr(f.hostPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("installing %q: %w", f.hostPath, err)
		}
	}
	// Record the copies before making them (UninstallNode removes them by this record).
	contents := map[string][]byte{}
	for _, f := range files {
		contents[f.hostPath] = f.data
	}
	rec, err := recordInstall(root, contents)
	if err != nil {
		return fmt.Errorf("recording the install: %w", err)
	}
	for _, f := range files {
		changed, err := replaceIfChanged(root, f.hostPath, f.data, f.mode)
		if err != nil {
			return err
		}
		logger.Info("installed", "path", f.hostPath, "changed", changed)
	}
	if err := rec.installDone(root); err != nil {
		return fmt.Errorf("recording the install: %w", err)
	}

	// An empty inventory: the installer only writes the rule (and the nfsmount.conf
	// sections of the rules) for future mounts.
	plan, err := NewPlan(root, &inventory.Inventory{}, Want{Resolve: PolicyResolver(pol, nil), Rules: pol.Rules, PolicyName: hostPolicy}, Options{
		Persist:      PersistUdev,
		UdevCommand:  hostBin + " udev-readahead --config " + hostPolicy,
		NFSMountConf: in.NFSMountConf,
	})
	if err != nil {
		return fmt.Errorf("planning the udev rule: %w", err)
	}
	if in.NFSMountConf {
		for _, n := range plan.Notes {
			if strings.Contains(n, "nfsmount.conf") || strings.Contains(n, "section") {
				logger.Info("nfsmount.conf", "note", n)
			}
		}
	}
	if plan.Empty() {
		logger.Info("udev rule up to date", "path", UdevRulePath)
		return nil
	}
	res, err := Apply(ctx, root, plan, ApplyOptions{})
	if err != nil {
		return fmt.Errorf("installing: %w", err)
	}
	if n := res.Failed(); n > 0 {
		return fmt.Errorf("installing: %d of %d actions failed", n, len(plan.Actions))
	}
	for _, a := range plan.Actions {
		logger.Info("installed", "path", a.Path, "journal", res.Journal)
	}
	logger.Info("installed", "note", "systemd-udevd reloads changed rules files before its next event (checked at most every 3 s); mounts that exist keep their read-ahead and options")
	return nil
}

// safeHostDir rejects host directories that are relative, "/", or contain characters the
// udev rule cannot carry.
func safeHostDir(flag, dir string) error {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" || strings.ContainsAny(dir, " \t\"'%$\n") {
		return fmt.Errorf("--%s %q: want a clean absolute host directory without spaces, quotes, %% or $", flag, dir)
	}
	return nil
}

// replaceIfChanged writes data to p (below root) through hostfs.ReplaceFile: a temporary
// file fsync'd before the rename and the directory fsync'd after, so that neither a crash
// nor udev ever sees a half-written binary or policy, and never through a symbolic link.
// It reports whether anything changed.
func replaceIfChanged(root hostfs.Root, p string, data []byte, mode os.FileMode) (bool, error) {
	attr, err := root.Attr(p)
	switch {
	case err == nil:
		if attr.Perm == mode && sameContent(root.Path(p), data) {
			return false, nil
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("writing %q: %w", p, err)
	}
	if err := root.ReplaceFile(p, data, mode); err != nil {
		return false, err
	}
	return true, nil
}

// sameContent reports whether the regular file at path holds exactly data. It reads the
// file in chunks: the installer's binary is tens of MiB, and a second copy of it in memory
// took the init container past its 64 MiB limit on a node that had it already.
func sameContent(path string, data []byte) bool {
	f, err := hostfs.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(data)) {
		return false
	}
	buf := make([]byte, 64<<10)
	for off := 0; ; {
		n, err := f.Read(buf)
		if n > 0 {
			if off+n > len(data) || !bytes.Equal(buf[:n], data[off:off+n]) {
				return false
			}
			off += n
		}
		if err == io.EOF {
			return off == len(data)
		}
		if err != nil {
			return false
		}
	}
}

// PolicyResolver returns Want.Resolve for a policy: the profile, mode and rule that
// policy.Resolve gives a mount, its backend detected from the server name when unset. A mount under adaptive read-ahead whose volume has a learned value
// (LearnedStore, the agent's; nil: none) gets that value instead of the bounds' floor, so
// that apply and the udev helper start a new superblock where the agent would.
func PolicyResolver(pol *policy.Policy, learned *LearnedStore) func(*inventory.Mount) Desired {
	return func(m *inventory.Mount) Desired {
		if m.Backend == "" {
			m.Backend = inventory.DetectBackend(m.Server)
		}
		r := pol.Resolve(m)
		if kb, ok := learned.Get(m); ok && r.Adaptive != nil && kb >= min(r.Adaptive.MinKB, readahead.MappedFloorKB) && kb <= r.Adaptive.MaxKB {
			r.ReadAheadKB = kb
			r.Rule += ", learned"
		}
		d := Desired{Profile: r.Profile, Mode: r.Mode, Rule: r.Rule, Adaptive: r.Adaptive}
		if rule, ok := pol.RuleFor(m); ok {
			d.Match = rule.Match
		}
		return d
	}
}
