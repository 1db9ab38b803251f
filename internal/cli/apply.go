package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/tune"
)

// applyDelayEnv makes apply sleep before each change, so that the lab can kill it half way.
const applyDelayEnv = "NFSTUNE_TEST_ACTION_DELAY"

type applyFlags struct {
	config      string
	persist     string
	exact       bool
	fstab       bool
	nfsmount    bool
	dryRun      bool
	output      string
	udevProgram string
	udevWait    time.Duration
	pid         int
	measure     time.Duration
}

func newApplyCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &applyFlags{}
	c := &cobra.Command{
		Use:   "apply",
		Short: "Fix read-ahead, sysctls and (with --fstab) mount options of NFS mounts, now and for future mounts",
		Long: `apply raises the read-ahead of every NFS mount below its profile, persists read-ahead for
future mounts (a udev rule that asks nfstune per mount, or an nfs.conf.d [nfsrahead] drop-in), raises
NFS sysctls live and in /etc/sysctl.d, and prints per client group which mounts must be unmounted
together for new mount options, with their new fstab lines and mount commands (--fstab edits
/etc/fstab; --nfsmount-conf writes the options as per-server and per-mount-point sections of
/etc/nfsmount.conf.d/50-nfstune.conf, which mount.nfs adds to every future mount, even those made
by tools that pass no options, such as a Pod's inline nfs volume). It never remounts. Every original value and file is journaled under /var/lib/nfstune
first; "nfstune revert" puts them back. Exit code 1 means some changes failed.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runApply(c.Context(), g, streams, flags)
		},
	}
	f := c.Flags()
	f.StringVar(&flags.config, "config", "", "nfstune policy file (default: built-in profiles)")
	f.StringVar(&flags.persist, "persist", tune.PersistUdev, "keep read-ahead for future mounts with: udev, nfsconf or none")
	f.BoolVar(&flags.exact, "exact", false, "also lower read-ahead and sysctls that are above the profile")
	f.BoolVar(&flags.fstab, "fstab", false, "rewrite the NFS lines of /etc/fstab whose options must change (a backup is kept)")
	f.BoolVar(&flags.nfsmount, "nfsmount-conf", false, "write the policy's mount options as nfsmount.conf sections (a drop-in in /etc/nfsmount.conf.d), which mount.nfs adds to every future mount of those servers and mount points")
	f.BoolVar(&flags.dryRun, "dry-run", false, "print the plan (old -> new for every value and file) and change nothing")
	addOutputFlag(c, &flags.output, printer.Formats, "")
	g.hostFlags(c)
	f.StringVar(&flags.udevProgram, "udev-program", "", "absolute path of nfstune on the host, for the udev rule (default: this executable)")
	f.DurationVar(&flags.udevWait, "udev-wait", time.Second, "longest time the udev rule's helper waits for a new mount's mountinfo entry (at most 10s; udev is blocked meanwhile)")
	f.IntVar(&flags.pid, "pid", 0, "read the mounts of this process's mount namespace (0: this process)")
	f.DurationVar(&flags.measure, "measure", 0, "watch each mount's traffic for this long before and after applying, and judge every read-ahead change on it (helped, no_change, hurt, too_little_traffic); the verdicts are kept in the journal. 0 disables")
	return c
}

// udevCommand is what the udev rule runs: this binary's host path and the helper verb.
func udevCommand(root hostfs.Root, flags *applyFlags) (string, error) {
	prog := flags.udevProgram
	if prog == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("finding this executable for the udev rule (use --udev-program): %w", err)
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return "", fmt.Errorf("finding this executable for the udev rule (use --udev-program): %w", err)
		}
		if string(root) != "/" && string(root) != "" {
			if rel, err := filepath.Rel(string(root), exe); err == nil && !strings.HasPrefix(rel, "..") {
				exe = "/" + rel
			} else {
				return "", fmt.Errorf("--root is %s: give the host path of nfstune with --udev-program", root)
			}
		}
		prog = exe
	}
	if !filepath.IsAbs(prog) || strings.ContainsAny(prog, " \t\"'%$") {
		return "", fmt.Errorf("--udev-program %q: want an absolute path without spaces, quotes, %% or $", prog)
	}
	cmd := prog + " udev-readahead"
	if flags.config != "" {
		cfg, err := filepath.Abs(flags.config)
		if err != nil || strings.ContainsAny(cfg, " \t\"'%$") {
			return "", fmt.Errorf("--config %q cannot be passed to the udev rule: want a path without spaces, quotes, %% or $", flags.config)
		}
		cmd += " --config " + cfg
	}
	if flags.exact {
		cmd += " --exact"
	}
	if flags.udevWait <= 0 || flags.udevWait > 10*time.Second {
		return "", fmt.Errorf("--udev-wait %s: want more than 0 and at most 10s", flags.udevWait)
	}
	if flags.udevWait != time.Second {
		cmd += " --wait " + flags.udevWait.String()
	}
	return cmd, nil
}

// measurement is each mount's read-ahead evidence over a window, by device, and when the
// window ended.
type measurement struct {
	evidence map[string]readahead.Evidence
	end      time.Time
}

// measure reads the mounts, waits window, reads them again and returns the evidence in
// between with the second inventory. ctx ending ends the wait early.
func measure(ctx context.Context, read func() (*inventory.Inventory, error), window time.Duration) (measurement, *inventory.Inventory, error) {
	at := time.Now()
	start, err := read()
	if err != nil {
		return measurement{}, nil, fmt.Errorf("reading mounts: %w", err)
	}
	t := time.NewTimer(window)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	end := time.Now()
	cur, err := read()
	if err != nil {
		return measurement{}, nil, fmt.Errorf("reading mounts after %s of traffic: %w", window, err)
	}
	return measurement{evidence: readahead.Between(start, cur, end.Sub(at)), end: end}, cur, nil
}

func runApply(ctx context.Context, g *globals, streams IOStreams, flags *applyFlags) error {
	if flags.measure < 0 || (flags.measure > 0 && flags.dryRun) {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--measure %s: want a positive duration, without --dry-run", flags.measure)}
	}
	root := g.Root()
	pol, err := policy.Load(flags.config)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("loading policy: %w", err)}
	}
	read := func() (*inventory.Inventory, error) {
		return inventory.Read(root, inventory.ReadOptions{PID: flags.pid})
	}
	inv, err := read()
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	// With --measure, the plan is made from the inventory that ends the window before.
	var before measurement
	if flags.measure > 0 {
		if before, inv, err = measure(ctx, read, flags.measure); err != nil {
			return &ExitError{Code: ExitError2, Err: err}
		}
	}
	opts := tune.Options{Persist: flags.persist, Exact: flags.exact, Fstab: flags.fstab, NFSMountConf: flags.nfsmount}
	if flags.persist == tune.PersistUdev {
		if opts.UdevCommand, err = udevCommand(root, flags); err != nil {
			return &ExitError{Code: ExitError2, Err: err}
		}
	}
	// The values the agent learned per volume; an unreadable file is none, as for the agent.
	learned, err := tune.LoadLearned(root)
	if err != nil {
		g.Logger(streams.ErrOut).Warn("read-ahead starts at its adaptive floor: the values the agent learned cannot be read", "err", err)
	}
	want := tune.Want{Resolve: tune.PolicyResolver(pol, learned), Sysctls: pol.Sysctls(inv), SysctlsMax: pol.SysctlsMax(inv), Rules: pol.Rules, PolicyName: pol.File}
	plan, err := tune.NewPlan(root, inv, want, opts)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	rep := tune.Report{DryRun: flags.dryRun, Plan: plan}
	var applyErr error
	if !flags.dryRun {
		aopts := tune.ApplyOptions{PID: flags.pid}
		if v := os.Getenv(applyDelayEnv); v != "" {
			if aopts.Delay, err = time.ParseDuration(v); err != nil {
				return &ExitError{Code: ExitError2, Err: fmt.Errorf("%s: %w", applyDelayEnv, err)}
			}
		}
		rep.Result, applyErr = tune.Apply(ctx, root, plan, aopts)
		if applyErr != nil {
			rep.Error = applyErr.Error()
		}
		if changes := tune.ReadAheadChanges(rep.Result); flags.measure > 0 && len(changes) > 0 {
			after, _, err := measure(ctx, read, flags.measure)
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			for _, c := range changes {
				rep.Verdicts = append(rep.Verdicts, readahead.NewChange(c.Device, c.MountPoint, c.FromKB, c.ToKB,
					before.end, before.evidence[c.Device], after.evidence[c.Device]))
			}
			if err := tune.RecordVerdicts(root, rep.Verdicts); err != nil {
				return &ExitError{Code: ExitError2, Err: fmt.Errorf("keeping the read-ahead verdicts: %w", err)}
			}
		}
	}
	if flags.output != OutputTable {
		if err := writeStructured(streams.Out, flags.output, rep); err != nil {
			return err
		}
	} else if err := tune.WriteReport(streams.Out, &rep); err != nil {
		return err
	}
	switch {
	case applyErr == nil:
		return nil
	case errors.Is(applyErr, tune.ErrPartial) && len(rep.Result.Items) == 0:
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("apply: nothing changed: %w", applyErr)}
	case errors.Is(applyErr, tune.ErrPartial):
		msg := fmt.Sprintf("apply: %d of %d changes failed", rep.Result.Failed(), len(plan.Actions))
		if notRun := len(plan.Actions) - len(rep.Result.Items); notRun > 0 {
			msg += fmt.Sprintf(", %d not run", notRun)
		}
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("%s; run nfstune revert to undo the rest", msg)}
	}
	return &ExitError{Code: ExitError2, Err: fmt.Errorf("apply: %w", applyErr)}
}
