package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nfstune/nfstune/internal/display"
)

// The load curve: operations per second against response time on a load that rises until
// the response time gives out, as EDA users judge a file service (throughput against
// response time over rising load points, the way SPEC SFS reports it).
//
// The load rises through fio's rate_iops, not through the number of jobs. Every step runs
// the same processes (curveClones of each operation) over the same files, and only the
// rate each is allowed to issue changes. Raising the job count instead would make every
// step a closed loop that issues as fast as it can: the first step would already saturate
// the mount, the offered load would be unknown, and the working set would grow with the
// load (the flaw that had SPEC SFS 2.0 withdrawn,
// http://www.spec.org/sfs97/sfs97_defects.html). With a fixed rate per job the offered
// load of each step is known, and a step whose jobs cannot keep it up is itself the sign
// that the response time now limits the throughput: a job with iodepth 1 issues its next
// operation only when the last one has completed.

// The curve's operation mixes (CurveOptions.Profile), by the names its results carry.
const (
	// CurveProfile is the EDA mix of a working volume: creates, stats, small reads and
	// small writes, the default.
	CurveProfile = "eda-mix"
	// CurveToolsProfile is a read-only tree, as an EDA /tools volume of programs and
	// libraries: stats and whole reads of small files laid out before the first step,
	// nothing written. It is the load the seed's options for static datasets (nocto,
	// actimeo=600) are for: with close-to-open every open asks the server for the file's
	// attributes, without it an open of an unchanged file sends nothing.
	CurveToolsProfile = "eda-tools"
)

// CurveProfiles are the mixes bench curve offers, the default first.
var CurveProfiles = []string{CurveProfile, CurveToolsProfile}

// CheckCurveProfile returns an error naming the mixes when profile is not one of them.
func CheckCurveProfile(profile string) error {
	if !slices.Contains(CurveProfiles, profile) {
		return fmt.Errorf("--profile %q: want one of %s", profile, strings.Join(CurveProfiles, ", "))
	}
	return nil
}

const (
	// curveClones is the number of processes per operation (fio numjobs): 8 in all for
	// the EDA mix, a fixed concurrency like a fixed set of tool processes on one client.
	curveClones = 2
	// curveFiles is the number of 16 KiB files each stat, read and write process cycles
	// through; one file at a time is open, so every read and write reopens a file.
	curveFiles = 200
	// createSlack is how many more files a create process is given than its rate times
	// the step's duration, so that it does not run out before the other operations.
	createSlack = 1.25
	// maxCreateFiles bounds the file names fio keeps per create process.
	maxCreateFiles = 200000
)

// curveJobs are the sections of every step's fio command of a mix, all run together and
// all time based. Each reads or writes 16 KiB files (the EDA front-end's files, see
// smallFileBytes). The profile is one of CurveProfiles.
func curveJobs(profile string) []Job {
	common := func(name, engine, rw string, extra ...string) Job {
		return Job{
			Name: name, Engine: engine, RW: rw, BS: "16k", IODepth: 1, NumJobs: curveClones, NrFiles: curveFiles,
			FileBytes: smallFileBytes, FilenameFormat: name + ".$jobnum.$filenum", TimeBased: true,
			Extra: append([]string{"openfiles=1"}, extra...),
		}
	}
	if profile == CurveToolsProfile {
		return []Job{
			common("tools-stat", "filestat", "read", "stat_type=stat"),
			// invalidate=0 keeps a file's cached pages across its opens, as a program's
			// pages stay cached between runs: whether an open still costs the server a
			// request is then the mount's cache coherence alone (fio drops them at every
			// open by default).
			common("tools-read-16k", "psync", "read", "invalidate=0"),
		}
	}
	return []Job{
		// The create section gets new file names at every step (createJob).
		common("eda-create", "filecreate", "write"),
		common("eda-stat", "filestat", "read", "stat_type=stat"),
		// invalidate=1 drops a file's cached pages when it is opened, so that a read
		// goes to the server and not to the page cache after the first pass.
		common("eda-read-16k", "psync", "read", "invalidate=1"),
		// Closing an NFS file writes its dirty pages back (close-to-open), so every
		// file switch sends the write to the server.
		common("eda-write-16k", "psync", "write"),
	}
}

