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
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/nfstune/nfstune/internal/bench"
)

// fleetStartLate is how far past its common start a pod may begin a step: a pod later
// than that would measure its step against fewer neighbours than the report assumes.
const fleetStartLate = 2 * time.Second

type benchCurvePodFlags struct {
	Mounts       []string
	Profile      string
	Volumes      []string
	Dir          string
	Job          string
	Index        int
	Node         string
	StartFile    string
	StartTimeout time.Duration
	StepPeriod   time.Duration
	Rates        []int
	Runtime      time.Duration
	Ramp         time.Duration
	Fio          string
	AllowNonNFS  bool
}

// newBenchCurvePodCommand is the pod side of kubectl nfstune bench: one pod's load curve
// in <mount>/<dir>/<job>-<index>, each step at the common start the command writes into
// the start file (a ConfigMap the pod mounts), one JSON line per event on stdout.
func newBenchCurvePodCommand(g *globals, streams IOStreams, deps benchDeps) *cobra.Command {
	f := &benchCurvePodFlags{}
	c := &cobra.Command{
		Use:    "curve-pod",
		Short:  "One pod's share of kubectl nfstune bench: the load curve at common start times",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts, line, err := f.options()
			if err != nil {
				return &ExitError{Code: ExitError2, Err: err}
			}
			p := &fleetPod{out: streams.Out, line: line, startFile: f.StartFile, startTimeout: f.StartTimeout, period: f.StepPeriod}
			opts.Pace = p.pace
			opts.OnStep = p.step
			run := benchRunFlags{Fio: f.Fio, NoDropCaches: true}
			_, err = run.runner(g, streams, deps).Curve(c.Context(), opts)
			if err != nil {
				p.write(bench.FleetLine{Event: bench.FleetError, Error: err.Error()})
				return benchError(err)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringSliceVar(&f.Mounts, "mounts", nil, "where the volumes are mounted; the pod uses the one of its index, round-robin (required)")
	fl.StringSliceVar(&f.Volumes, "volumes", nil, "the volumes' names for the report, in the order of --mounts")
	fl.StringVar(&f.Dir, "dir", "", "subdirectory of the volume to work in (required)")
	fl.StringVar(&f.Job, "job", "", "the Job's name; the pod's directory is <dir>/<job>-<index> (required)")
	fl.IntVar(&f.Index, "index", -1, "the pod's completion index (default $JOB_COMPLETION_INDEX)")
	fl.StringVar(&f.Node, "node", os.Getenv("NODE_NAME"), "the node's name for the report")
	fl.StringVar(&f.StartFile, "start-file", "", "file that holds the first step's start time, RFC 3339 (required)")
	fl.DurationVar(&f.StartTimeout, "start-timeout", 15*time.Minute, "how long to wait for the start time")
	fl.DurationVar(&f.StepPeriod, "step-period", 0, "time from one step's start to the next's (required)")
	fl.StringVar(&f.Profile, "profile", bench.CurveProfile, "operation mix: "+strings.Join(bench.CurveProfiles, " or "))
	fl.IntSliceVar(&f.Rates, "rates", bench.DefaultCurveRates, "offered loads of this pod in ops/s, rising")
	fl.DurationVar(&f.Runtime, "runtime", bench.DefaultCurveRuntime, "measured time of each step")
	fl.DurationVar(&f.Ramp, "ramp", bench.DefaultRamp, "warm-up of each step, not counted")
	fl.StringVar(&f.Fio, "fio", "fio", "fio program to run")
	fl.BoolVar(&f.AllowNonNFS, "allow-non-nfs", false, "run on a directory that is not on NFS")
	g.hostFlags(c)
	g.logFlags(c)
	return c
}

func (f *benchCurvePodFlags) options() (bench.CurveOptions, bench.FleetLine, error) {
	idx := f.Index
	if idx < 0 {
		v, err := strconv.Atoi(os.Getenv("JOB_COMPLETION_INDEX"))
		if err != nil {
			return bench.CurveOptions{}, bench.FleetLine{}, errors.New("--index or $JOB_COMPLETION_INDEX: want the pod's completion index")
		}
		idx = v
	}
	var errs []error
	if len(f.Mounts) == 0 {
		errs = append(errs, errors.New("--mounts: want at least one"))
	}
	if len(f.Volumes) != 0 && len(f.Volumes) != len(f.Mounts) {
		errs = append(errs, errors.New("--volumes: want one name per --mounts entry"))
	}
	if err := checkSubdir(f.Dir); err != nil {
		errs = append(errs, err)
	}
	if f.StartFile == "" || f.StepPeriod <= f.Runtime+f.Ramp {
		errs = append(errs, errors.New("--start-file and a --step-period longer than --runtime plus --ramp are required"))
	}
	name := f.Job + "-" + strconv.Itoa(idx)
	if err := bench.CheckDirName(name); f.Job == "" || err != nil {
		errs = append(errs, fmt.Errorf("--job %q: want the Job's name", f.Job))
	}
	if err := errors.Join(errs...); err != nil {
		return bench.CurveOptions{}, bench.FleetLine{}, err
	}
	k := idx % len(f.Mounts)
	line := bench.FleetLine{Index: idx, Node: f.Node, Dir: filepath.Join(f.Dir, name)}
	if len(f.Volumes) > 0 {
		line.Volume = f.Volumes[k]
	}
	opts := bench.CurveOptions{Mount: filepath.Join(f.Mounts[k], f.Dir), Profile: f.Profile, Rates: f.Rates, Runtime: f.Runtime, Ramp: f.Ramp,
		AllowNonNFS: f.AllowNonNFS, DirName: name, AllSteps: true}
	return opts, line, nil
}

// checkSubdir accepts a relative path below a volume's root, not the root itself: the
// pods' directories go below a directory the user chose for them.
func checkSubdir(dir string) error {
	clean := filepath.Clean(dir)
	if dir == "" || filepath.IsAbs(dir) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("--dir %q: want a subdirectory of the volume, relative to its root", dir)
	}
	return nil
}

// fleetPod paces one pod's curve and writes its lines.
type fleetPod struct {
	out          io.Writer
	line         bench.FleetLine
	startFile    string
	startTimeout time.Duration
	period       time.Duration
	sched        bench.FleetSchedule
	mu           sync.Mutex
}

func (p *fleetPod) write(l bench.FleetLine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.Index, l.Node, l.Volume, l.Dir = p.line.Index, p.line.Node, p.line.Volume, p.line.Dir
	b, _ := json.Marshal(l)
	fmt.Fprintf(p.out, "%s\n", b)
}

// pace announces the pod ready before the first step and waits for the start file, then
// waits for each step's start; a step whose start has passed by more than fleetStartLate
// fails the pod rather than run out of step with the others.
func (p *fleetPod) pace(ctx context.Context, step int) error {
	if step == 0 {
		p.write(bench.FleetLine{Event: bench.FleetReady})
		start, err := waitStartFile(ctx, p.startFile, p.startTimeout)
		if err != nil {
			return err
		}
		p.sched = bench.FleetSchedule{Start: start, Period: p.period}
	}
	at := p.sched.StepStart(step)
	wait := time.Until(at)
	if wait < -fleetStartLate {
		return fmt.Errorf("its start %s passed %s ago: the command's --start-delay or --step-gap is too short",
			at.UTC().Format(time.RFC3339), (-wait).Round(time.Second))
	}
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (p *fleetPod) step(i int, run bench.Run, s bench.CurveStep) {
	p.write(bench.FleetLine{Event: bench.FleetStep, Step: i + 1, Result: &s, Tuning: run.Tuning, Started: run.Started})
}

// waitStartFile polls path, a file of a ConfigMap volume that kubelet rewrites when the
// ConfigMap changes, until it holds a time.
func waitStartFile(ctx context.Context, path string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				t, err := time.Parse(time.RFC3339Nano, s)
				if err != nil {
					return time.Time{}, fmt.Errorf("start file %s: %w", path, err)
				}
				return t, nil
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return time.Time{}, fmt.Errorf("start file: %w", err)
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no start time in %s within %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
