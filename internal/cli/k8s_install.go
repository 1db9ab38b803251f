package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/tune"
)

type k8sInstallFlags struct {
	Root      string
	BinDir    string
	ConfigDir string
	Policy    string
	NFSMount  bool
}

// newK8sInstallNodeCommand is the installer DaemonSet's init container: it puts this binary,
// the policy and nfstune's udev rule on the node, then exits.
func newK8sInstallNodeCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &k8sInstallFlags{}
	c := &cobra.Command{
		Use:   "install-node",
		Short: "Install nfstune's udev rule, binary and policy on the node (the installer's init container)",
		Long: `install-node copies this binary to --bin-dir and the policy to --config-dir on the host
(mounted under --root), then writes nfstune's udev rule, which runs
"<bin-dir>/nfstune udev-readahead --config <config-dir>/policy.yaml" for every new NFS
superblock. The change is journaled under /var/lib/nfstune, so "nfstune revert" on the node
removes the rule. With --nfsmount-conf it also writes the policy's mount options for the
servers and mount points its rules name literally into /etc/nfsmount.conf.d/50-nfstune.conf,
in the same journal. Files already up to date are left alone. Mounts that exist already keep
their read-ahead and options: the rule and the drop-in act on new mounts.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runK8sInstallNode(c.Context(), g.Logger(streams.ErrOut), flags)
		},
	}
	g.logFlags(c)
	f := c.Flags()
	f.StringVar(&flags.Root, "root", "/host", "where the host's filesystem is mounted")
	deprecatedAlias(c, "host", "root")
	f.StringVar(&flags.BinDir, "bin-dir", "/opt/nfstune/bin", "host directory for the nfstune binary")
	f.StringVar(&flags.ConfigDir, "config-dir", "/etc/nfstune", "host directory for the policy")
	f.StringVar(&flags.Policy, "policy", "/etc/nfstune/policy.yaml", "policy file to install (in this container)")
	f.BoolVar(&flags.NFSMount, "nfsmount-conf", false, "also write the policy's mount options as an nfsmount.conf drop-in on the host")
	return c
}

func runK8sInstallNode(ctx context.Context, logger *slog.Logger, flags *k8sInstallFlags) error {
	err := tune.InstallNode(ctx, hostfs.Root(flags.Root), tune.NodeInstall{
		BinDir:       flags.BinDir,
		ConfigDir:    flags.ConfigDir,
		PolicyFile:   flags.Policy,
		NFSMountConf: flags.NFSMount,
		Logger:       logger,
	})
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	return nil
}

// newK8sRevertNodeCommand is the init container of the chart's revert mode: it undoes
// install-node on the node, so that installer mode is uninstalled from the cluster.
func newK8sRevertNodeCommand(g *globals, streams IOStreams) *cobra.Command {
	var root string
	c := &cobra.Command{
		Use:   "revert-node",
		Short: "Undo install-node on the node (the init container of the chart's revert mode)",
		Long: `revert-node undoes what install-node did on the host (mounted under --root): it
reverts the journal under /var/lib/nfstune as "nfstune revert" does (the udev rule and the
nfsmount.conf drop-in go, lines others wrote stay), then removes the binary and the policy
the installer copied, each only while it holds what the installer wrote. A copy changed
since is kept and named (exit 1); when the journal cannot be reverted whole, no copy is
removed, as the rule may still run the binary. Run again, it does nothing.`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runK8sRevertNode(g.Logger(streams.ErrOut), root)
		},
	}
	g.logFlags(c)
	c.Flags().StringVar(&root, "root", "/host", "where the host's filesystem is mounted")
	return c
}

func runK8sRevertNode(logger *slog.Logger, root string) error {
	_, err := tune.UninstallNode(hostfs.Root(root), logger)
	switch {
	case err == nil:
		logger.Info("reverted: nfstune's rule, drop-in, binary and policy are gone from the node")
		return nil
	case errors.Is(err, tune.ErrPartial):
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("revert-node: %w", err)}
	}
	return &ExitError{Code: ExitError2, Err: fmt.Errorf("revert-node: %w", err)}
}
