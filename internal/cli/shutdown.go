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
	"github.com/nfstune/nfstune/internal/printer"
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
(use umount -f or umount -l there), and a superblock whose server is not seen stalled now: requests
unanswered over --stall-window (NFS093); major timeouts since the mount (NFS091) are shown but are
not enough, since a server that answers again still has them; --force skips only that last check. It prints who will get errors (the processes from a scan of /proc bounded
to 100,000 reads and 2 s; what it could not look at is counted in a warning), then asks for confirmation at a terminal;
without a terminal it needs --yes. Right before the write it checks again that the device still
shows the planned superblock (its source, mount IDs and mountstats age: a device number is reused
at once) and, unless --force, watches the server again over --stall-window: one that answers by
then is not shut down. Both checks run after the attribute is opened, and the write goes through
it: the kernel binds an open attribute to its superblock. The shutdown is recorded in the journal under /var/lib/nfstune
before the write; nfstune revert shows it as not reversible and keeps the record.

Exit codes: 0 shut down (now or before, or a dry run that passed every check), 1 the kernel refused
the write, 2 bad input, not an NFS superblock or the host could not be read, 3 refused (server not
seen stalled without --force, or answering again by the write; the device shows another superblock
by the write; not confirmed), 4 the kernel has no shutdown knob, 130 (143 for
SIGTERM) interrupted before the write: nothing written.`,
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
	addOutputFlag(c, &flags.output, printer.Formats, "")
	g.hostFlags(c)
	return c
}

func runShutdown(ctx context.Context, g *globals, streams IOStreams, flags *shutdownFlags, target string) error {
	if err := checkStallWindow(flags.stallWindow); err != nil {
		return err
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
			err = confirm(ctx, streams, plan)
		}
	}
	if act && err == nil {
		rep.Result, err = tune.Shutdown(ctx, root, plan, time.Now())
	}
	if ierr := interruptedError(ctx, "shutdown interrupted, nothing written"); ierr != nil && rep.Result == nil {
		return ierr
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
	case errors.Is(err, tune.ErrNotStalled), errors.Is(err, tune.ErrSuperblockChanged), errors.Is(err, errNotConfirmed):
		return &ExitError{Code: ExitRefused, Err: err}
	case rep.Result != nil:
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("shutdown: %w", err)}
	}
	return &ExitError{Code: ExitError2, Err: err}
}

// checkStallWindow checks a --stall-window flag (inventory.CheckStallWindow), for audit
// and shutdown alike.
func checkStallWindow(window time.Duration) error {
	if err := inventory.CheckStallWindow(window); err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--stall-window: %w", err)}
	}
	return nil
}

// errNotConfirmed is a shutdown the user did not confirm.
var errNotConfirmed = errors.New("not confirmed")

// confirm asks whether to go on and accepts y or yes. It returns ctx's error when ctx ends
// first (the read is left to the process's exit). The source comes from the host and is
// escaped, so that it cannot clear the plan printed above the prompt.
func confirm(ctx context.Context, streams IOStreams, p *tune.ShutdownPlan) error {
	fmt.Fprintf(streams.ErrOut, "Shut down %s (%s) now? This cannot be undone. [y/N] ", display.Text(p.Device), display.Text(p.Source))
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(streams.In).ReadString('\n')
		answer <- line
	}()
	var line string
	select {
	case <-ctx.Done():
		return ctx.Err()
	case line = <-answer:
	}
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
