package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/plan"
	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/version"
)

// benchDeps are what bench commands reach outside the process; tests replace them.
type benchDeps struct {
	exec      fio.RunFunc
	inventory func(g *globals) bench.InventoryFunc
}

func defaultBenchDeps() benchDeps {
	return benchDeps{
		exec: fio.Exec,
		inventory: func(g *globals) bench.InventoryFunc {
			return func() (*inventory.Inventory, error) { return inventory.Read(g.Root(), inventory.ReadOptions{}) }
		},
	}
}

type benchRunFlags struct {
	Mount        string
	Profile      string
	Repeat       int
	Size         string
	Runtime      time.Duration
	Ramp         time.Duration
	Output       string
	Out          string
	AllowNonNFS  bool
	NoDropCaches bool
	Fio          string
}

func newBenchCommand(g *globals, streams IOStreams) *cobra.Command {
	return newBenchCommandWith(g, streams, defaultBenchDeps())
}

func newBenchCommandWith(g *globals, streams IOStreams, deps benchDeps) *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark an NFS mount with fio's built-in profiles, compare, sweep and report",
		Long: `bench drives fio with job profiles built into nfstune (never user job files: fio can run
programs), inside a directory it creates on the mount and removes afterwards, even when
interrupted. Every result records the tuning in effect (mount options, read_ahead_kb, effective
connections, backend), the fio version and command, the kernel and the mountstats delta of
each run, so that two results can be compared honestly.`,
	}
	c.AddCommand(
		newBenchRunCommand(g, streams, deps),
		newBenchProfilesCommand(streams),
		newBenchCompareCommand(streams),
		newBenchSweepCommand(g, streams, deps),
		newBenchCurveCommand(g, streams, deps),
		newBenchCurvePodCommand(g, streams, deps),
		newBenchReportCommand(streams),
	)
	return c
}

func addBenchRunFlags(c *cobra.Command, f *benchRunFlags) {
	c.Flags().StringVar(&f.Mount, "mount", "", "directory on the NFS mount to benchmark (required)")
	c.Flags().StringVar(&f.Profile, "profile", "", "built-in profile; see nfstune bench profiles (required)")
	c.Flags().IntVar(&f.Repeat, "repeat", bench.DefaultRepeat, "times to run the whole profile; at least 3 gives a spread worth comparing")
	c.Flags().StringVar(&f.Size, "size", "1G", "size of each data file, e.g. 4G; larger than the client's RAM defeats caching best")
	c.Flags().DurationVar(&f.Runtime, "runtime", bench.DefaultRuntime, "run time of random jobs, cap for sequential ones")
	c.Flags().DurationVar(&f.Ramp, "ramp", bench.DefaultRamp, "warm-up of random jobs, not counted")
	c.Flags().StringVar(&f.Out, "out", "", "also write the JSON result to this file")
	c.Flags().BoolVar(&f.AllowNonNFS, "allow-non-nfs", false, "benchmark a directory that is not on NFS (a local baseline)")
	c.Flags().BoolVar(&f.NoDropCaches, "no-drop-caches", false, "do not write vm.drop_caches before each run (done only as root)")
	c.Flags().StringVar(&f.Fio, "fio", "fio", "fio program to run")
	_ = c.MarkFlagRequired("mount")
	_ = c.MarkFlagRequired("profile")
}

func (f *benchRunFlags) options() (bench.RunOptions, error) {
	size, err := bench.ParseSize(f.Size)
	if err != nil {
		return bench.RunOptions{}, err
	}
	if f.Repeat < 1 || f.Repeat > 100 {
		return bench.RunOptions{}, fmt.Errorf("--repeat %d: want 1 to 100", f.Repeat)
	}
	if f.Runtime < time.Second {
		return bench.RunOptions{}, fmt.Errorf("--runtime %v: want at least 1s", f.Runtime)
	}
	if _, err := bench.LookupProfile(f.Profile); err != nil {
		return bench.RunOptions{}, err
	}
	return bench.RunOptions{Mount: f.Mount, Profile: f.Profile, Repeat: f.Repeat, Size: size,
		Runtime: f.Runtime, Ramp: f.Ramp, AllowNonNFS: f.AllowNonNFS}, nil
}

func (f *benchRunFlags) runner(g *globals, streams IOStreams, deps benchDeps) *bench.Runner {
	return &bench.Runner{
		Root:          g.Root(),
		Exec:          deps.exec,
		FioBin:        f.Fio,
		Inventory:     deps.inventory(g),
		Progress:      streams.ErrOut,
		ProgressEvery: 15 * time.Second,
		DropCaches:    !f.NoDropCaches,
		Tool:          "nfstune " + version.String(),
		Logger:        g.Logger(streams.ErrOut),
	}
}

