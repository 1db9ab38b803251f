package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/tune"
)

type udevFlags struct {
	config string
	exact  bool
	wait   time.Duration
}

// newUdevCommand is the helper the udev rule written by apply runs when a bdi appears:
// it prints the read_ahead_kb for that superblock, or exits 1 so that udev writes nothing.
func newUdevCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &udevFlags{}
	c := &cobra.Command{
		Use:    "udev-readahead <bdi>",
		Short:  "Print the read_ahead_kb the policy wants for a new NFS bdi (run by udev)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			pol, err := policy.Load(flags.config)
			if err != nil {
				return &ExitError{Code: ExitError2, Err: fmt.Errorf("loading policy: %w", err)}
			}
			learned, err := tune.LoadLearned(g.Root())
			if err != nil {
				g.Logger(streams.ErrOut).Warn("read-ahead starts at its adaptive floor: the values the agent learned cannot be read", "err", err)
			}
			kb, m, err := tune.UdevReadAhead(c.Context(), g.Root(), args[0], tune.PolicyResolver(pol, learned), tune.UdevOptions{Wait: flags.wait, Exact: flags.exact})
			if errors.Is(err, tune.ErrNoReadAhead) {
				// udev logs the helper's stderr at debug level.
				return &ExitError{Code: ExitIssues, Err: err}
			}
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			g.Logger(streams.ErrOut).Debug("read-ahead for new NFS superblock", "bdi", args[0], "mountpoints", m.MountPoints, "server", m.Server, "export", m.Export, "read_ahead_kb", kb)
			_, err = fmt.Fprintln(streams.Out, kb)
			return err
		},
	}
	g.hostFlags(c)
	g.logFlags(c)
	c.Flags().StringVar(&flags.config, "config", "", "nfstune policy file (default: built-in profiles)")
	c.Flags().BoolVar(&flags.exact, "exact", false, "print the profile value even when the bdi already has more")
	c.Flags().DurationVar(&flags.wait, "wait", time.Second, "longest wait for the mount to appear in mountinfo")
	return c
}
