package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/tune"
)

type revertFlags struct {
	output string
}

func newRevertCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &revertFlags{}
	c := &cobra.Command{
		Use:   "revert",
		Short: "Undo nfstune apply: restore every value and file it changed, byte for byte",
		Long: `revert reads the journal apply keeps under /var/lib/nfstune and puts back every original
value (bdi read-ahead, sysctls) and file (udev rule, drop-ins, /etc/fstab), removes the files apply
created, and removes the journal. It completes an apply that was interrupted, and running it again
does nothing. A superblock shut down by nfstune shutdown cannot be brought back: revert shows its
record as not reversible and keeps it: the journal then holds only such records. Exit code 1 means some items could not be
restored; they stay in the journal.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return runRevert(g, streams, flags)
		},
	}
	addOutputFlag(c, &flags.output, printer.Formats, "")
	g.hostFlags(c)
	return c
}

func runRevert(g *globals, streams IOStreams, flags *revertFlags) error {
	res, err := tune.Revert(g.Root())
	if flags.output != OutputTable {
		if werr := writeStructured(streams.Out, flags.output, res); werr != nil {
			return werr
		}
	} else {
		w := printer.New(streams.Out)
		if len(res.Items) == 0 && err == nil {
			w.Printf("Nothing to revert: no journal at %s.\n", tune.JournalPath)
		}
		for _, it := range res.Items {
			what := "restored"
			switch {
			case it.Action.OldAbsent:
				what = "removed (apply created it)"
			case it.Action.Kind.Live():
				what = "restored to " + strings.TrimSpace(it.Action.New)
			}
			if it.Status != tune.StatusDone {
				what = it.Status
			}
			if it.Status == tune.StatusGone {
				what = "gone (unmounted since apply)"
			}
			if it.Action.Kind == tune.KindShutdown {
				what = it.Action.Reason
				if it.Status == tune.StatusUnchanged {
					what = "nothing to undo: the shutdown was journaled but the write failed"
				}
			}
			w.Printf("  [%s] %-11s %s: %s\n", it.Status, it.Action.Kind, it.Action.Path, what)
			if it.Error != "" {
				w.Printf("        error: %s\n", it.Error)
			}
		}
		if werr := w.Err(); werr != nil {
			return werr
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tune.ErrPartial):
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("revert: %d items could not be restored and stay in the journal", res.Failed())}
	}
	return &ExitError{Code: ExitError2, Err: fmt.Errorf("revert: %w", err)}
}
