package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/tune"
)

type shutdownFlags struct {
	force       bool
	stallWindow time.Duration
	dryRun      bool
	yes         bool
	output      string
}

func newShutdownCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &shutdownFlags{}
	c := &cobra.Command{
		Use:   "shutdown DEVICE|MOUNT",
		Short: "Shut down one NFS superblock whose server is gone, so that blocked processes get EIO and it can be unmounted",
		Long: `shutdown writes 1 to /sys/fs/nfs/<major:minor>/shutdown (Linux 6.6 and later): the kernel fails
every outstanding and future request of that NFS superblock with EIO, so that the processes blocked on
a dead server return and the mount can be unmounted. It cannot be undone: the superblock stays failed
until it is unmounted. nfstune never does it on its own.

DEVICE is the superblock's major:minor; MOUNT a mount point, resolved through /proc/self/mountinfo
(never opened). shutdown refuses a device that is not an NFS superblock, a kernel without the knob
(use umount -f or umount -l there), and a superblock whose server is not seen stalled: requests
unanswered over --stall-window (NFS093) or major timeouts since the mount (NFS091); --force skips
only that last check. It prints who will get errors, then asks for confirmation at a terminal;
without a terminal it needs --yes. The shutdown is recorded in the journal under /var/lib/nfstune
before the write; nfstune revert shows it as not reversible.

Exit codes: 0 shut down (now or before, or a dry run that passed every check), 1 the kernel refused
the write, 2 bad input, not an NFS superblock or the host could not be read, 3 refused (server not
seen stalled without --force, not confirmed), 4 the kernel has no shutdown knob.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runShutdown(c.Context(), g, streams, flags, args[0])
		},
	}
	f := c.Flags()
	f.BoolVar(&flags.force, "force", false, "shut down even if the server is not seen stalled (the NFS check still applies)")
	f.DurationVar(&flags.stallWindow, "stall-window", inventory.DefaultStallWindow, "when requests are queued, look again after this long to tell whether the server answers")
	f.BoolVar(&flags.dryRun, "dry-run", false, "run every check, print who would get errors, and write nothing")
	f.BoolVar(&flags.yes, "yes", false, "do not ask for confirmation (needed when stdin is not a terminal)")
	f.StringVarP(&flags.output, "output", "o", OutputTable, "output format: table, json or yaml")
	return c
}

func runShutdown(ctx context.Context, g *globals, streams IOStreams, flags *shutdownFlags, target string) error {
	if err := checkOutput(flags.output, OutputTable, OutputJSON, OutputYAML); err != nil {
		return err
	}
	if flags.stallWindow < 0 {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--stall-window %s: want 0 or more", flags.stallWindow)}
	}
	root := g.Root()
	plan, err := tune.PlanShutdown(ctx, root, target, tune.ShutdownOptions{Force: flags.force, StallWindow: flags.stallWindow})
	rep := &tune.ShutdownReport{DryRun: flags.dryRun, Plan: plan}
	table := flags.output == OutputTable
	shown := false // the plan is printed once, before the prompt when there is one
	act := err == nil && !flags.dryRun && !plan.AlreadyShutDown
	if act && !flags.yes {
		if !isTerminal(streams.In) {
			err = fmt.Errorf("refusing to shut down %s: %w: stdin is not a terminal; add --yes (or --dry-run to see who would get errors)", plan.Device, errNotConfirmed)
		} else {
			if table {
				if err := tune.WriteShutdownPlan(streams.Out, plan); err != nil {
					return err
				}
				shown = true
			}
			err = confirm(streams, plan)
		}
	}
	if act && err == nil {
		rep.Result, err = tune.Shutdown(root, plan, time.Now())
	}
	if err != nil {
		rep.Error = err.Error()
	}
	switch {
	case plan == nil:
	case !table:
		if werr := writeStructured(streams.Out, flags.output, rep); werr != nil {
			return werr
		}
	default:
		if !shown {
			if werr := tune.WriteShutdownPlan(streams.Out, plan); werr != nil {
				return werr
			}
		}
		if werr := tune.WriteShutdownResult(streams.Out, rep); werr != nil {
			return werr
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tune.ErrNoShutdownKnob):
		return &ExitError{Code: ExitUnsupported, Err: err}
	case errors.Is(err, tune.ErrNotStalled), errors.Is(err, errNotConfirmed):
		return &ExitError{Code: ExitRefused, Err: err}
	case rep.Result != nil:
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("shutdown: %w", err)}
	}
	return &ExitError{Code: ExitError2, Err: err}
}

// errNotConfirmed is a shutdown the user did not confirm.
var errNotConfirmed = errors.New("not confirmed")

// confirm asks whether to go on and accepts y or yes. The source comes from the host and
// is escaped, so that it cannot clear the plan printed above the prompt.
func confirm(streams IOStreams, p *tune.ShutdownPlan) error {
	fmt.Fprintf(streams.ErrOut, "Shut down %s (%s) now? This cannot be undone. [y/N] ", display.Text(p.Device), display.Text(p.Source))
	line, _ := bufio.NewReader(streams.In).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fmt.Errorf("%s left as it is: %w", p.Device, errNotConfirmed)
	}
	return nil
}

// isTerminal reports whether r is a terminal (stdin at an interactive shell).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
