package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
)

type statsFlags struct {
	Output string
	PID    int
}

func newStatsCommand(g *globals, streams IOStreams) *cobra.Command {
	flags := &statsFlags{}
	c := &cobra.Command{
		Use:   "stats [interval [count]] [mountpoint...]",
		Short: "Show per-mount NFS rates, like nfsiostat, counted over every nconnect transport",
		Long: `stats prints, for each NFS mount, RPC ops/s, backlog, read and write MB/s, retransmissions,
and per operation (READ, WRITE, GETATTR, ...) ops/s, kB/op, average RTT, execute and queue
time, from two snapshots of mountstats. The first report covers the time since each mount;
later ones cover the interval (seconds). Without a count it runs until interrupted.

Unlike nfsiostat, ops/s and backlog add up all xprt: lines, so they are right with nconnect.
Only /proc is read; mount points are never touched.`,
		Example: `  nfstune stats               # one report since mount
  nfstune stats 5             # every 5 s until interrupted
  nfstune stats 1 10 /mnt/data -o json`,
		RunE: func(c *cobra.Command, args []string) error {
			interval, count, mounts, err := parseStatsArgs(args)
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			if err := checkOutput(flags.Output, OutputTable, OutputJSON); err != nil {
				return err
			}
			read := func() (*inventory.Inventory, error) {
				return inventory.Read(g.Root(), inventory.ReadOptions{PID: flags.PID})
			}
			return runStats(c.Context(), streams.Out, read, interval, count, mounts, flags.Output)
		},
	}
	c.Flags().StringVarP(&flags.Output, "output", "o", OutputTable, "output format: table or json (one object per interval)")
	c.Flags().IntVar(&flags.PID, "pid", 0, "read /proc/<pid>/mountstats (another mount namespace); 0 for self")
	return c
}

// parseStatsArgs splits nfsiostat-style arguments: up to two leading numbers (interval in
// seconds, then count), then mount points.
func parseStatsArgs(args []string) (interval time.Duration, count int, mounts []string, err error) {
	i := 0
	if i < len(args) {
		if s, perr := strconv.ParseFloat(args[i], 64); perr == nil {
			if s <= 0 || s > 86400 {
				return 0, 0, nil, fmt.Errorf("interval %q: want seconds between 0 and 86400", args[i])
			}
			interval = time.Duration(s * float64(time.Second))
			i++
			if i < len(args) {
				if n, perr := strconv.Atoi(args[i]); perr == nil {
					if n <= 0 {
						return 0, 0, nil, fmt.Errorf("count %q: want a positive number", args[i])
					}
					count = n
					i++
				}
			}
		}
	}
	for _, a := range args[i:] {
		mounts = append(mounts, path.Clean(a))
	}
	if interval == 0 {
		count = 1
	}
	return interval, count, mounts, nil
}

// statsReport is one interval of -o json.
type statsReport struct {
	Time   time.Time            `json:"time"`
	Mounts []metrics.MountRates `json:"mounts"`
}

func runStats(ctx context.Context, w io.Writer, read func() (*inventory.Inventory, error), interval time.Duration, count int, mounts []string, format string) error {
	var prev *inventory.Inventory
	var prevAt time.Time
	var tick *time.Ticker
	if interval > 0 {
		tick = time.NewTicker(interval)
		defer tick.Stop()
	}
	for n := 0; count == 0 || n < count; n++ {
		if n > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		cur, err := read()
		if err != nil {
			return &ExitError{Code: ExitError2, Err: fmt.Errorf("reading NFS statistics: %w", err)}
		}
		now := time.Now()
		rates := filterRates(metrics.Rates(prev, cur, now.Sub(prevAt)), cur, mounts)
		prev, prevAt = cur, now
		if n == 0 && len(rates) == 0 {
			if len(mounts) > 0 {
				return &ExitError{Code: ExitError2, Err: fmt.Errorf("no NFS mount with statistics at %v", mounts)}
			}
			return &ExitError{Code: ExitIssues, Err: fmt.Errorf("no NFS mounts with statistics")}
		}
		if format == OutputJSON {
			if err := json.NewEncoder(w).Encode(statsReport{Time: now.UTC(), Mounts: rates}); err != nil {
				return err
			}
			continue
		}
		if err := writeStatsTable(w, rates); err != nil {
			return err
		}
	}
	return nil
}

// filterRates keeps the mounts one of whose mount points was asked for; none asked keeps all.
func filterRates(rates []metrics.MountRates, inv *inventory.Inventory, want []string) []metrics.MountRates {
	if len(want) == 0 {
		return rates
	}
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		wanted[w] = true
	}
	keep := make(map[string]bool)
	for _, m := range inv.Mounts {
		for _, mp := range m.MountPoints {
			if wanted[mp] {
				keep[m.Device] = true
			}
		}
	}
	var out []metrics.MountRates
	for _, r := range rates {
		if keep[r.Device] {
			out = append(out, r)
		}
	}
	return out
}

func writeStatsTable(w io.Writer, rates []metrics.MountRates) error {
	for _, r := range rates {
		if _, err := fmt.Fprintf(w, "\n%s:%s mounted on %s (%s, NFS %s, %d connections, over %.1f s):\n\n", display.Args([]any{
			r.Server, r.Export, r.MountPoint, r.Device, r.Version, r.Connections, r.Seconds})...); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "ops/s\tavg backlog\tread MB/s\twrite MB/s\tretrans\t\n")
		fmt.Fprintf(tw, "%.3f\t%.3f\t%.3f\t%.3f\t%d\t\n", r.OpsPerSec, r.Backlog, r.ReadMBps, r.WriteMBps, r.Retrans)
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(r.Ops) == 0 {
			continue
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "operation\tops/s\tkB/op\tretrans\tavg RTT (ms)\tavg exe (ms)\tavg queue (ms)\terrors\t\n")
		for _, o := range r.Ops {
			fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%d (%.1f%%)\t%.3f\t%.3f\t%.3f\t%d\t\n",
				display.Text(o.Operation), o.OpsPerSec, o.KBPerOp, o.Retrans, 100*float64(o.Retrans)/float64(o.Ops),
				o.AvgRTTMs, o.AvgExeMs, o.AvgQueueMs, o.Errors)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