// DefaultCurveRates are the offered loads in operations per second of all processes
// together: doubling from a load any mount carries to one few carry.
var DefaultCurveRates = []int{250, 500, 1000, 2000, 4000, 8000, 16000}

// DefaultLatencyBound is the 99th percentile response time beyond which a step counts as
// past the knee: 50 ms, the response time at which SPEC SFS 1.1 capped the capacity it
// reported (http://open.spec.org/sfs93/doc/RPT_RULES.txt).
const DefaultLatencyBound = 50 * time.Millisecond

// DefaultCurveRuntime is the measured time of each step.
const DefaultCurveRuntime = 20 * time.Second

// CurveOptions are what bench curve asks for.
type CurveOptions struct {
	// Mount is a directory on the mount to measure.
	Mount string
	// Profile is the operation mix, one of CurveProfiles; empty for CurveProfile.
	Profile string
	// Rates are the offered loads of the steps in operations per second, ascending.
	Rates []int
	// Runtime and Ramp are each step's measured time and warm-up.
	Runtime time.Duration
	Ramp    time.Duration
	// LatencyBound ends the curve at the first step whose p99 exceeds it.
	LatencyBound time.Duration
	AllowNonNFS  bool
	// DirName names the directory the curve works in below Mount (RunOptions.DirName).
	DirName string
	// Pace, when set, is called before each step (from 0), after the files are laid out:
	// a pod of a fleet curve waits there for the step's common start.
	Pace func(ctx context.Context, step int) error
	// OnStep, when set, receives each step as soon as it is measured.
	OnStep func(step int, run Run, s CurveStep)
	// AllSteps runs every rate, past the knee too: a fleet curve's knee is judged on the
	// pods' totals, not on one pod's share.
	AllSteps bool
}

// Curve is the load curve of a result: one step per offered load, up to the knee.
type Curve struct {
	// LatencyBoundms is the bound the knee rule applied.
	LatencyBoundms float64     `json:"latency_bound_ms"`
	Steps          []CurveStep `json:"steps"`
	// Knee is the first step past the knee; nil when every step kept up.
	Knee *Knee `json:"knee,omitempty"`
}

// CurveStep is one load point.
type CurveStep struct {
	// OfferedIOPS is the operations per second the step's rate limits allow in all.
	OfferedIOPS float64 `json:"offered_ops_s"`
	// IOPS is the operations per second achieved: files created and stat'ed, reads and
	// writes.
	IOPS float64 `json:"ops_s"`
	// P50ms and P99ms are over every operation of the step (fio's lat_ns, or clat_ns
	// where fio records no total latency, as for the metadata engines).
	P50ms float64 `json:"lat_p50_ms"`
	P99ms float64 `json:"lat_p99_ms"`
}

// KneeRule names why a step is past the knee.
type KneeRule string

// The knee rules; kneeRule checks them in this order.
const (
	KneeLatencyBound KneeRule = "p99 above the latency bound"
	KneeFellBehind   KneeRule = "achieved ops/s fell behind the offered load"
	KneeFlat         KneeRule = "achieved ops/s stopped rising"
)

const (
	// kneeKeepUp is the share of the offered load a step must achieve. Rate limiting is
	// not exact at low rates and the processes start a little apart, so a step is not
	// judged behind for a few percent.
	kneeKeepUp = 0.90
	// kneeMinGain is the least rise of achieved ops/s over the previous step that counts
	// as rising, when the offered load rose.
	kneeMinGain = 0.05
)

// Knee is the first step past the knee of a curve, with the rule that found it.
type Knee struct {
	// Step is the step's index in Curve.Steps, from 0.
	Step int      `json:"step"`
	Rule KneeRule `json:"rule"`
	CurveStep
}

