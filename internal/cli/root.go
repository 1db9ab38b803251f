// Package cli holds nfstune's cobra commands, one file per verb: a flags struct, a
// constructor, and a runE that checks the flags and arguments, calls the package that owns
// the work (inventory, policy, audit, tune, metrics, render, bench, plan, agent) and writes
// the result as JSON, YAML or a table. The owning package writes the tables of audit, apply
// (tune), plan, stats (metrics) and bench; errors leave as an ExitError that carries the
// exit code.
//
// Still done here rather than in a library: the short text of options (its fstab and
// nfsmount.conf lines), revert and bench profiles; the udev rule's command line built from
// apply's flags; bench report's throughput limit from --client-nic, --limit or plan's model
// of a service; and the CSI driver k8s volume picks for a backend.
package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/version"
)

// globals are the flags some verbs share: --root on the verbs that read the host
// (hostFlags), --log-level and --log-format on the verbs that log (logFlags). Each verb
// declares those it uses, so that its help lists no flag it ignores.
type globals struct {
	root      string
	logLevel  string
	logFormat string
	level     slog.Level // logLevel, parsed by check
}

// hostFlags declares --root on c, a verb that reads or writes the host.
func (g *globals) hostFlags(c *cobra.Command) {
	c.Flags().StringVar(&g.root, "root", envOr("NFSTUNE_ROOT", "/"), "host filesystem root to read /proc, /sys and /etc under (env NFSTUNE_ROOT)")
}

// logFlags declares --log-level and --log-format on c, a verb that logs.
func (g *globals) logFlags(c *cobra.Command) {
	c.Flags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	c.Flags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
}

// check parses the log flags: an unknown level or format is bad input, not a silent
// fall-back to info or text.
func (g *globals) check() error {
	if err := g.level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)}
	}
	if g.logFormat != "text" && g.logFormat != "json" {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--log-format %q: want text or json", g.logFormat)}
	}
	return nil
}

// Root returns the host root that verbs read and write under.
func (g *globals) Root() hostfs.Root { return hostfs.Root(g.root) }

// Logger builds the structured logger the flags ask for, writing to w.
func (g *globals) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: g.level}
	if g.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// NewRoot builds the nfstune command tree.
func NewRoot(streams IOStreams) *cobra.Command {
	g := &globals{root: "/", logLevel: "info", logFormat: "text"}
	root := &cobra.Command{
		Use:   "nfstune",
		Short: "Audit, tune, watch and benchmark Linux NFS client mounts",
		Long: `nfstune reads the kernel's view of every NFS mount from /proc and /sys (never the mount
points themselves), audits it against backend- and workload-aware profiles, applies and reverts
fixes, keeps mounts tuned as a node agent, renders Kubernetes manifests, benchmarks mounts with fio
and plans capacity per NFS service.`,
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if err := warnDeprecated(c, streams.ErrOut); err != nil {
				return err
			}
			return g.check()
		},
	}
	root.SetVersionTemplate(`{{.DisplayName}} {{.Version}}` + "\n")
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitError2, Err: err}
	})

	root.AddCommand(
		newVersionCommand(streams),
		newAuditCommand(g, streams),
		newOptionsCommand(streams),
		newK8sCommand(g, streams),
		newApplyCommand(g, streams),
		newRevertCommand(g, streams),
		newShutdownCommand(g, streams),
		newUdevCommand(g, streams),
		newAgentCommand(g, streams),
		newStatsCommand(g, streams),
		newPlanCommand(streams),
		newBenchCommand(g, streams),
	)
	groupCommands(root)
	return root
}

// UnknownCommandError is a command line whose verb names no command, with the commands
// it may have meant (cobra's suggestions, by edit distance and prefix).
type UnknownCommandError struct {
	Arg         string // the word given, as typed
	Path        string // the command it was given to, e.g. "nfstune bench"
	Suggestions []string
}

func (e *UnknownCommandError) Error() string {
	return fmt.Sprintf("unknown command %q for %q", e.Arg, e.Path)
}

// groupCommands makes every command that only groups others (nfstune, bench, k8s)
// answer an unknown verb with an UnknownCommandError, and no verb with its help. Left to
// cobra, the root's error carries the suggestions in its text, which the final error's
// escaping prints as literal "\n", and a group given an unknown verb prints its help and
// exits 0.
func groupCommands(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.SuggestionsMinimumDistance = 2 // cobra's own default, which SuggestionsFor does not apply
		c.DisableFlagsInUseLine = true   // it takes no flags of its own but --help
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return &ExitError{Code: ExitError2, Err: &UnknownCommandError{Arg: args[0], Path: c.CommandPath(), Suggestions: c.SuggestionsFor(args[0])}}
		}
	}
	for _, sub := range c.Commands() {
		groupCommands(sub)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
