package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/spf13/cobra"

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
time, from two snapshots of mountstats; when the interval had reads, the read-ahead evidence:
application read MB/s, over-read (server READ bytes per application byte), average READ
against rsize, and READs in flight against what one read-ahead window allows (window-bound).
The first report covers the time since each mount;
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

// runStats prints a report per interval: one JSON object per line with -o json, else a table.
func runStats(ctx context.Context, w io.Writer, read func() (*inventory.Inventory, error), interval time.Duration, count int, mounts []string, format string) error {
	opts := metrics.StatsOptions{Interval: interval, Count: count, MountPoints: mounts}
	err := metrics.WatchStats(ctx, read, opts, func(r metrics.StatsReport) error {
		if format == OutputJSON {
			return json.NewEncoder(w).Encode(r)
		}
		return metrics.WriteStatsTable(w, r.Mounts)
	})
	switch {
	case errors.Is(err, metrics.ErrNoStats):
		return &ExitError{Code: ExitIssues, Err: err}
	case err != nil:
		return &ExitError{Code: ExitError2, Err: err}
	}
	return nil
}