// kneeRule reports which rule, if any, puts step i of steps past the knee. The response
// time is checked first, against the bound a user can live with; then whether the mount
// kept up with the offered load (with iodepth 1 a process falls behind its rate only when
// its operations take longer than the interval between them); then whether more offered
// load brought more work done at all.
func kneeRule(steps []CurveStep, i int, boundms float64) (KneeRule, bool) {
	s := steps[i]
	switch {
	case boundms > 0 && s.P99ms > boundms:
		return KneeLatencyBound, true
	case s.IOPS < kneeKeepUp*s.OfferedIOPS:
		return KneeFellBehind, true
	case i > 0 && s.OfferedIOPS > steps[i-1].OfferedIOPS && s.IOPS < (1+kneeMinGain)*steps[i-1].IOPS:
		return KneeFlat, true
	}
	return "", false
}

// FindKnee returns the first step past the knee, or nil.
func FindKnee(steps []CurveStep, boundms float64) *Knee {
	for i := range steps {
		if rule, ok := kneeRule(steps, i, boundms); ok {
			return &Knee{Step: i, Rule: rule, CurveStep: steps[i]}
		}
	}
	return nil
}

func (o *CurveOptions) validate() error {
	var errs []error
	if err := CheckCurveProfile(o.Profile); err != nil {
		errs = append(errs, err)
	}
	if len(o.Rates) < 2 {
		errs = append(errs, errors.New("--rates: want at least two offered loads"))
	}
	clones := len(curveJobs(o.Profile)) * curveClones
	for i, r := range o.Rates {
		if r < clones {
			errs = append(errs, fmt.Errorf("--rates %d: want at least %d ops/s (one per process)", r, clones))
		}
		if i > 0 && r <= o.Rates[i-1] {
			errs = append(errs, fmt.Errorf("--rates: %d after %d, want a rising load", r, o.Rates[i-1]))
		}
	}
	if o.Runtime < time.Second {
		errs = append(errs, fmt.Errorf("--runtime %v: want at least 1s", o.Runtime))
	}
	if o.LatencyBound < 0 {
		errs = append(errs, fmt.Errorf("--latency-bound %v: want a positive duration", o.LatencyBound))
	}
	return errors.Join(errs...)
}

// curveStepArgs is the fio command line of one step at an offered load of rate
// operations per second, shared evenly by every process; it returns the offered load
// those whole per-process rates give.
func curveStepArgs(p Params, profile string, step, rate int) ([]string, float64) {
	jobs := curveJobs(profile)
	clones := len(jobs) * curveClones
	perClone := max(rate/clones, 1)
	args := []string{"--output-format=json", "--eta=never"}
	for _, j := range jobs {
		if j.Engine == "filecreate" {
			j = createJob(j, p, step, perClone)
		}
		// A section of its own per operation: with group_reporting alone fio would fold
		// every section into one entry, and the metadata engines count their operations
		// differently from the data engines (fio.Summarize).
		args = append(args, j.section(p)...)
		args = append(args, "--new_group", "--rate_iops="+strconv.Itoa(perClone))
	}
	return args, float64(perClone * clones)
}

// createJob gives the create section new file names at every step, and enough of them
// for its rate over the whole step: fio's filecreate opens an existing file without
// creating it.
func createJob(j Job, p Params, step, perClone int) Job {
	secs := (p.Runtime + p.Ramp).Seconds()
	j.NrFiles = min(int(math.Ceil(float64(perClone)*secs*createSlack)), maxCreateFiles)
	j.FilenameFormat = fmt.Sprintf("%s.%d.$jobnum.$filenum", j.Name, step)
	return j
}

// curveLayoutArgs lays out the files the stat, read and write sections use, before the
// first measured step.
func curveLayoutArgs(p Params, profile string) []string {
	args := []string{"--output-format=json", "--eta=never", "--create_only=1"}
	for _, j := range curveJobs(profile) {
		if j.Engine != "filecreate" {
			args = append(args, j.section(p)...)
		}
	}
	return args
}