func newBenchRunCommand(g *globals, streams IOStreams, deps benchDeps) *cobra.Command {
	f := &benchRunFlags{}
	c := &cobra.Command{
		Use:   "run",
		Short: "Run a profile on a mount and record results with their tuning and provenance",
		Example: `  nfstune bench run --mount /mnt/data --profile seq-read --repeat 5 --out before.json
  nfstune bench run --mount /mnt/data --profile azure-files-random --size 4G -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, err := f.options()
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			res, err := f.runner(g, streams, deps).Run(c.Context(), opts)
			return finishBench(streams, res, err, f.Output, f.Out, bench.WriteRunTable)
		},
	}
	addBenchRunFlags(c, f)
	g.hostFlags(c)
	g.logFlags(c)
	addOutputFlag(c, &f.Output, printer.Formats, "")
	return c
}

// finishBench writes whatever result there is (a partial one after an interrupt) and
// then returns the run's error.
func finishBench(streams IOStreams, res *bench.Result, runErr error, output, out string, table func(io.Writer, *bench.Result) error) error {
	if res == nil {
		return benchError(runErr)
	}
	if out != "" {
		if err := writeJSONFile(out, res); err != nil {
			return errors.Join(benchError(runErr), err)
		}
	}
	var err error
	if output != OutputTable {
		err = writeStructured(streams.Out, output, res)
	} else {
		err = table(streams.Out, res)
	}
	return errors.Join(benchError(runErr), err)
}

func benchError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, bench.ErrNotNFS) {
		return &ExitError{Code: ExitError2, Err: err}
	}
	if errors.Is(err, context.Canceled) {
		return &ExitError{Code: ExitIssues, Err: fmt.Errorf("interrupted; partial results kept: %w", err)}
	}
	return fmt.Errorf("benchmarking: %w", err)
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing result: %w", err)
	}
	return nil
}

func newBenchProfilesCommand(streams IOStreams) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "profiles",
		Short: "List the built-in fio profiles",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return writeProfiles(streams.Out, output)
		},
	}
	addOutputFlag(c, &output, printer.Formats, "")
	return c
}

type profileView struct {
	Name               string   `json:"name"`
	Description        string   `json:"description"`
	Source             string   `json:"source"`
	ReadAheadSensitive bool     `json:"read_ahead_sensitive"`
	Jobs               []string `json:"jobs"`
}

func writeProfiles(w io.Writer, output string) error {
	var views []profileView
	for _, p := range bench.Profiles() {
		v := profileView{Name: p.Name, Description: p.Description, Source: p.Source, ReadAheadSensitive: p.ReadAheadSensitive}
		for _, j := range p.Jobs {
			v.Jobs = append(v.Jobs, j.Name)
		}
		views = append(views, v)
	}
	if output != OutputTable {
		return writeStructured(w, output, views)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tJOBS\tDESCRIPTION")
	for _, v := range views {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", v.Name, len(v.Jobs), v.Description)
	}
	return tw.Flush()
}

func newBenchCompareCommand(streams IOStreams) *cobra.Command {
	var output string
	var bound time.Duration
	c := &cobra.Command{
		Use:   "compare A.json B.json",
		Short: "Compare two results job by job: median change and whether the spreads overlap",
		Long: `compare prints, per job, the median of A and of B with their [min..max] over the repeats and
the change in percent. When the two ranges overlap the difference is not distinguishable from
run-to-run noise and "within noise" is printed instead of a percentage; with a single run on
either side the spread is unknown and the percentage is marked as such.

Two load curves (bench curve) are compared at their knees (the ops/s and p99 of the first
step past the knee) and by the ops/s each achieved with a p99 within --latency-bound; B is
better when it is better on one of them and not worse on the other. A curve measures each
load once, so differences under 10% are within noise.`,
		Example: `  nfstune bench compare before.json after.json
  nfstune bench compare curve-nconnect1.json curve-nconnect4.json --latency-bound 5ms`,
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			a, err := bench.ReadResult(args[0])
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			b, err := bench.ReadResult(args[1])
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			if a.Curve != nil || b.Curve != nil {
				return compareCurves(streams, output, a, b, bound)
			}
			cs := bench.Compare(a, b)
			if output != OutputTable {
				return writeStructured(streams.Out, output, cs)
			}
			return bench.WriteComparisonTable(streams.Out, cs)
		},
	}
	addOutputFlag(c, &output, printer.Formats, "")
	c.Flags().DurationVar(&bound, "latency-bound", bench.DefaultLatencyBound, "for load curves: the p99 at which to compare the ops/s each achieves, e.g. 5ms")
	return c
}

func compareCurves(streams IOStreams, output string, a, b *bench.Result, bound time.Duration) error {
	if bound <= 0 {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("--latency-bound %v: want a positive duration", bound)}
	}
	cc, err := bench.CompareCurves(a, b, float64(bound)/float64(time.Millisecond))
	if err != nil {
		return &ExitError{Code: ExitError2, Err: fmt.Errorf("comparing a load curve with another result: %w", err)}
	}
	if output != OutputTable {
		return writeStructured(streams.Out, output, cc)
	}
	return bench.WriteCurveComparisonTable(streams.Out, cc)
}

type benchCurveFlags struct {
	Mount        string
	Profile      string
	Rates        []int
	Runtime      time.Duration
	Ramp         time.Duration
	LatencyBound time.Duration
	Output       string
	Out          string
	AllowNonNFS  bool
	NoDropCaches bool
	Fio          string
}

func newBenchCurveCommand(g *globals, streams IOStreams, deps benchDeps) *cobra.Command {
	f := &benchCurveFlags{}
	c := &cobra.Command{
		Use:   "curve",
		Short: "Measure the load curve: achieved ops/s and p50/p99 latency on a rising load, up to the knee",
		Long: `curve runs an EDA-like mix of small-file operations, two processes each, all at once, at
each offered load of --rates in turn, with fio's rate_iops dividing the load over the
processes, and records per step the ops/s achieved and the p50 and p99 latency over every
operation. It stops after the first step past the knee: the p99 above --latency-bound, the
achieved ops/s under 90% of the offered load, or the achieved ops/s rising less than 5%
over the previous step.

--profile chooses the mix:
  eda-mix    creates, stats, 16 KiB reads and 16 KiB writes of small files (a working volume)
  eda-tools  stats and whole reads of 16 KiB files laid out before the first step, nothing
             written, the files' pages kept cached (a read-only tree of programs and
             libraries: the load nocto and actimeo=600 are for)

Run it once per tuning and compare the results with bench compare, or draw them with bench
report (one line per result, ops/s against latency).`,
		Example: `  nfstune bench curve --mount /mnt/scratch --out curve-nconnect1.json
  nfstune bench curve --mount /mnt/tools --profile eda-tools --out tools-nocto.json
  nfstune bench curve --mount /mnt/scratch --rates 500,1000,2000,4000,8000 --latency-bound 5ms -o json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts := bench.CurveOptions{Mount: f.Mount, Profile: f.Profile, Rates: f.Rates, Runtime: f.Runtime, Ramp: f.Ramp,
				LatencyBound: f.LatencyBound, AllowNonNFS: f.AllowNonNFS}
			run := benchRunFlags{Fio: f.Fio, NoDropCaches: f.NoDropCaches}
			res, err := run.runner(g, streams, deps).Curve(c.Context(), opts)
			if res == nil {
				if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, bench.ErrNotNFS) {
					return &ExitError{Code: ExitError2, Err: fmt.Errorf("curve: %w", err)}
				}
				return benchError(err)
			}
			return finishBench(streams, res, err, f.Output, f.Out, bench.WriteCurveTable)
		},
	}
	c.Flags().StringVar(&f.Mount, "mount", "", "directory on the NFS mount to measure (required)")
	c.Flags().StringVar(&f.Profile, "profile", bench.CurveProfile, "operation mix: "+strings.Join(bench.CurveProfiles, " or "))
	c.Flags().IntSliceVar(&f.Rates, "rates", bench.DefaultCurveRates, "offered loads in ops/s of all processes together, rising")
	c.Flags().DurationVar(&f.Runtime, "runtime", bench.DefaultCurveRuntime, "measured time of each step")
	c.Flags().DurationVar(&f.Ramp, "ramp", bench.DefaultRamp, "warm-up of each step, not counted")
	c.Flags().DurationVar(&f.LatencyBound, "latency-bound", bench.DefaultLatencyBound, "p99 latency past which a step is past the knee")
	c.Flags().StringVar(&f.Out, "out", "", "also write the JSON result to this file")
	c.Flags().BoolVar(&f.AllowNonNFS, "allow-non-nfs", false, "measure a directory that is not on NFS (a local baseline)")
	c.Flags().BoolVar(&f.NoDropCaches, "no-drop-caches", false, "do not write vm.drop_caches before each step (done only as root)")
	c.Flags().StringVar(&f.Fio, "fio", "fio", "fio program to run")
	_ = c.MarkFlagRequired("mount")
	g.hostFlags(c)
	g.logFlags(c)
	addOutputFlag(c, &f.Output, printer.Formats, "")
	return c
}

