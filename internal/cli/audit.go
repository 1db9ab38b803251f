package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
)

// failOnNone disables the findings exit code.
const failOnNone = "none"

type auditFlags struct {
	config  string
	pid     int
	failOn  string
	output  string
	opStats bool
	stall   time.Duration
}

func newAuditCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &auditFlags{}
	c := &cobra.Command{
		Use:   "audit",
		Short: "Report what in each NFS mount costs performance or safety, with the fix",
		Long: `audit reads every NFS mount from /proc and /sys (never the mount points), resolves its
backend and workload profile from the policy, and reports findings with a stable ID, the evidence
(expected and actual), the reason with its source, and the exact fix. It changes nothing.

For a server that does not answer over --stall-window, it names the processes using its mounts
from /proc/<pid> (fdinfo, cwd, root). That scan is bounded: at most 100,000 reads of /proc and
2 s; what it left out is counted (uninspected, incomplete, and a warning).

Exit status: 0 when no finding is at or above --fail-on, 1 when one is, 2 on usage errors or when
the mounts cannot be read, 130 (143 for SIGTERM) when interrupted before the report: an
interrupted stall window prints no report.`,
		Example: `  nfstune audit
  nfstune audit --config /etc/nfstune/policy.yaml -o json
  nfstune audit --root /host --pid 1 --fail-on warning`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runAudit(c.Context(), g, streams, flags)
		},
	}
	f := c.Flags()
	f.StringVar(&flags.config, "config", "", "nfstune policy file (default: built-in profiles)")
	f.IntVar(&flags.pid, "pid", 0, "read the mounts of this process's mount namespace (0: this process)")
	f.StringVar(&flags.failOn, "fail-on", audit.SeverityError, "exit 1 when a finding is at or above this severity: error, warning, info or none")
	f.StringVarP(&flags.output, "output", "o", OutputTable, "output format: table, json or yaml")
	f.DurationVar(&flags.stall, "stall-window", inventory.DefaultStallWindow, "when requests are queued on a transport, look again after this long and report servers that did not answer (NFS093); 0 disables")
	f.BoolVar(&flags.opStats, "op-stats", false, "also parse the per-operation rows of mountstats, to report servers that left requests unanswered (NFS091); slower with many mounts")
	_ = c.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{audit.SeverityError, audit.SeverityWarning, audit.SeverityInfo, failOnNone}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{OutputTable, OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// auditOutput is the -o json|yaml document.
type auditOutput struct {
	Mounts   []inventory.Mount          `json:"mounts"`
	Findings []audit.Finding            `json:"findings"`
	Warnings []string                   `json:"warnings"`
	Desired  map[string]policy.Resolved `json:"desired"`
	// Stalled are the servers that did not answer over the stall window, with each of
	// their transports; Blocked their superblocks with the processes using them.
	Stalled []inventory.StalledServer `json:"stalled"`
	Blocked []inventory.BlockedMount  `json:"blocked"`
}

func runAudit(ctx context.Context, g *globals, streams IOStreams, flags *auditFlags) error {
	if err := checkOutput(flags.output, OutputTable, OutputJSON, OutputYAML); err != nil {
		return err
	}
	threshold := 0
	if flags.failOn != failOnNone {
		if threshold = audit.SeverityRank(flags.failOn); threshold == 0 {
			return &ExitError{Code: ExitError2, Err: fmt.Errorf("unknown --fail-on %q (want error, warning, info or none)", flags.failOn)}
		}
	}
	if err := checkStallWindow(flags.stall); err != nil {
		return err
	}
	if flags.pid < 0 {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("invalid --pid %d", flags.pid)}
	}
	pol, err := policy.Load(flags.config)
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("loading policy: %w", err)}
	}
	log := g.Logger(streams.ErrOut)
	// The first sample of the stall window, before the inventory: the window runs while
	// the rest is read.
	var first inventory.TransportSample
	start := time.Now()
	if flags.stall > 0 {
		first = inventory.SampleTransports(g.Root())
		log.Debug("audit", "stage", "first transport sample", "elapsed", time.Since(start), "transports", len(first.Transports))
	}
	start = time.Now()
	inv, err := inventory.Read(g.Root(), inventory.ReadOptions{PID: flags.pid, SkipOperations: !flags.opStats, Logger: log})
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("reading mounts: %w", err)}
	}
	log.Debug("audit", "stage", "inventory", "elapsed", time.Since(start), "mounts", len(inv.Mounts), "transports", len(inv.Transports))
	start = time.Now()
	// The processes using the mounts of a server that looks stuck are read while the
	// window runs.
	if err := inventory.SampleBlocked(ctx, g.Root(), inv, first, flags.stall, inventory.HolderLimits{}); err != nil {
		// An interrupted window says nothing about the servers: no report rather than a
		// clean one.
		if ierr := interruptedError(ctx, "audit interrupted during the stall window, no report"); ierr != nil {
			return ierr
		}
		return &ExitError{Code: ExitError2, Err: err}
	}
	log.Debug("audit", "stage", "stall sample", "elapsed", time.Since(start), "stalled", len(inv.Stalled), "blocked mounts", len(inv.Blocked))
	start = time.Now()
	rep := audit.Run(inv, pol)
	log.Debug("audit", "stage", "rules", "elapsed", time.Since(start), "findings", len(rep.Findings))
	defer func(start time.Time) { log.Debug("audit", "stage", "output", "elapsed", time.Since(start)) }(time.Now())

	if flags.output == OutputTable {
		for _, w := range inv.Warnings {
			if _, err := fmt.Fprintf(streams.ErrOut, "warning: %s\n", display.Text(w)); err != nil {
				return err
			}
		}
		if err := audit.WriteTable(streams.Out, rep); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
	} else {
		warnings := inv.Warnings
		if warnings == nil {
			warnings = []string{}
		}
		out := auditOutput{Mounts: rep.Mounts, Findings: rep.Findings, Warnings: warnings, Desired: rep.Desired,
			Stalled: rep.Stalled, Blocked: rep.Blocked}
		if out.Mounts == nil {
			out.Mounts = []inventory.Mount{}
		}
		if out.Stalled == nil {
			out.Stalled = []inventory.StalledServer{}
		}
		if out.Blocked == nil {
			out.Blocked = []inventory.BlockedMount{}
		}
		if err := writeStructured(streams.Out, flags.output, out); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
	}
	if threshold > 0 && audit.SeverityRank(rep.Worst()) >= threshold {
		return &ExitError{Code: ExitIssues}
	}
	return nil
}
