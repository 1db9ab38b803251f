package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/tune"
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
	traffic time.Duration
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
	addOutputFlag(c, &flags.output, printer.Formats, "")
	g.hostFlags(c)
	g.logFlags(c)
	f.DurationVar(&flags.stall, "stall-window", inventory.DefaultStallWindow, "when requests are queued on a transport, look again after this long and report servers that did not answer (NFS093); 0 disables")
	f.DurationVar(&flags.traffic, "traffic-window", 0, "read mountstats again after this long and judge each mount's read-ahead on the traffic in between (NFS004, the window bounds the readers); it runs alongside the stall window. 0 disables")
	f.BoolVar(&flags.opStats, "op-stats", false, "also parse the per-operation rows of mountstats, to report servers that left requests unanswered (NFS091); slower with many mounts")
	_ = c.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{audit.SeverityError, audit.SeverityWarning, audit.SeverityInfo, failOnNone}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// sampleTraffic waits until window has passed since first was read (at), reads the mounts
// again and returns each mount's read-ahead evidence over the time in between. ctx ending
// ends the wait early: the evidence then covers the shorter window.
func sampleTraffic(ctx context.Context, root hostfs.Root, pid int, first *inventory.Inventory, at time.Time, window time.Duration) (map[string]readahead.Evidence, error) {
	if wait := time.Until(at.Add(window)); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	elapsed := time.Since(at)
	second, err := inventory.Read(root, inventory.ReadOptions{PID: pid})
	if err != nil {
		return nil, fmt.Errorf("reading mounts again after the traffic window: %w", err)
	}
	return readahead.Between(first, second, elapsed), nil
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
	// Mounting are the NFS mounts stuck in progress on a stalled server (no superblock yet)
	// and the unmounts waiting on the stalled mounts.
	Mounting []inventory.MountProgram `json:"mounting"`
	// ReadAheadVerdicts are the verdicts nfstune apply --measure kept in its journal on the
	// read-ahead changes it made, the last per device.
	ReadAheadVerdicts []readahead.Change `json:"readahead_verdicts"`
	// OptionOrigins tell, by device, where each effective option the profile names came
	// from, for the mounts an nfsmount.conf section matches.
	OptionOrigins map[string][]audit.OptionOrigin `json:"option_origins,omitempty"`
	// MountDefaults are the nfsmount.conf sections mount.nfs reads and whether it reads them.
	MountDefaults *inventory.MountDefaults `json:"mount_defaults,omitempty"`
	// ClientIdentity is where the node's NFSv4 client identity comes from.
	ClientIdentity *inventory.ClientIdentity `json:"client_identity,omitempty"`
	// TLSHandshake is whether tlshd runs, read when a mount uses TLS.
	TLSHandshake *inventory.TLSHandshake `json:"tls_handshake,omitempty"`
}

func runAudit(ctx context.Context, g *globals, streams IOStreams, flags *auditFlags) error {
	defer batchGC()()
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
	if flags.traffic < 0 {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("invalid --traffic-window %s", flags.traffic)}
	}
	log := g.Logger(streams.ErrOut)
	readOpts := inventory.ReadOptions{PID: flags.pid, SkipOperations: !flags.opStats, Logger: log}
	// The first sample of the traffic window, with the READ row of every mount; like the
	// stall window, the window runs while the rest is read.
	var trafficStart *inventory.Inventory
	var trafficAt time.Time
	if flags.traffic > 0 {
		trafficAt = time.Now()
		if trafficStart, err = inventory.Read(g.Root(), inventory.ReadOptions{PID: flags.pid}); err != nil {
			return &ExitError{Code: ExitError2, Err: fmt.Errorf("reading mounts: %w", err)}
		}
	}
	// The first sample of the stall window, before the inventory: the window runs while
	// the rest is read.
	var first inventory.TransportSample
	start := time.Now()
	if flags.stall > 0 {
		first = inventory.SampleTransports(g.Root())
		log.Debug("audit", "stage", "first transport sample", "elapsed", time.Since(start), "transports", len(first.Transports))
	}
	start = time.Now()
	inv, err := inventory.Read(g.Root(), readOpts)
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
	var aopts audit.Options
	if trafficStart != nil {
		if aopts.Traffic, err = sampleTraffic(ctx, g.Root(), flags.pid, trafficStart, trafficAt, flags.traffic); err != nil {
			return &ExitError{Code: ExitError2, Err: err}
		}
	}
	start = time.Now()
	rep := audit.RunWith(inv, pol, aopts)
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
		verdicts, err := tune.Verdicts(g.Root())
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("read-ahead verdicts: %v", err))
		}
		if verdicts == nil {
			verdicts = []readahead.Change{}
		}
		out := auditOutput{Mounts: rep.Mounts, Findings: rep.Findings, Warnings: warnings, Desired: rep.Desired,
			Stalled: rep.Stalled, Blocked: rep.Blocked, Mounting: rep.Mounting, ReadAheadVerdicts: verdicts, OptionOrigins: rep.Origins,
			MountDefaults: inv.MountDefaults, ClientIdentity: inv.ClientIdentity, TLSHandshake: rep.TLSHandshake}
		if out.Mounts == nil {
			out.Mounts = []inventory.Mount{}
		}
		if out.Stalled == nil {
			out.Stalled = []inventory.StalledServer{}
		}
		if out.Blocked == nil {
			out.Blocked = []inventory.BlockedMount{}
		}
		if out.Mounting == nil {
			out.Mounting = []inventory.MountProgram{}
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
