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

	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/printer"
)

type statsFlags struct {
	Output string
	PID    int
	Views  []string
	File   string
	Since  string
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

--view adds nfsiostat's evidence views, the counters behind attribute and directory cache
advice (actimeo, nocto, lookupcache): attr (-a: opens, forced GETATTRs, cache
invalidations), dir (-d: opens, dentry revalidates and lookups against LOOKUPs, getdents
against READDIRs), page (-p: single-page against batched reads and writes); all for every
one.

--file reads a saved copy of mountstats (a sosreport's proc/self/mountstats) instead of the
host, as nfs-utils' mountstats -f does; --since shows the difference from an earlier saved
copy, over the time between them (mountstats -S), with --file or against the host's
mountstats now. A saved file has no mountinfo: each entry is shown on its own, without a
device or read-ahead.

Unlike nfsiostat, ops/s and backlog add up all xprt: lines, so they are right with nconnect.
Only /proc is read; mount points are never touched.`,
		Example: `  nfstune stats               # one report since mount
  nfstune stats 5             # every 5 s until interrupted
  nfstune stats 1 10 /mnt/data -o json
  nfstune stats --view attr,dir /mnt/home
  nfstune stats --file sosreport/proc/self/mountstats --view all
  nfstune stats --file after.txt --since before.txt -o json`,
		RunE: func(c *cobra.Command, args []string) error {
			interval, count, mounts, err := parseStatsArgs(args)
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			views, err := metrics.ParseViews(flags.Views)
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			opts := metrics.StatsOptions{Interval: interval, Count: count, MountPoints: mounts, Views: views}
			if flags.File != "" || flags.Since != "" {
				if interval > 0 {
					return &ExitError{Code: ExitError2, Err: errors.New("an interval does not go with --file or --since: a saved file does not change")}
				}
				cur := flags.File
				if cur == "" {
					cur = g.Root().Proc(procDir(flags.PID), "mountstats")
				} else if c.Flags().Changed("pid") {
					return &ExitError{Code: ExitError2, Err: errors.New("--pid does not go with --file")}
				}
				return runSavedStats(streams, cur, flags.Since, opts, flags.Output)
			}
			read := func() (*inventory.Inventory, error) {
				return inventory.Read(g.Root(), inventory.ReadOptions{PID: flags.PID})
			}
			return runStats(c.Context(), streams.Out, read, opts, flags.Output)
		},
	}
	addOutputFlag(c, &flags.Output, printer.Formats, "json: one object a line per interval; yaml: one document per interval")
	g.hostFlags(c)
	c.Flags().IntVar(&flags.PID, "pid", 0, "read /proc/<pid>/mountstats (another mount namespace); 0 for self")
	c.Flags().StringSliceVar(&flags.Views, "view", nil, "evidence views to add: attr, dir, page or all (repeat or comma-separate)")
	c.Flags().StringVarP(&flags.File, "file", "f", "", "read a saved mountstats file instead of the host's (mountstats -f)")
	c.Flags().StringVarP(&flags.Since, "since", "S", "", "show the difference from an earlier saved mountstats file (mountstats -S)")
	return c
}

// procDir is the /proc directory whose mountstats --pid names.
func procDir(pid int) string {
	if pid > 0 {
		return strconv.Itoa(pid)
	}
	return "self"
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

// runStats prints a report per interval: one JSON object per line with -o json, one YAML
// document with -o yaml, else a table.
func runStats(ctx context.Context, w io.Writer, read func() (*inventory.Inventory, error), opts metrics.StatsOptions, format string) error {
	err := metrics.WatchStats(ctx, read, opts, func(r metrics.StatsReport) error {
		return writeStatsReport(w, r, format)
	})
	return statsExit(err)
}

// runSavedStats prints the report of the saved mountstats file cur, since the saved file
// since when one is given. Entries the parser dropped are warnings on stderr.
func runSavedStats(streams IOStreams, cur, since string, opts metrics.StatsOptions, format string) error {
	read := func(file string) (*inventory.Inventory, error) {
		inv, err := inventory.ReadMountStatsFile(file)
		if err != nil {
			return nil, &ExitError{Code: ExitError2, Err: err}
		}
		for _, w := range inv.Warnings {
			if _, err := fmt.Fprintf(streams.ErrOut, "warning: %s: %s\n", display.Text(file), display.Text(w)); err != nil {
				return nil, err
			}
		}
		return inv, nil
	}
	now, err := read(cur)
	if err != nil {
		return err
	}
	var before *inventory.Inventory
	if since != "" {
		if before, err = read(since); err != nil {
			return err
		}
	}
	r, err := metrics.SavedStats(before, now, opts)
	if err != nil {
		return statsExit(err)
	}
	return statsExit(writeStatsReport(streams.Out, r, format))
}

func writeStatsReport(w io.Writer, r metrics.StatsReport, format string) error {
	switch format {
	case OutputJSON:
		return json.NewEncoder(w).Encode(r)
	case OutputYAML:
		// One document per interval, so that a stream of reports is one YAML stream.
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return writeStructured(w, OutputYAML, r)
	}
	return metrics.WriteStatsTable(w, r.Mounts)
}

// statsExit maps an error of stats to its exit code: no NFS statistics is an issue
// scripts can test for, anything else an error.
func statsExit(err error) error {
	switch {
	case errors.Is(err, metrics.ErrNoStats):
		return &ExitError{Code: ExitIssues, Err: err}
	case err != nil:
		return &ExitError{Code: ExitError2, Err: err}
	}
	return nil
}
