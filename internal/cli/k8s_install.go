package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/tune"
)

type k8sInstallFlags struct {
	Host      string
	BinDir    string
	ConfigDir string
	Policy    string
}

// newK8sInstallNodeCommand is the installer DaemonSet's init container: it puts this binary,
// the policy and nfstune's udev rule on the node, then exits.
func newK8sInstallNodeCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &k8sInstallFlags{}
	c := &cobra.Command{
		Use:   "install-node",
		Short: "Install nfstune's udev rule, binary and policy on the node (the installer's init container)",
		Long: `install-node copies this binary to --bin-dir and the policy to --config-dir on the host
(mounted under --host), then writes nfstune's udev rule, which runs
"<bin-dir>/nfstune udev-readahead --config <config-dir>/policy.yaml" for every new NFS
superblock. The change is journaled under /var/lib/nfstune, so "nfstune revert" on the node
removes the rule. Files already up to date are left alone. Mounts that exist already keep
their read-ahead: the rule acts on new mounts.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runK8sInstallNode(c.Context(), g.Logger(streams.ErrOut), flags)
		},
	}
	f := c.Flags()
	f.StringVar(&flags.Host, "host", "/host", "where the host's filesystem is mounted")
	f.StringVar(&flags.BinDir, "bin-dir", "/opt/nfstune/bin", "host directory for the nfstune binary")
	f.StringVar(&flags.ConfigDir, "config-dir", "/etc/nfstune", "host directory for the policy")
	f.StringVar(&flags.Policy, "policy", "/etc/nfstune/policy.yaml", "policy file to install (in this container)")
	return c
}

// safeHostDir rejects host directories that are relative, "/", or contain characters the
// udev rule cannot carry.
func safeHostDir(flag, dir string) error {
	if !path.IsAbs(dir) || path.Clean(dir) != dir || dir == "/" || strings.ContainsAny(dir, " \t\"'%$\n") {
		return fmt.Errorf("--%s %q: want a clean absolute host directory without spaces, quotes, %% or $", flag, dir)
	}
	return nil
}

func runK8sInstallNode(ctx context.Context, logger *slog.Logger, flags *k8sInstallFlags) error {
	for _, d := range []struct{ flag, dir string }{{"bin-dir", flags.BinDir}, {"config-dir", flags.ConfigDir}} {
		if err := safeHostDir(d.flag, d.dir); err != nil {
			return &ExitError{Code: ExitError2, Err: err}
		}
	}
	root := hostfs.Root(flags.Host)
	polBytes, err := os.ReadFile(flags.Policy)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("reading policy: %w", err)}
	}
	pol, err := policy.Parse(flags.Policy, polBytes)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("loading policy: %w", err)}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		return fmt.Errorf("reading this executable: %w", err)
	}
	hostBin := path.Join(flags.BinDir, "nfstune")
	hostPolicy := path.Join(flags.ConfigDir, "policy.yaml")
	files := []struct {
		hostPath string
		data     []byte
		mode     os.FileMode
	}{{hostBin, bin, 0o755}, {hostPolicy, polBytes, 0o644}}
	// Refuse a link on either path before writing anything.
	for _, f := range files {
		if _, err := root.Attr(f.hostPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &ExitError{Code: ExitError2, Err: fmt.Errorf("installing %q: %w", f.hostPath, err)}
		}
	}
	for _, f := range files {
		changed, err := replaceFile(root, f.hostPath, f.data, f.mode)
		if err != nil {
			return err
		}
		logger.Info("installed", "path", f.hostPath, "changed", changed)
	}

	// An empty inventory: the installer only writes the rule for future mounts.
	plan, err := tune.NewPlan(root, &inventory.Inventory{}, tune.Want{Resolve: tuneResolver(pol)}, tune.Options{
		Persist:     tune.PersistUdev,
		UdevCommand: hostBin + " udev-readahead --config " + hostPolicy,
	})
	if err != nil {
		return fmt.Errorf("planning the udev rule: %w", err)
	}
	if plan.Empty() {
		logger.Info("udev rule up to date", "path", tune.UdevRulePath)
		return nil
	}
	res, err := tune.Apply(ctx, root, plan, tune.ApplyOptions{})
	if err != nil {
		return fmt.Errorf("installing the udev rule: %w", err)
	}
	if n := res.Failed(); n > 0 {
		return fmt.Errorf("installing the udev rule: %d of %d actions failed", n, len(plan.Actions))
	}
	logger.Info("installed", "path", tune.UdevRulePath, "journal", res.Journal,
		"note", "systemd-udevd reloads changed rules files before its next event (checked at most every 3 s); mounts that exist keep their read-ahead")
	return nil
}

// replaceFile writes data to p (below root) through hostfs.ReplaceFile: a temporary file
// fsync'd before the rename and the directory fsync'd after, so that neither a crash nor
// udev ever sees a half-written binary or policy, and never through a symbolic link. It
// reports whether anything changed.
func replaceFile(root hostfs.Root, p string, data []byte, mode os.FileMode) (bool, error) {
	attr, err := root.Attr(p)
	switch {
	case err == nil:
		if attr.Perm == mode {
			if cur, err := hostfs.ReadSmall(root.Path(p)); err == nil && bytes.Equal(cur, data) {
				return false, nil
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("writing %q: %w", p, err)
	}
	if err := root.ReplaceFile(p, data, mode); err != nil {
		return false, err
	}
	return true, nil
}
