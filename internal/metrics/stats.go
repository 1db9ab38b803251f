package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/readahead"
)

// StatsReport is one report of nfstune stats: the rates of the selected mounts over one
// interval, stamped with the time of the read.
type StatsReport struct {
	Time   time.Time    `json:"time"`
	Mounts []MountRates `json:"mounts"`
}

// StatsOptions say how often WatchStats reports and on which mounts.
type StatsOptions struct {
	// Interval is the time between reports. Zero gives a single report.
	Interval time.Duration
	// Count is the number of reports; zero with an Interval reports until the context ends.
	Count int
	// MountPoints keeps the mounts one of whose mount points is listed; empty keeps all.
	MountPoints []string
}

// ErrNoStats is returned by WatchStats when no NFS mount has statistics.
var ErrNoStats = errors.New("no NFS mounts with statistics")

// WatchStats reads the inventory once per interval and passes the rates since the previous
// read to report; the first report covers the time since each mount was mounted, as
// nfsiostat's does. It returns nil after Count reports or when ctx ends, and otherwise the
// first error of read or report. The first read finding none of the mounts asked for is an
// error, ErrNoStats when none were named.
func WatchStats(ctx context.Context, read func() (*inventory.Inventory, error), opts StatsOptions, report func(StatsReport) error) error {
	count := opts.Count
	var tick *time.Ticker
	if opts.Interval > 0 {
		tick = time.NewTicker(opts.Interval)
		defer tick.Stop()
	} else {
		count = 1
	}
	var prev *inventory.Inventory
	var prevAt time.Time
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
			return fmt.Errorf("reading NFS statistics: %w", err)
		}
		now := time.Now()
		rates := filterRates(Rates(prev, cur, now.Sub(prevAt)), cur, opts.MountPoints)
		prev, prevAt = cur, now
		if n == 0 && len(rates) == 0 {
			if len(opts.MountPoints) > 0 {
				return fmt.Errorf("no NFS mount with statistics at %v", opts.MountPoints)
			}
			return ErrNoStats
		}
		if err := report(StatsReport{Time: now.UTC(), Mounts: rates}); err != nil {
			return err
		}
	}
	return nil
}

// filterRates keeps the mounts one of whose mount points was asked for; none asked keeps all.
func filterRates(rates []MountRates, inv *inventory.Inventory, want []string) []MountRates {
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
	var out []MountRates
	for _, r := range rates {
		if keep[r.Device] {
			out = append(out, r)
		}
	}
	return out
}

// writeReadAhead writes the read-ahead evidence of an interval with reads (package readahead):
// application reads, server bytes per application byte, the average READ against rsize,
// and the READs in flight against what one read-ahead window allows.
func writeReadAhead(p *printer.Writer, e readahead.Evidence) error {
	p.Printf("\n")
	tw := tabwriter.NewWriter(p, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "read-ahead kB\tapp read MB/s\tover-read\tavg READ kB\trsize kB\tREADs in flight\twindow READs\twindow-bound\t\n")
	fmt.Fprintf(tw, "%d\t%.3f\t%.3f\t%.3f\t%d\t%.3f\t%.3f\t%.3f\t\n", e.ReadAheadKB, e.AppBytesPerSecond/1e6, e.OverRead,
		e.AvgReadBytes/1024, e.RSize/1024, e.InFlight, e.WindowReads, e.WindowBound)
	return tw.Flush()
}

// WriteStatsTable writes rates for people, as nfsiostat lays them out: per mount a line
// naming it, the mount's totals, the read-ahead evidence when the interval had reads, then
// one row per operation.
func WriteStatsTable(w io.Writer, rates []MountRates) error {
	p := printer.New(w)
	for _, r := range rates {
		p.Printf("\n%s:%s mounted on %s (%s, NFS %s, %d connections, over %.1f s):\n\n",
			r.Server, r.Export, r.MountPoint, r.Device, r.Version, r.Connections, r.Seconds)
		tw := tabwriter.NewWriter(p, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "ops/s\tavg backlog\tread MB/s\twrite MB/s\tretrans\t\n")
		fmt.Fprintf(tw, "%.3f\t%.3f\t%.3f\t%.3f\t%d\t\n", r.OpsPerSec, r.Backlog, r.ReadMBps, r.WriteMBps, r.Retrans)
		if err := tw.Flush(); err != nil {
			return err
		}
		if r.ReadAhead.AppReadBytes > 0 || r.ReadAhead.ServerReadBytes > 0 {
			if err := writeReadAhead(p, r.ReadAhead); err != nil {
				return err
			}
		}
		if len(r.Ops) == 0 {
			continue
		}
		p.Printf("\n")
		tw = tabwriter.NewWriter(p, 0, 0, 2, ' ', tabwriter.AlignRight)
		ops := printer.New(tw)
		ops.Printf("operation\tops/s\tkB/op\tretrans\tavg RTT (ms)\tavg exe (ms)\tavg queue (ms)\terrors\t\n")
		for _, o := range r.Ops {
			ops.Printf("%s\t%.3f\t%.3f\t%d (%.1f%%)\t%.3f\t%.3f\t%.3f\t%d\t\n",
				o.Operation, o.OpsPerSec, o.KBPerOp, o.Retrans, 100*float64(o.Retrans)/float64(o.Ops),
				o.AvgRTTMs, o.AvgExeMs, o.AvgQueueMs, o.Errors)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return p.Err()
}
