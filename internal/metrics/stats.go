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
	// Time is when the sample was read; zero (and left out of JSON) for saved files.
	Time   time.Time    `json:"time,omitzero"`
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
	// Views are the evidence views each report carries (KeepViews); empty: none.
	Views []View
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
			return noStats(opts.MountPoints)
		}
		KeepViews(rates, opts.Views)
		if err := report(StatsReport{Time: now.UTC(), Mounts: rates}); err != nil {
			return err
		}
	}
	return nil
}

// noStats is the error for a sample without any of the mounts asked for.
func noStats(mountPoints []string) error {
	if len(mountPoints) > 0 {
		return fmt.Errorf("no NFS mount with statistics at %v", mountPoints)
	}
	return ErrNoStats
}

// SavedStats is the report of two saved mountstats files (inventory.ReadMountStatsFile), as
// nfs-utils' mountstats -f FILE -S SINCE shows it: each mount of cur over the time since
// its sample in prev, the difference of the two ages; a mount absent from prev (or mounted
// again since) since it was mounted. With prev nil every mount is shown since mount. The
// report has no time: a file does not say when it was saved. opts.Interval and Count are
// ignored.
func SavedStats(prev, cur *inventory.Inventory, opts StatsOptions) (StatsReport, error) {
	var elapsed time.Duration
	if prev != nil {
		var err error
		if elapsed, err = ageBetween(prev, cur); err != nil {
			return StatsReport{}, err
		}
	}
	rates := filterRates(Rates(prev, cur, elapsed), cur, opts.MountPoints)
	if len(rates) == 0 {
		return StatsReport{}, noStats(opts.MountPoints)
	}
	KeepViews(rates, opts.Views)
	return StatsReport{Mounts: rates}, nil
}

// ageBetween is the time between two samples of one host: how much older a mount in both
// is in cur. Every mount in both was read at the same two moments, so the first one
// decides. A mount whose counters went back was mounted again in between and does not
// count (nor, as with mountstats -S, does a cur older than prev: each mount is then shown
// since mount). The same age in both is an error: the same sample twice.
func ageBetween(prev, cur *inventory.Inventory) (time.Duration, error) {
	old := map[string]*inventory.Stats{}
	for i, key := range statsKeys(prev) {
		if s := prev.Mounts[i].Stats; s != nil {
			old[key] = s
		}
	}
	for i, key := range statsKeys(cur) {
		p, c := old[key], cur.Mounts[i].Stats
		if p == nil || c == nil || wentBack(p, c) {
			continue
		}
		if c.Age == p.Age {
			return 0, fmt.Errorf("both samples show %v at the same age (%s): the same sample twice?",
				cur.Mounts[i].MountPoints, c.Age)
		}
		return c.Age - p.Age, nil
	}
	return 0, nil
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
	for i, key := range statsKeys(inv) {
		for _, mp := range inv.Mounts[i].MountPoints {
			if wanted[mp] {
				keep[key] = true
			}
		}
	}
	var out []MountRates
	for _, r := range rates {
		if keep[r.key] {
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

// writeViews writes the evidence views the report carries: counts over the interval, as
// nfsiostat -a, -d and -p print them.
func writeViews(p *printer.Writer, r MountRates) error {
	if a := r.Attr; a != nil {
		p.Printf("\nattribute cache (nfsiostat -a):\n")
		tw := tabwriter.NewWriter(p, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "VFS opens\tforced GETATTRs\tGETATTR\tACCESS\tpage cache invalidations\tattr cache invalidations\t\n")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t\n", a.VFSOpens, a.InodeRevalidates, a.GETATTRs, a.ACCESSes, a.DataInvalidates, a.AttrInvalidates)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if d := r.Dir; d != nil {
		p.Printf("\ndirectory cache (nfsiostat -d):\n")
		tw := tabwriter.NewWriter(p, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "VFS opens\tdentry revalidates\tVFS lookups\tLOOKUP\tgetdents\tREADDIR(PLUS)\t\n")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t\n", d.VFSOpens, d.DentryRevalidates, d.VFSLookups, d.LOOKUPs, d.VFSGetdents, d.READDIRs)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if g := r.Page; g != nil {
		p.Printf("\npage cache (nfsiostat -p):\n")
		tw := tabwriter.NewWriter(p, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tsingle-page calls\tbatched calls\tbatched pages\tpages per batched call\t\n")
		fmt.Fprintf(tw, "read\t%d\t%d\t%d\t%.1f\t\n", g.ReadPageCalls, g.ReadPagesCalls, g.ReadPagesPages, g.PagesPerReadPagesCall)
		fmt.Fprintf(tw, "write\t%d\t%d\t%d\t%.1f\t\n", g.WritePageCalls, g.WritePagesCalls, g.WritePagesPages, g.PagesPerWritePagesCall)
		if err := tw.Flush(); err != nil {
			return err
		}
		p.Printf("updatepage calls: %d, congestion waits: %d\n", g.UpdatePageCalls, g.CongestionWaits)
	}
	return p.Err()
}

// WriteStatsTable writes rates for people, as nfsiostat lays them out: per mount a line
// naming it, the mount's totals, the read-ahead evidence when the interval had reads, the
// evidence views asked for, then one row per operation. A mount read from a saved file
// has no device.
func WriteStatsTable(w io.Writer, rates []MountRates) error {
	p := printer.New(w)
	for _, r := range rates {
		dev := r.Device + ", "
		if r.Device == "" {
			dev = ""
		}
		p.Printf("\n%s:%s mounted on %s (%sNFS %s, %d connections, over %.1f s):\n\n",
			r.Server, r.Export, r.MountPoint, dev, r.Version, r.Connections, r.Seconds)
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
		if err := writeViews(p, r); err != nil {
			return err
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