// Curve measures the load curve of the mount: one fio run per offered load, in order,
// stopping after the first step past the knee. The result's runs are the steps (variant
// "offered=N/s"), and its Curve the steps' figures and the knee. On cancellation the steps
// so far are returned with the error.
func (r *Runner) Curve(ctx context.Context, opts CurveOptions) (*Result, error) {
	if opts.Profile == "" {
		opts.Profile = CurveProfile
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	prof := Profile{Name: opts.Profile, Jobs: curveJobs(opts.Profile)}
	run := RunOptions{Mount: opts.Mount, Profile: opts.Profile, Repeat: 1, Size: smallFileBytes,
		Runtime: opts.Runtime, Ramp: opts.Ramp, AllowNonNFS: opts.AllowNonNFS, DirName: opts.DirName}
	s, err := r.open(ctx, run, prof, len(opts.Rates))
	if err != nil {
		return nil, err
	}
	est := s.params.Runtime + s.params.Ramp
	s.prog = newProgress(r.Progress, r.ProgressEvery, r.now, len(opts.Rates), est*time.Duration(len(opts.Rates)))
	curve := &Curve{LatencyBoundms: float64(opts.LatencyBound) / float64(time.Millisecond)}
	s.result.Curve = curve
	runErr := s.curve(ctx, opts, curve)
	return s.close(ctx, runErr)
}

func (s *session) curve(ctx context.Context, opts CurveOptions, c *Curve) error {
	layout := curveLayoutArgs(s.params, opts.Profile)
	if _, err := s.r.Exec(ctx, s.r.fioBin(), layout...); err != nil {
		return fmt.Errorf("laying out files: %w", err)
	}
	for i, rate := range opts.Rates {
		if err := ctx.Err(); err != nil {
			return err
		}
		if opts.Pace != nil {
			if err := opts.Pace(ctx, i); err != nil {
				return fmt.Errorf("step %d: %w", i+1, err)
			}
		}
		run, step, err := s.curveStep(ctx, opts.Profile, i, rate)
		if err != nil {
			return fmt.Errorf("step %d (%d ops/s offered): %w", i+1, rate, err)
		}
		s.result.Runs = append(s.result.Runs, run)
		c.Steps = append(c.Steps, step)
		if opts.OnStep != nil {
			opts.OnStep(i, run, step)
		}
		if c.Knee = FindKnee(c.Steps, c.LatencyBoundms); c.Knee != nil && !opts.AllSteps {
			return nil
		}
	}
	return nil
}

func (s *session) curveStep(ctx context.Context, profile string, i, rate int) (Run, CurveStep, error) {
	args, offered := curveStepArgs(s.params, profile, i+1, rate)
	variant := fmt.Sprintf("offered=%s/s", strconv.FormatFloat(offered, 'f', -1, 64))
	s.prog.begin(profile+" ["+variant+"]", 1, 1, s.params.Runtime+s.params.Ramp)
	defer s.prog.end()

	dropped := s.dropCaches()
	inv, before := s.snapshot()
	run := Run{
		Profile:      profile,
		Job:          profile,
		Variant:      variant,
		Repeat:       1,
		CacheDropped: dropped,
		Command:      append([]string{s.r.fioBin()}, args...),
		Tuning:       s.tuning(inv),
		Started:      s.r.now(),
	}
	out, err := s.r.Exec(ctx, run.Command[0], run.Command[1:]...)
	run.ElapsedS = s.r.now().Sub(run.Started).Seconds()
	if err != nil {
		return run, CurveStep{}, err
	}
	sum, err := recordFio(&run, out)
	if err != nil {
		return run, CurveStep{}, err
	}
	// The step's response time is over every operation of the mix, not the busiest
	// direction's alone.
	run.LatP50ms = round(sum.AllP50NS/1e6, 4)
	run.LatP99ms = round(sum.AllP99NS/1e6, 4)
	if _, after := s.snapshot(); before != nil {
		run.Mountstats = DiffStats(before, after)
	}
	step := CurveStep{OfferedIOPS: offered, IOPS: round(run.ReadIOPS+run.WriteIOPS, 1), P50ms: run.LatP50ms, P99ms: run.LatP99ms}
	return run, step, nil
}

// WriteCurveTable prints the tuning line, one row per step, and the knee.
func WriteCurveTable(w io.Writer, res *Result) error {
	if t := res.Tuning; t != nil {
		fmt.Fprintf(w, "%s\n\n", display.Text(t.Describe()))
	}
	c := res.Curve
	if c == nil {
		return errors.New("result has no load curve")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tOFFERED OPS/S\tACHIEVED OPS/S\tP50 ms\tP99 ms\t")
	for i, s := range c.Steps {
		mark := ""
		if c.Knee != nil && c.Knee.Step == i {
			mark = "knee: " + string(c.Knee.Rule)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, formatNum(s.OfferedIOPS), formatNum(s.IOPS), formatNum(s.P50ms), formatNum(s.P99ms), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	p := res.Provenance
	_, err := fmt.Fprintf(w, "\n%s\nprofile %s, %s, kernel %s; latency bound %s ms\n", kneeSentence(c),
		display.Text(p.Profile), display.Text(p.FioVersion), display.Text(p.Kernel), formatNum(c.LatencyBoundms))
	return err
}

func kneeSentence(c *Curve) string {
	if c.Knee == nil {
		if len(c.Steps) == 0 {
			return "no steps"
		}
		last := c.Steps[len(c.Steps)-1]
		return fmt.Sprintf("no knee: every step kept up, up to %s ops/s at p99 %s ms; offer more load with --rates",
			formatNum(last.IOPS), formatNum(last.P99ms))
	}
	k := c.Knee
	s := fmt.Sprintf("knee at step %d: %s ops/s at p99 %s ms (%s)", k.Step+1, formatNum(k.IOPS), formatNum(k.P99ms), k.Rule)
	if k.Step == 0 {
		// Nothing below the knee was measured: the curve has no shape yet.
		s += "; the lightest load is already past it: start --rates lower"
	}
	return s
}

// AtBound is the most operations per second a curve achieved at a p99 within boundms:
// the highest measured step within the bound, or 0 when none was.
func (c *Curve) AtBound(boundms float64) float64 {
	var best float64
	for _, s := range c.Steps {
		if s.P99ms <= boundms {
			best = math.Max(best, s.IOPS)
		}
	}
	return best
}

// MaxIOPS is the most operations per second any step achieved.
func (c *Curve) MaxIOPS() float64 {
	var best float64
	for _, s := range c.Steps {
		best = math.Max(best, s.IOPS)
	}
	return best
}

// curveMargin is the least relative difference between two curves that counts as one.
// A curve measures each load once, so there is no run-to-run spread to judge noise by;
// differences below a tenth are reported as within noise.
const curveMargin = 0.10

// VerdictNoKnee is a knee comparison where a side reached no knee and its highest load
// does not settle which is better.
const VerdictNoKnee = "no knee to compare"

// CurveSide is one curve's figures in a comparison.
type CurveSide struct {
	Knee *Knee `json:"knee,omitempty"`
	// MaxIOPS is the highest achieved ops/s of any step.
	MaxIOPS float64 `json:"max_ops_s"`
	// AtBoundIOPS is the highest achieved ops/s of a step whose p99 is within the bound.
	AtBoundIOPS float64 `json:"ops_s_at_bound"`
}

// CurveVerdict is B against A on one figure.
type CurveVerdict struct {
	// ChangePct is B's change from A in percent; nil when A's figure is 0 or unknown.
	ChangePct *float64 `json:"change_pct,omitempty"`
	Verdict   string   `json:"verdict"`
}

// CurveComparison compares two load curves at their knees and at a latency bound.
type CurveComparison struct {
	LatencyBoundms float64      `json:"latency_bound_ms"`
	A              CurveSide    `json:"a"`
	B              CurveSide    `json:"b"`
	Knee           CurveVerdict `json:"knee"`
	AtBound        CurveVerdict `json:"at_bound"`
	// Summary says which is better.
	Summary string `json:"summary"`
}

// ErrNoCurve is returned when a comparison of curves is given a result without one.
var ErrNoCurve = errors.New("not a load curve result (bench curve)")

// CompareCurves compares b's load curve against a's: the ops/s at each knee, and the
// ops/s each achieves with a p99 within boundms.
func CompareCurves(a, b *Result, boundms float64) (*CurveComparison, error) {
	if a.Curve == nil || b.Curve == nil {
		return nil, ErrNoCurve
	}
	side := func(c *Curve) CurveSide {
		return CurveSide{Knee: c.Knee, MaxIOPS: c.MaxIOPS(), AtBoundIOPS: c.AtBound(boundms)}
	}
	cc := &CurveComparison{LatencyBoundms: boundms, A: side(a.Curve), B: side(b.Curve)}
	cc.Knee = compareKnees(cc.A, cc.B)
	cc.AtBound = judgeHigher(cc.A.AtBoundIOPS, cc.B.AtBoundIOPS)
	cc.Summary = curveSummary(cc.Knee.Verdict, cc.AtBound.Verdict)
	return cc, nil
}

// compareKnees judges B's knee against A's. A curve without a knee kept up with every
// load it was offered, so its knee lies beyond its highest step: it is better only if that
// step is already beyond the other's knee by the margin.
func compareKnees(a, b CurveSide) CurveVerdict {
	switch {
	case a.Knee != nil && b.Knee != nil:
		return judgeHigher(a.Knee.IOPS, b.Knee.IOPS)
	case a.Knee == nil && b.Knee == nil:
		return CurveVerdict{Verdict: VerdictNoKnee}
	case a.Knee == nil && a.MaxIOPS > (1+curveMargin)*b.Knee.IOPS:
		return CurveVerdict{Verdict: VerdictWorse}
	case b.Knee == nil && b.MaxIOPS > (1+curveMargin)*a.Knee.IOPS:
		return CurveVerdict{Verdict: VerdictBetter}
	}
	return CurveVerdict{Verdict: VerdictNoKnee}
}

// judgeHigher judges b against a where more is better.
func judgeHigher(a, b float64) CurveVerdict {
	var v CurveVerdict
	if a > 0 {
		pct := round((b-a)/a*100, 1)
		v.ChangePct = &pct
	}
	switch {
	case a == b || (a > 0 && math.Abs(b-a) < curveMargin*a):
		v.Verdict = VerdictNoise
	case b > a:
		v.Verdict = VerdictBetter
	default:
		v.Verdict = VerdictWorse
	}
	return v
}

// curveSummary is the one-line answer: B is better when it is better on one figure and
// not worse on the other.
func curveSummary(knee, atBound string) string {
	vs := []string{knee, atBound}
	better, worse := slices.Contains(vs, VerdictBetter), slices.Contains(vs, VerdictWorse)
	switch {
	case better && worse:
		return "mixed: each is better on one figure"
	case better:
		return "B is better"
	case worse:
		return "A is better"
	}
	return "no difference beyond the margin"
}

// WriteCurveComparisonTable prints a comparison of two curves.
func WriteCurveComparisonTable(w io.Writer, cc *CurveComparison) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tA\tB\tCHANGE")
	knee := func(s CurveSide) string {
		if s.Knee == nil {
			return "none up to " + formatNum(s.MaxIOPS) + " ops/s"
		}
		return fmt.Sprintf("%s ops/s at p99 %s ms", formatNum(s.Knee.IOPS), formatNum(s.Knee.P99ms))
	}
	fmt.Fprintf(tw, "knee\t%s\t%s\t%s\n", knee(cc.A), knee(cc.B), cc.Knee.change())
	fmt.Fprintf(tw, "ops/s at p99 <= %s ms\t%s\t%s\t%s\n", formatNum(cc.LatencyBoundms),
		formatNum(cc.A.AtBoundIOPS), formatNum(cc.B.AtBoundIOPS), cc.AtBound.change())
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s (differences under %d%% are within noise: one run per load)\n", cc.Summary, int(curveMargin*100))
	return err
}

func (v CurveVerdict) change() string {
	if v.ChangePct == nil || (v.Verdict != VerdictBetter && v.Verdict != VerdictWorse) {
		return v.Verdict
	}
	return fmt.Sprintf("%+.1f%% (%s)", *v.ChangePct, v.Verdict)
}
