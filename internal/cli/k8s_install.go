package cli

import (
	"context"
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