type benchSweepFlags struct {
	benchRunFlags
	ReadAhead   []int
	NConnect    []int
	RSize       []int
	Remount     bool
	Remountable []string
}

func newBenchSweepCommand(g *globals, streams IOStreams, deps benchDeps) *cobra.Command {
	f := &benchSweepFlags{}
	c := &cobra.Command{
		Use:   "sweep",
		Short: "Run a profile under several read-ahead and mount option values and pick the best per job",
		Long: `sweep runs the profile once per variant. read_ahead_kb is changed live through the mount's
bdi (files are reopened by every fio run, so each run sees the new value); the value found at
the start is written back at the end, also after an interrupt. Only a confirmed NFS mount's
read-ahead is changed: --readahead is refused on other file systems, even with --allow-non-nfs.

--nconnect and --rsize variants need --remount: nconnect belongs to the kernel's NFS client,
which every mount of the same server, version and transport shares, so each variant unmounts
every mount of that client group, waits until /proc/fs/nfsfs/servers no longer lists the
client, and mounts again with the variant. Every mount of the group must be named with
--remountable; the original options are mounted again at the end.

The result ends with the best variant per job, judged against the starting setting with the
run-to-run spread, and a policy rule that applies it.`,
		Example: `  nfstune bench sweep --mount /mnt/data --profile seq-read --readahead 128,1024,4096,15360 --repeat 5
  nfstune bench sweep --mount /mnt/data --profile azure-files-random --nconnect 1,4,8 \
      --remount --remountable /mnt/data --out sweep.json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			run, err := f.options()
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			opts := bench.SweepOptions{RunOptions: run, ReadAheadKB: f.ReadAhead, NConnect: f.NConnect, RSize: f.RSize,
				Remount: f.Remount, Remountable: f.Remountable}
			res, err := f.runner(g, streams, deps).Sweep(c.Context(), opts)
			if res == nil {
				if err != nil && !errors.Is(err, context.Canceled) {
					return &ExitError{Code: ExitError2, Err: fmt.Errorf("sweep: %w", err)}
				}
				return benchError(err)
			}
			if f.Out != "" {
				if werr := writeJSONFile(f.Out, res); werr != nil {
					return errors.Join(benchError(err), werr)
				}
			}
			var werr error
			if f.Output != OutputTable {
				werr = writeStructured(streams.Out, f.Output, res)
			} else {
				werr = bench.WriteSweepTable(streams.Out, res)
			}
			return errors.Join(benchError(err), werr)
		},
	}
	addBenchRunFlags(c, &f.benchRunFlags)
	g.hostFlags(c)
	g.logFlags(c)
	addOutputFlag(c, &f.Output, printer.Formats, "")
	c.Flags().IntSliceVar(&f.ReadAhead, "readahead", nil, "read_ahead_kb values to try, e.g. 128,1024,4096,15360")
	c.Flags().IntSliceVar(&f.NConnect, "nconnect", nil, "nconnect values to try (needs --remount)")
	c.Flags().IntSliceVar(&f.RSize, "rsize", nil, "rsize values in bytes to try (needs --remount)")
	c.Flags().BoolVar(&f.Remount, "remount", false, "allow unmounting and mounting the mount's client group for option variants")
	c.Flags().StringSliceVar(&f.Remountable, "remountable", nil, "mount points nfstune may unmount and mount again")
	return c
}

type benchReportFlags struct {
	Format    string
	Out       string
	ClientNIC string
	Limit     string
	// Service, Tier, Capacity and Access take the limit from the planner's model.
	Service, Tier, Capacity, Access string
}

// reportFormats are the formats of the report bench report writes into --out: Markdown or
// HTML, each with its SVG charts.
var reportFormats = []string{"md", "html"}

func newBenchReportCommand(streams IOStreams) *cobra.Command {
	f := &benchReportFlags{}
	c := &cobra.Command{
		Use:   "report A.json [B.json ...]",
		Short: "Write a Markdown or HTML report with throughput, IOPS and latency charts",
		Long: `report writes report.md (or report.html) and three SVG charts (throughput, IOPS, p99
latency) into --out, one bar per result file and sweep variant for each job, with the
run-to-run range as whiskers. With --client-nic, --limit (a throughput limit you know) or
--service and --capacity (the throughput nfstune plan's model gives that service tier at
that size) every throughput is also shown as a share of the limit; given several, the
lowest is used.`,
		Example: `  nfstune bench report before.json after.json --out report/ --client-nic 10Gbps
  nfstune bench report sweep.json -o html --out report/ --limit 200MiB/s
  nfstune bench report after.json --out report/ --service anf --tier premium --capacity 4TiB`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts := bench.ReportOptions{Format: f.Format}
			var err error
			opts.LimitMiBs, opts.LimitLabel, err = reportLimit(f)
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			if f.Out == "" {
				return &ExitError{Code: ExitError2, Err: errors.New("--out DIR is required")}
			}
			var inputs []bench.ReportInput
			seen := map[string]int{}
			for _, a := range args {
				res, err := bench.ReadResult(a)
				if err != nil {
					return &ExitError{Code: ExitError2, Err: err}
				}
				label := strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
				if seen[label]++; seen[label] > 1 {
					label = fmt.Sprintf("%s#%d", label, seen[label])
				}
				inputs = append(inputs, bench.ReportInput{Label: label, Result: res})
			}
			files, err := bench.WriteReport(f.Out, inputs, opts)
			if err != nil {
				return fmt.Errorf("writing report: %w", err)
			}
			for _, p := range files {
				fmt.Fprintln(streams.Out, p)
			}
			return nil
		},
	}
	addOutputFlag(c, &f.Format, reportFormats, "of the report written into --out")
	deprecatedAlias(c, "format", "output")
	c.Flags().StringVar(&f.Out, "out", "", "directory to write the report and charts into (required)")
	c.Flags().StringVar(&f.ClientNIC, "client-nic", "", "network bandwidth of the client, e.g. 10Gbps or 1250MB/s (as nfstune plan takes it)")
	deprecatedAlias(c, "nic-speed", "client-nic")
	c.Flags().StringVar(&f.Limit, "limit", "", "the service's throughput limit, e.g. 200MiB/s (see nfstune plan)")
	addServiceFlag(c, &f.Service, "take the limit from nfstune plan's model of this service (with --capacity)")
	c.Flags().StringVar(&f.Tier, "tier", "", "the service's tier, when it has more than one")
	c.Flags().StringVar(&f.Capacity, "capacity", "", "the provisioned capacity the service's limit is computed for, e.g. 4TiB")
	c.Flags().StringVar(&f.Access, "access", string(plan.Read), "read or write: the limit some services publish differs")
	return c
}

// reportLimit turns --client-nic, --limit and --service/--capacity into MiB/s and a label;
// with several, the lowest is the limit.
func reportLimit(f *benchReportFlags) (float64, string, error) {
	var mibs float64
	var label string
	lower := func(v float64, l string) {
		if mibs == 0 || v < mibs {
			mibs, label = v, l
		}
	}
	if f.ClientNIC != "" {
		r, err := plan.ParseRate(f.ClientNIC)
		if err != nil {
			return 0, "", fmt.Errorf("--client-nic: %w", err)
		}
		lower(r.MiBps(), fmt.Sprintf("the NIC (%s = %s MiB/s)", f.ClientNIC, strconv.FormatFloat(r.MiBps(), 'f', 1, 64)))
	}
	if f.Limit != "" {
		r, err := plan.ParseRate(f.Limit)
		if err != nil {
			return 0, "", fmt.Errorf("--limit: %w", err)
		}
		lower(r.MiBps(), fmt.Sprintf("the service limit (%s = %s MiB/s)", f.Limit, strconv.FormatFloat(r.MiBps(), 'f', 1, 64)))
	}
	if f.Service != "" || f.Tier != "" || f.Capacity != "" {
		v, l, err := serviceLimit(f.Service, f.Tier, f.Capacity, f.Access)
		if err != nil {
			return 0, "", err
		}
		lower(v, l)
	}
	return mibs, label, nil
}

// serviceLimit is the throughput nfstune plan's model gives one tier of a service at a
// provisioned capacity.
func serviceLimit(service, tier, capacity, access string) (float64, string, error) {
	if service == "" || capacity == "" {
		return 0, "", errors.New("--service and --capacity go together (and --tier with them)")
	}
	size, err := plan.ParseSize(capacity)
	if err != nil {
		return 0, "", fmt.Errorf("--capacity: %w", err)
	}
	cat, err := plan.LoadCatalog()
	if err != nil {
		return 0, "", err
	}
	o, err := plan.TierAt(cat, service, tier, size, plan.Access(access))
	if err != nil {
		return 0, "", fmt.Errorf("--service %s at %s: %w", service, capacity, err)
	}
	return o.MiBps, fmt.Sprintf("the service (%s %s at %s: %s MiB/s in nfstune plan's model)",
		o.Service, o.Tier, capacity, strconv.FormatFloat(o.MiBps, 'f', 1, 64)), nil
}
