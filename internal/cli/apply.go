package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/tune"
)

// applyDelayEnv makes apply sleep before each change, so that the lab can kill it half way.
const applyDelayEnv = "NFSTUNE_TEST_ACTION_DELAY"

type applyFlags struct {
	config      string
	persist     string
	exact       bool
	fstab       bool
	dryRun      bool
	output      string
	udevProgram string
	udevWait    time.Duration
	pid         int
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
/etc/fstab). It never remounts. Every original value and file is journaled under /var/lib/nfstune
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
	f.BoolVar(&flags.dryRun, "dry-run", false, "print the plan (old -> new for every value and file) and change nothing")
	f.StringVarP(&flags.output, "output", "o", OutputTable, "output format: table, json or yaml")
	f.StringVar(&flags.udevProgram, "udev-program", "", "absolute path of nfstune on the host, for the udev rule (default: this executable)")
	f.DurationVar(&flags.udevWait, "udev-wait", time.Second, "longest time the udev rule's helper waits for a new mount's mountinfo entry (at most 10s; udev is blocked meanwhile)")
	f.IntVar(&flags.pid, "pid", 0, "read the mounts of this process's mount namespace (0: this process)")
	return c
}

// tuneResolver adapts a policy to what tune needs.
func tuneResolver(pol *policy.Policy) func(*inventory.Mount) tune.Desired {
	return func(m *inventory.Mount) tune.Desired {
		if m.Backend == "" {
			m.Backend = inventory.DetectBackend(m.Server)
		}
		r := pol.Resolve(m)
		return tune.Desired{Profile: r.Profile, Mode: r.Mode, Rule: r.Rule}
	}
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

// applyReport is apply's structured output.
type applyReport struct {
	DryRun bool         `json:"dry_run"`
	Plan   *tune.Plan   `json:"plan"`
	Result *tune.Result `json:"result,omitempty"`
	Error  string       `json:"error,omitempty"`
}

func runApply(ctx context.Context, g *globals, streams IOStreams, flags *applyFlags) error {
	if err := checkOutput(flags.output, OutputTable, OutputJSON, OutputYAML); err != nil {
		return err
	}
	root := g.Root()
	pol, err := policy.Load(flags.config)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("loading policy: %w", err)}
	}
	inv, err := inventory.Read(root, inventory.ReadOptions{PID: flags.pid})
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	opts := tune.Options{Persist: flags.persist, Exact: flags.exact, Fstab: flags.fstab}
	if flags.persist == tune.PersistUdev {
		if opts.UdevCommand, err = udevCommand(root, flags); err != nil {
			return &ExitError{Code: ExitError2, Err: err}
		}
	}
	want := tune.Want{Resolve: tuneResolver(pol), Sysctls: pol.Sysctls(inv), SysctlsMax: pol.SysctlsMax(inv)}
	plan, err := tune.NewPlan(root, inv, want, opts)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: err}
	}
	rep := applyReport{DryRun: flags.dryRun, Plan: plan}
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
	}
	if flags.output != OutputTable {
		if err := writeStructured(streams.Out, flags.output, rep); err != nil {
			return err
		}
	} else if err := writeApply(streams.Out, &rep); err != nil {
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

// writeApply prints the plan (and with a result, what happened to each change).
func writeApply(w io.Writer, rep *applyReport) error {
	p := rep.Plan
	ew := &tuneWriter{w: w}
	status := map[int]tune.ItemResult{}
	if rep.Result != nil {
		for i, it := range rep.Result.Items {
			status[i] = it
		}
	}
	switch {
	case p.Empty():
		ew.printf("Nothing to change: read-ahead, persistence and sysctls already match the policy.\n")
	case rep.DryRun:
		ew.printf("Plan (dry run, nothing changed): %d changes\n", len(p.Actions))
	default:
		ew.printf("%s\n", applyHeader(rep))
	}
	readAhead := false
	for i, a := range p.Actions {
		mark := ""
		if it, ok := status[i]; ok {
			mark = "[" + it.Status + "] "
			if it.Status == tune.StatusDone && it.Value != "" {
				mark = "[done, read back " + it.Value + "] "
			}
		} else if rep.Result != nil {
			mark = "[not run] "
		}
		if a.Kind == tune.KindReadAhead {
			readAhead = true
		}
		if a.Kind.Live() {
			ew.printf("  %s%-9s %s: %s -> %s\n", mark, a.Kind, a.Path, a.Old, a.New)
		} else {
			old := "existing file"
			if a.OldAbsent {
				old = "absent"
			}
			ew.printf("  %s%-9s %s: %s -> new content:\n", mark, a.Kind, a.Path, old)
			for _, l := range fileLineDiff(a.Old, a.New) {
				ew.printf("        %s\n", l)
			}
		}
		if len(a.MountPoints) > 0 {
			ew.printf("        mounts: %s\n", strings.Join(a.MountPoints, ", "))
		}
		ew.printf("        why: %s\n", a.Reason)
		if it, ok := status[i]; ok && it.Error != "" {
			ew.printf("        error: %s\n", it.Error)
		}
	}
	if readAhead {
		ew.printf("Read-ahead applies to files opened after the change: files already open keep the old value until reopened.\n")
	}
	if len(p.Remounts) > 0 {
		ew.printf("\nMount options (apply never remounts; unmount each group together, then mount again):\n")
		for _, g := range p.Remounts {
			why := "these superblocks"
			if g.ClientWide {
				why = "every mount of this NFS client, since the first mount fixed nconnect/vers/proto"
			}
			var mps []string
			for _, mp := range g.UnmountTogether {
				if strings.ContainsAny(mp, " \t'\"") {
					mp = strconv.Quote(mp)
				}
				mps = append(mps, mp)
			}
			ew.printf("  client %s: unmount together (%s): %s\n", g.Key, why, strings.Join(mps, " "))
			for _, m := range g.Mounts {
				var ch []string
				for _, c := range m.Changes {
					have := c.Have
					if have == "" {
						have = "unset"
					}
					ch = append(ch, fmt.Sprintf("%s: %s -> %s", c.Name, have, c.Want))
				}
				ew.printf("    %s (%s): %s\n", strings.Join(m.MountPoints, ", "), m.Device, strings.Join(ch, "; "))
				for _, l := range m.FstabLines {
					ew.printf("      fstab: %s\n", l)
				}
				for _, c := range m.Commands {
					ew.printf("      mount: %s\n", c)
				}
			}
		}
	}
	if len(p.Notes) > 0 {
		ew.printf("\nNotes:\n")
		for _, n := range p.Notes {
			ew.printf("  - %s\n", n)
		}
	}
	return ew.err
}

// applyHeader says what apply really did: every change, some of them, or none.
func applyHeader(rep *applyReport) string {
	total := len(rep.Plan.Actions)
	done, failed := 0, 0
	if rep.Result != nil {
		failed = rep.Result.Failed()
		done = len(rep.Result.Items) - failed
	}
	journal := ""
	if rep.Result != nil && rep.Result.Journal != "" {
		journal = " (journal " + rep.Result.Journal + ")"
	}
	switch {
	case done == 0 && failed == 0 && rep.Error != "":
		return fmt.Sprintf("Nothing applied (%d changes planned, none made; the error follows):", total)
	case done == total:
		return fmt.Sprintf("Applied %d changes%s:", total, journal)
	}
	msg := fmt.Sprintf("Applied %d of %d changes", done, total)
	if failed > 0 {
		msg += fmt.Sprintf(", %d failed", failed)
	}
	if notRun := total - done - failed; notRun > 0 {
		msg += fmt.Sprintf(", %d not run", notRun)
	}
	return msg + journal + ":"
}

// fileLineDiff shows a file change as the lines removed (-) and added (+).
func fileLineDiff(old, new string) []string {
	oldLines := strings.Split(strings.TrimSuffix(old, "\n"), "\n")
	newLines := strings.Split(strings.TrimSuffix(new, "\n"), "\n")
	if old == "" {
		oldLines = nil
	}
	count := map[string]int{}
	for _, l := range newLines {
		count[l]++
	}
	var out []string
	for _, l := range oldLines {
		if count[l] > 0 {
			count[l]--
			continue
		}
		out = append(out, "- "+l)
	}
	count = map[string]int{}
	for _, l := range oldLines {
		count[l]++
	}
	for _, l := range newLines {
		if count[l] > 0 {
			count[l]--
			continue
		}
		out = append(out, "+ "+l)
	}
	return out
}

// tuneWriter keeps the first write error so that printing code stays linear.
type tuneWriter struct {
	w   io.Writer
	err error
}

// printf writes with every string argument escaped (display.Text): paths, mount points,
// notes and file lines come from the host and must not forge lines or reach the terminal raw.
func (e *tuneWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, display.Args(args)...)
	}
}
