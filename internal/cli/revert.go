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
	output          string
	restoreOriginal []string
}

func newRevertCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &revertFlags{}
	c := &cobra.Command{
		Use:   "revert",
		Short: "Undo nfstune apply: put back every value it changed and take its lines out of files",
		Long: `revert reads the journal apply keeps under /var/lib/nfstune and puts back every original
value (bdi read-ahead, sysctls). In each file apply wrote (udev rule, drop-ins, nfsmount.conf,
/etc/fstab) it puts back the lines apply replaced and removes the lines apply added, keeping every
line someone else added or changed since; a file apply created is removed once nothing else is in
it. A file in which a line apply wrote was edited or removed since is refused: revert names it and
leaves it as it is, reverts the rest, and keeps the file in the journal. Make the line read as apply
wrote it, or as it was before apply, and run revert again; or name the file with
--restore-original to put it back byte for byte as it was before apply, dropping every change made
to it since. A journal of an earlier nfstune does not record what apply wrote: its files are
refused unless they are the originals already.

revert completes an apply that was interrupted, and running it again does nothing. A superblock
shut down by nfstune shutdown cannot be brought back: revert shows its record as not reversible
and keeps it: the journal then holds only such records. Exit code 1 means some items could not be
restored or were refused; they stay in the journal.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return runRevert(g, streams, flags)
		},
	}
	addOutputFlag(c, &flags.output, printer.Formats, "")
	c.Flags().StringArrayVar(&flags.restoreOriginal, "restore-original", nil, "put this file back byte for byte as it was before apply, dropping every change made to it since (repeatable)")
	g.hostFlags(c)
	return c
}

func runRevert(g *globals, streams IOStreams, flags *revertFlags) error {
	res, err := tune.Revert(g.Root(), flags.restoreOriginal...)
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
			case it.Action.Kind.Live():
				what = "restored to " + strings.TrimSpace(it.Action.New)
			case it.Kept > 0:
				what = fmt.Sprintf("nfstune's lines taken out; lines changed since apply, kept: %d", it.Kept)
			case it.Action.OldAbsent:
				what = "removed (apply created it)"
			}
			if it.Status != tune.StatusDone {
				what = it.Status
			}
			switch it.Status {
			case tune.StatusGone:
				what = "gone (unmounted since apply)"
			case tune.StatusRefused:
				what = "refused, left as it is"
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
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("revert: %d items could not be restored or were refused, and stay in the journal", res.Failed())}
	}
	return &ExitError{Code: ExitError2, Err: fmt.Errorf("revert: %w", err)}
}
