package readahead

import (
	"fmt"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// The adaptive controller's thresholds (docs/agent.md, Adaptive read-ahead).
const (
	// ShrinkOverRead is the over-read above which the controller halves the window: close
	// to a third of the fetched bytes unused (WastefulOverRead's 1.5 is the audit's, over
	// much more traffic; an interval of a few seconds acts on less, and sooner).
	ShrinkOverRead = 1.3
	// GrowOverRead is the over-read at or below which a streaming mount may grow. The
	// gap up to ShrinkOverRead is the hysteresis: a window that grows until it starts
	// to waste stops in the gap instead of going back and forth.
	GrowOverRead = 1.1
	// StreamingREADs is the share of the largest READ read-ahead can make (one rsize, or
	// the window when it is smaller) that the average READ must reach for the traffic to
	// count as read-ahead's: sequential readers' READs are whole rsizes, random 16 KiB
	// reads are 16 KiB READs that no window changes.
	StreamingREADs = 0.5
	// MinStepBytes is the application read bytes an interval needs before the controller
	// acts on it: below, the mount is idle or nearly so and its read-ahead is held.
	MinStepBytes = 16 << 20
	// MinStepMajorFaults is the major faults an interval needs before the controller lowers
	// the window for faults that mostly miss the page cache (FaultEvidence.MissesAtRandom)
	// although they fetch little more than they map: a program started from the mount faults
	// in tens of pages of its text and data once, and finds them in the cache after, while a
	// reader of a mapped file at random keeps missing.
	MinStepMajorFaults = 32
	// MinStepReads is the READs an interval needs before its average READ counts: 16 MiB
	// of reads at the largest rsize (1 MiB).
	MinStepReads = 16
	// HoldIntervals is how many intervals a learned limit holds at first; each limit learned
	// again in the same direction doubles it, up to MaxHoldDoublings times.
	HoldIntervals    = 12
	MaxHoldDoublings = 5
	// ProbeAfter is how many intervals a streaming mount that cannot grow (at the cap or a
	// learned ceiling) holds before the controller tries half its window; each probe that
	// gains nothing doubles the wait, up to HoldIntervals << MaxHoldDoublings. A probe
	// undone costs two intervals at half the window (settling, then the verdict): after 12
	// intervals at the right value that is at most a seventh of the time, and less with
	// each doubling; a probe sooner costs a reader a measurable share of its throughput
	// (docs/benchmarks.md).
	ProbeAfter = 12
	// ProbeGain is the rise of the application read rate a probe must bring to be kept:
	// twice the verdict's RateChange. A probe kept leaves a ceiling, so it takes clear
	// evidence; one undone costs only a later probe.
	ProbeGain = 2 * RateChange
	// RiseWaste is the rise of over-read at or above which a rise must read RateChange
	// faster (be judged helped) to be kept, and on two intervals; any other rise stays
	// unless it hurt. Over-read is what a larger window costs: its pages are held until
	// read, and a window whose fetched pages start to go unread has outgrown the memory its
	// readers have: under a memory limit the loss grows as the cache fills, so a rise that
	// reads faster on its first interval may read slower on the next. The bar sits between
	// what a rise does to the over-read of readers with memory to spare (next to nothing)
	// and of readers under a memory limit (docs/benchmarks.md, scenario b). A rise that
	// read slower on its first interval is undone at once only past this bar and what its
	// larger lead fetched ahead of the readers (leadFill): before that, it is judged once
	// more on the next interval alone.
	RiseWaste = 0.04
	// OldWindowFaultReads is how many times a cut window the READ payload per major fault
	// may be before those faults count as reading with a window from before the cut. A major
	// fault reads the file's window around itself (mm/filemap.c, do_sync_mmap_readahead),
	// and a fault on the marker page one window more ahead (do_async_mmap_readahead): at
	// most twice the window of the file, which the file took when it was opened
	// (file_ra_state_init).
	OldWindowFaultReads = 2
)

// Reason says why the controller changed, or held, a mount's read-ahead. The reasons of
// changes are a fixed set: label values of nfstune_agent_readahead_adaptive_changes_total.
type Reason string

// The reasons of a change.
const (
	// ReasonBounds moves a value outside the rule's bounds to the nearest bound.
	ReasonBounds Reason = "bounds"
	// ReasonLearned starts a new superblock at the value the controller settled on for the
	// same volume before (Controller.StartAt), instead of the bound.
	ReasonLearned Reason = "learned"
	// ReasonOverRead halves a window that fetched much more than was read.
	ReasonOverRead Reason = "over_read"
	// ReasonStreaming doubles the window of a mount whose READs are read-ahead's and whose
	// fetched bytes are read.
	ReasonStreaming Reason = "streaming"
	// ReasonProbe halves the window of a streaming mount that cannot grow, to learn
	// whether a smaller one reads faster.
	ReasonProbe Reason = "probe"
	// ReasonHurt goes back on the previous change, judged hurt (Judge).
	ReasonHurt Reason = "hurt"
	// ReasonNoGain goes back on a probe that did not read clearly faster, or on a rise
	// that fetched more than was read without reading faster: a larger window's pages
	// are held until read, and over-read says they are going unread.
	ReasonNoGain Reason = "no_gain"
	// ReasonMappedRandom lowers the window of a mount whose mapped readers fault at
	// scattered offsets (FaultEvidence.Random, from the per-pod collector) to what their
	// faults use, down to MappedFloorKB: below one rsize, since each fault reads the window
	// around itself, whatever the reader asked for.
	ReasonMappedRandom Reason = "mapped_random"
)

// ChangeReasons lists the reasons of a change.
var ChangeReasons = []Reason{ReasonBounds, ReasonLearned, ReasonOverRead, ReasonStreaming, ReasonProbe, ReasonHurt, ReasonNoGain, ReasonMappedRandom}

// The reasons of a hold.
const (
	HoldTraffic  Reason = "too_little_traffic"
	HoldMapped   Reason = "mapped_reads"
	HoldStalled  Reason = "stalled"
	HoldInterval Reason = "interval"
	HoldSettling Reason = "settling"
	HoldLimit    Reason = "learned_limit"
	HoldSteady   Reason = "steady"
	HoldBaseline Reason = "baseline"
	HoldJudging  Reason = "judging"
	HoldNoOpens  Reason = "no_opens"
	// HoldFaultsUnseen: the per-pod collector runs but has no fault figures for the
	// interval, and a rise could read a larger window around a mapped reader's misses.
	HoldFaultsUnseen Reason = "faults_unseen"
	// HoldThrashing: a pod that uses the mount thrashes its page cache, and a larger
	// window would take it more of the pages it is about to use.
	HoldThrashing Reason = "thrashing"
)

// Directions of a change: label values of nfstune_agent_readahead_adaptive_changes_total.
const (
	Up   = "up"
	Down = "down"
)

// Step is one decision of the controller: FromKB is the read-ahead it found, ToKB the one
// it wants (the same for a hold).
type Step struct {
	FromKB int    `json:"from_kb"`
	ToKB   int    `json:"to_kb"`
	Reason Reason `json:"reason"`
	// Why gives the figures the decision was made on.
	Why string `json:"why"`
	// Verdict is the verdict on the previous change when this step judged it, with its
	// figures in VerdictWhy; empty otherwise.
	Verdict    Verdict `json:"verdict,omitempty"`
	VerdictWhy string  `json:"verdict_why,omitempty"`
}

// Changed reports whether the step changes the read-ahead.
func (s Step) Changed() bool { return s.ToKB != s.FromKB }

// Direction is Up or Down for a change, empty for a hold.
func (s Step) Direction() string {
	switch {
	case s.ToKB > s.FromKB:
		return Up
	case s.ToKB < s.FromKB:
		return Down
	}
	return ""
}

// Controller moves one mount's read-ahead within [MinKB, MaxKB] from the evidence of each
// interval. It is deterministic: the same evidence, times and stalls give the same steps.
// The caller measures the evidence once per Interval (Measure against the previous
// interval's sample), calls Decide, makes the change, and then reports it with Applied.
//
// The kernel copies the window into a file when it is opened, so the interval in which a
// change is made mixes files opened before and after it: after every change the controller
// holds for one interval (settling) and judges the change on the interval after that,
// against the interval before the change (Judge). Changes are therefore at least two
// intervals apart, and a change is judged only on intervals in which files were opened
// after it. The rules are Decide's two tables, judgeTable (what the interval says of the
// last change) and stepTable (the next step); docs/agent.md gives them with their reasons.
//
// A limit learned again in the same direction holds twice as long as the last one, up
// to 2^MaxHoldDoublings times HoldIntervals; a rise judged helped forgets the ceilings'
// count.
type Controller struct {
	MinKB, MaxKB int
	Interval     time.Duration

	started          time.Time    // the first decision
	lastChange       time.Time    // the last change; zero before the first
	pending          *pendingStep // the last change, to be judged after it settles
	ceiling, floor   learnedLimit
	ceilings, floors int // limits learned in each direction, for the hold's doubling
	probes           int // probes undone since the last one kept, for the probe's wait
	// baseline is set when a rise was kept on two intervals for reading fast: the
	// interval that judged it is not the next rise's "before", a fresh one is.
	baseline bool
	// start is the value the first decision moves a new superblock to (StartAt); 0 for the
	// nearest bound.
	start int
	// mappedLow is set while the value is below MinKB for mapped random readers
	// (ReasonMappedRandom): the bounds let it stay there until read(2) traffic shows while
	// those readers have stopped (stepFacts.mappedAtWork).
	mappedLow bool
	// thrashLow lets the value stay below MinKB for a while after an over-read halving took
	// it there for a thrashing pod: a smaller window that stops the thrashing would
	// otherwise be moved back into the bounds at once, and thrash again.
	thrashLow learnedLimit
	thrashes  int
}

// StartAt makes the controller's first decision move the superblock to kb, a value learned
// on the same volume before, rather than to the nearest bound: a reader that opens its files
// before the controller's first interval reads with the window they were opened with. A kb
// outside [MinKB, MaxKB] is ignored.
func (c *Controller) StartAt(kb int) {
	if kb >= c.lowest() && kb <= c.MaxKB {
		c.start = kb
		c.mappedLow = kb < c.MinKB
	}
}

// lowest is the least value the controller ever sets: MappedFloorKB for mapped random
// readers, unless the rule's floor is lower still.
func (c *Controller) lowest() int { return min(c.MinKB, MappedFloorKB) }

// Settled reports whether step s holds a value the controller stays at: it cannot grow or
// has no reason to (steady, learned_limit), with nothing waiting for a verdict. Such a
// value is what the controller learned of the volume's readers.
//
// A cut for mapped readers at random waiting on faults at the new window counts too: it was
// sized by what their faults touched, the readers whose files were opened before it cannot
// show it, and the next superblock of the volume is where it can reach a reader from its
// first open. A verdict against it later teaches the volume the value it goes back to.
func (c *Controller) Settled(s Step) bool {
	if s.Changed() {
		return false
	}
	if p := c.pending; p != nil && p.step.Reason != ReasonMappedRandom {
		return false
	}
	return s.Reason == HoldSteady || s.Reason == HoldLimit || (c.pending != nil && s.Reason == HoldNoOpens)
}

type pendingStep struct {
	step   Step
	before Evidence
	// first is the interval that judged a rise helped while it raised over-read: the
	// rise is judged again on it and the next interval together.
	first *Evidence
	// resettled is set when a rise read slower on its first interval without wasting:
	// that interval counted as settling, and the rise is judged on the next.
	resettled bool
}

// learnedLimit is a value the read-ahead must not pass until a time.
type learnedLimit struct {
	kb    int
	until time.Time
}

func (l learnedLimit) active(now time.Time) bool { return l.kb > 0 && now.Before(l.until) }

// NewController returns a controller for bounds [minKB, maxKB] in KiB (minKB <= maxKB)
// that steps once per interval. minKB is at least one page (hostfs.MinReadAheadKB): the
// kernel would store less as 0, read-ahead off.
func NewController(minKB, maxKB int, interval time.Duration) *Controller {
	minKB = max(minKB, hostfs.MinReadAheadKB)
	if maxKB < minKB {
		maxKB = minKB
	}
	return &Controller{MinKB: minKB, MaxKB: maxKB, Interval: interval}
}

// Streaming reports whether e's READs are read-ahead's: at least MinStepReads of them,
// averaging StreamingREADs or more of the largest READ the window allows (one rsize, or
// the window itself when smaller).
func (e Evidence) Streaming() bool {
	largest := float64(e.ReadAheadKB) * 1024
	if e.RSize > 0 {
		largest = min(largest, float64(e.RSize))
	}
	return e.Reads >= MinStepReads && largest > 0 && e.AvgReadBytes >= StreamingREADs*largest
}

// Decide returns the step for the evidence of the interval ending at now; stalled says the
// mount's server is not answering. It gathers the interval's facts (stepFacts), judges the
// change waiting for its verdict, if any (judgeTable), and then takes the next step
// (stepTable): two decision tables, each read from the top, the first row that holds
// giving the step. e.ReadAheadKB is the current read-ahead.
func (c *Controller) Decide(e Evidence, now time.Time, stalled bool) Step {
	if c.started.IsZero() {
		c.started = now
	}
	f := c.facts(e, now, stalled)
	s, done := c.judgeTable(f)
	if done {
		return s
	}
	f.step = s // with the verdict of the change kept
	return c.stepTable(f)
}

// stepFacts are what Decide's tables read: the interval's evidence and the controller's
// state at now, with the verdict of the change waiting for one.
type stepFacts struct {
	e       Evidence
	now     time.Time
	cur     int
	stalled bool
	since   time.Duration // since the last change
	changed bool          // a change was made before
	steady  time.Duration // since the last change, or the first decision

	// The change waiting for its verdict, when it is still the mount's value.
	pending *pendingStep
	after   Evidence // the intervals it is judged on
	verdict Verdict
	why     string
	waste   float64 // over-read after it, less before it
	// leadFill is the over-read a rise's larger lead may add on its first interval
	// (leadFill); zero for any other step, and once the rise was judged on an interval.
	leadFill float64

	figures string // the interval's figures, for the reasons
	step    Step   // the step so far: from and to the current value, and the verdict

	// mappedRandom is set when the mapped readers' faults read at scattered offsets
	// through too large a window (FaultEvidence.Random over MinStepBytes); floor is the
	// least value the interval allows: MinKB, or below it while mapped random readers are
	// what the mount serves and no read(2) traffic says otherwise, or while a pod that
	// uses the mount thrashes its page cache (Evidence.Thrashing).
	mappedRandom bool
	floor        int
	// mappedAtWork is set while the value is below MinKB for mapped random readers and
	// their faults still miss the page cache (MinRandomMajorFaults major faults in the
	// interval): read(2) traffic of other readers on the superblock then neither lifts the
	// floor nor grows the window, since a larger window would cost the mapped readers its
	// whole size at each fault, and the kernel's default window is what both had before.
	mappedAtWork bool
}

func (c *Controller) facts(e Evidence, now time.Time, stalled bool) stepFacts {
	f := stepFacts{e: e, now: now, cur: e.ReadAheadKB, stalled: stalled, since: now.Sub(c.lastChange), changed: !c.lastChange.IsZero()}
	f.step = Step{FromKB: f.cur, ToKB: f.cur}
	f.steady = now.Sub(c.started)
	if f.changed {
		f.steady = f.since
	}
	if p := c.pending; p != nil && p.step.ToKB == f.cur {
		f.pending, f.after = p, e
		if p.first != nil {
			f.after = combine(*p.first, e)
		}
		f.verdict, f.why = Judge(p.before, f.after)
		f.waste = f.after.OverRead - p.before.OverRead
		if p.step.Reason == ReasonStreaming && p.first == nil && !p.resettled {
			f.leadFill = leadFill(p.before, f.after, p.step.FromKB, p.step.ToKB)
		}
	}
	f.figures = fmt.Sprintf("over-read %.2f, average READ %.0f KiB (rsize %d KiB), %.1f READs in flight, application reads %.1f MiB/s",
		e.OverRead, e.AvgReadBytes/1024, e.RSize/1024, e.InFlight, e.AppBytesPerSecond/(1<<20))
	if e.Faults != nil {
		f.figures += fmt.Sprintf(", mapped readers' faults %d (%d major of %d past fault-around) starting %s of READs",
			e.Faults.Faults, e.Faults.MajorFaults, e.Faults.FilemapFaults, mib(e.Faults.ReadBytes))
	}
	f.mappedRandom = e.Faults != nil && (e.Faults.Random(MinStepBytes) ||
		(e.Faults.MissesAtRandom() && e.Faults.MajorFaults >= MinStepMajorFaults))
	f.mappedAtWork = c.mappedLow && e.Faults != nil && e.Faults.MajorFaults >= MinRandomMajorFaults
	f.floor = c.MinKB
	if f.mappedRandom || e.Thrashing || c.thrashLow.active(now) || (c.mappedLow && (e.AppReadBytes < MinStepBytes || f.mappedAtWork)) {
		f.floor = c.lowest()
	}
	if c.floor.active(now) {
		f.floor = max(f.floor, c.floor.kb) // a lowering undone as hurt: not below it for a while
	}
	return f
}

// leadFill returns the over-read a rise from fromKB to toKB may add to the interval after
// (with before the interval before it) while no page goes unread. A sequential reader's
// read-ahead runs up to two windows ahead of it: the window it reads in, and the next one,
// issued when it reaches the first page of this one (mm/readahead.c, ondemand_readahead
// sets async_size to the window's size). Each stream that opens a file after the rise so
// fetches up to twice the difference ahead of what it has read, pages the interval counts
// as fetched and not yet read; at the file's end its lead is read and nothing is lost. The
// streams are counted as the READs in flight before the rise over the READs one window
// keeps in flight (Evidence.WindowBound): a stream the window did not limit counts as less
// than one, so the allowance errs small, and random readers' 16 KiB READs count for
// nearly nothing.
func leadFill(before, after Evidence, fromKB, toKB int) float64 {
	if after.AppReadBytes == 0 || toKB <= fromKB {
		return 0
	}
	return before.WindowBound * 2 * float64(toKB-fromKB) * 1024 / float64(after.AppReadBytes)
}

// judgeTable decides what the interval says of the change waiting for its verdict. It
// returns done when that decides the step: a hold, or the change undone. Rows, in order:
//
//	the server is stalled                       hold (stalled), the change forgotten
//	under 3/4 of an interval since the change   hold (interval)
//	no change made yet, a learned start (StartAt) not the value  to the learned value
//	the value is outside the bounds             to the nearest bound, the change forgotten
//	under 7/4 of an interval since the change   hold (settling): files opened before it still read
//	no change waiting, or another writer's value  go on to stepTable
//	no file opened since the change             hold (no_opens), still waiting
//	a rise, hurt on its first interval, over-read up by less than RiseWaste and its lead (leadFill)
//	                                            hold (settling) once more, judged on the next alone
//	hurt                                        undo (hurt)
//	a probe not helped by ProbeGain             undo (no_gain)
//	a rise, helped on its first interval, over-read up by RiseWaste or more
//	                                            hold (judging), judged on both intervals
//	a rise, no change, over-read up by RiseWaste or more  undo (no_gain)
//	a cut for mapped readers, their faults no longer missing the cache
//	                                            keep it; go on to stepTable
//	a cut for mapped readers, their faults reading over OldWindowFaultReads times the new window
//	                                            still waiting; go on to stepTable
//	a cut for mapped readers, their faults served per second down by RateChange
//	                                            undo (hurt), a floor at the old value
//	a probe kept                                a ceiling at it; go on to stepTable
//	a rise helped                               forget the ceilings' count; go on to stepTable
//	anything else                               keep it; go on to stepTable
func (c *Controller) judgeTable(f stepFacts) (Step, bool) {
	s := f.step
	hold := func(r Reason, format string, args ...any) (Step, bool) {
		s.Reason, s.Why = r, fmt.Sprintf(format, args...)
		return s, true
	}
	p := f.pending
	undo := func(r Reason, format string, args ...any) (Step, bool) {
		s.ToKB, s.Verdict, s.VerdictWhy = p.step.FromKB, f.verdict, f.why
		return hold(r, format, args...)
	}
	switch {
	case f.stalled:
		c.pending = nil // the interval says nothing about read-ahead
		return hold(HoldStalled, "the server is not answering")
	case f.changed && f.since < c.Interval*3/4:
		return hold(HoldInterval, "last change %s ago, interval %s", f.since.Round(time.Millisecond), c.Interval)
	case !f.changed && c.start > 0 && f.cur != c.start:
		s.ToKB = c.start
		return hold(ReasonLearned, "%d KiB is where the controller settled on this volume before", c.start)
	case f.cur < f.floor || f.cur > c.MaxKB:
		c.pending, c.mappedLow = nil, false
		s.ToKB = min(max(f.cur, c.MinKB), c.MaxKB)
		return hold(ReasonBounds, "%d KiB is outside the bounds %d..%d KiB", f.cur, c.MinKB, c.MaxKB)
	case f.changed && f.since < c.Interval*7/4:
		return hold(HoldSettling, "last change %s ago: files opened before it still read with the old window", f.since.Round(time.Millisecond))
	case p == nil:
		c.pending = nil // none, or a value someone else wrote since
		return s, false
	case f.after.noOpens():
		// Every file read since was opened before the change, at the old window.
		return hold(HoldNoOpens, "no file opened since %d -> %d KiB: open files keep the window they were opened with, so the change is judged on files opened after it", p.step.FromKB, p.step.ToKB)
	}
	c.pending = nil
	rise, probe := p.step.Reason == ReasonStreaming, p.step.Reason == ReasonProbe
	if p.step.Reason == ReasonMappedRandom {
		// Judged by what the mapped readers get done (their faults served per second), and
		// only on faults that read with the new window: a mapped file keeps the window it
		// was opened with, and NFSv4 counts no opens to tell by.
		switch fe := f.after.Faults; {
		case fe == nil || fe.MajorFaults < MinRandomMajorFaults:
			s.Verdict, s.VerdictWhy = TooLittleTraffic, "the mapped readers' faults stopped missing the page cache"
			return s, false // kept: nothing to judge it on
		case fe.readPerMajorKB() > OldWindowFaultReads*float64(p.step.ToKB):
			// Their files were opened before the change: still waiting for faults at the
			// new window (no verdict, so nothing logged each interval), and the step table
			// may lower on by what the faults touch.
			c.pending = p
			return s, false
		}
		v, why := judgeFaults(p.before, f.after)
		if v == Hurt {
			c.mappedLow = p.step.FromKB < c.MinKB
			s.ToKB, s.Verdict, s.VerdictWhy = p.step.FromKB, v, why
			return hold(ReasonHurt, "the change %d -> %d KiB hurt the mapped readers: %s", p.step.FromKB, p.step.ToKB, why)
		}
		s.Verdict, s.VerdictWhy = v, why
		return s, false
	}
	switch {
	case f.verdict == Hurt && rise && p.first == nil && !p.resettled && f.waste < RiseWaste+f.leadFill:
		// Files opened before the rise may still be open, and those opened after it were
		// filling their larger leads: judge it on the next alone.
		c.pending = &pendingStep{step: p.step, before: p.before, resettled: true}
		return hold(HoldSettling, "the rise %d -> %d KiB read slower on its first interval with over-read up by less than %.2f plus the %.2f its larger lead fetches ahead (%s); judged on the next alone",
			p.step.FromKB, p.step.ToKB, RiseWaste, f.leadFill, f.why)
	case f.verdict == Hurt:
		return undo(ReasonHurt, "the change %d -> %d KiB hurt: %s", p.step.FromKB, p.step.ToKB, f.why)
	case probe && !(f.verdict == Helped && readsFaster(p.before, f.e, ProbeGain)):
		return undo(ReasonNoGain, "the probe %d -> %d KiB did not read %.0f %% faster (%s): %s", p.step.FromKB, p.step.ToKB, 100*ProbeGain, f.verdict, f.why)
	case rise && f.verdict == Helped && p.first == nil && f.e.OverRead-p.before.OverRead >= RiseWaste:
		// Kept only when it helped on two intervals: under a memory limit its waste grows
		// as the cache fills.
		c.pending = &pendingStep{step: p.step, before: p.before, first: &f.e}
		return hold(HoldJudging, "the rise %d -> %d KiB read faster but raised over-read by %.2f or more on one interval (%s); judged again with the next", p.step.FromKB, p.step.ToKB, RiseWaste, f.why)
	case rise && f.verdict == NoChange && f.waste >= RiseWaste:
		return undo(ReasonNoGain, "the rise %d -> %d KiB fetched more than was read without reading %.0f %% faster: %s", p.step.FromKB, p.step.ToKB, 100*RateChange, f.why)
	case probe:
		c.probes = 0 // a smaller window reads faster: keep it, and grow no further for a while
		c.ceiling = c.learn(&c.ceilings, f.cur, f.now)
	case f.verdict == Helped && p.step.Direction() == Up:
		c.ceilings = 0
	}
	// A rise kept on two intervals was kept for reading fast (it raised over-read): the
	// interval that kept it is not the next rise's "before".
	c.baseline = rise && p.first != nil
	s.Verdict, s.VerdictWhy = f.verdict, f.why // kept: the next step carries its verdict
	return s, false
}

// stepTable takes the interval's step once no pending change decided it. Rows, in order:
//
//	mapped readers at random, above the floor        lower to what their faults touch (mapped_random)
//	mapped readers at random, at the floor           hold (learned_limit)
//	below one rsize for them, their faults still missing the cache (mappedAtWork)
//	                                                 hold (mapped_reads), whatever read(2) does
//	under MinStepBytes read, the rest through mmap   hold (mapped_reads)
//	under MinStepBytes read                          hold (too_little_traffic)
//	over-read above ShrinkOverRead                   halve, not below the floor (else hold: learned_limit);
//	                                                 the floor is MappedFloorKB while a pod thrashes
//	not streaming                                    hold (steady)
//	streaming, over-read <= GrowOverRead, below the ceiling, a pod thrashes
//	                                                 hold (thrashing)
//	streaming, over-read <= GrowOverRead, below the ceiling, mapped readers' faults
//	missing the page cache (MinRandomMajorFaults major faults, with the collector)
//	                                                 hold (mapped_reads)
//	streaming, over-read <= GrowOverRead, below the ceiling, pods faulting on files nothing
//	names (UnseenMajorFaults, without the collector) hold (mapped_reads)
//	streaming, over-read <= GrowOverRead, below the ceiling, the collector on but without
//	fault figures for the interval                   hold (faults_unseen)
//	streaming, over-read <= GrowOverRead, below the ceiling, no file opened
//	                                                 hold (no_opens)
//	the same, right after a rise kept on two intervals  hold (baseline)
//	the same                                         double, not above the ceiling
//	streaming and unable to grow for probeWait, 64 MiB read, files opened
//	                                                 halve once (probe)
//	below the ceiling                                hold (steady)
//	anything else                                    hold (learned_limit)
func (c *Controller) stepTable(f stepFacts) Step {
	s := f.step
	decide := func(r Reason, format string, args ...any) Step {
		s.Reason, s.Why = r, fmt.Sprintf(format, args...)
		return s
	}
	e, cur := f.e, f.cur
	// The bounds with the learned floor and ceiling, as judgeTable left them; below MinKB
	// for a thrashing pod's waste (the over-read rows).
	lo, hi := c.MinKB, c.MaxKB
	if e.Thrashing || c.thrashLow.active(f.now) {
		lo = f.floor
	}
	if c.floor.active(f.now) {
		lo = max(lo, c.floor.kb)
	}
	if c.ceiling.active(f.now) {
		hi = min(hi, c.ceiling.kb)
	}
	grow := e.OverRead <= GrowOverRead && cur < hi
	switch {
	case f.mappedRandom && cur > f.floor:
		// At least halved: faults that miss at random with little over-read (a window
		// near what they map) still fetch a window at each miss.
		s.ToKB = min(mappedWindow(cur, e.Faults.OverRead(), f.floor), max(half(cur), f.floor))
		c.mappedLow = s.ToKB < c.MinKB
		return decide(ReasonMappedRandom, "the mapped readers' faults started %s of READs, %.1f times the %d KiB their %d read faults map, and %d of %d faults past fault-around missed the page cache: a window of %d KiB",
			mib(e.Faults.ReadBytes), e.Faults.OverRead(), FaultAroundBytes>>10, e.Faults.Faults, e.Faults.MajorFaults, e.Faults.FilemapFaults, s.ToKB)
	case f.mappedRandom:
		return decide(HoldLimit, "mapped readers at random, at the floor of %d KiB", f.floor)
	case f.mappedAtWork:
		return decide(HoldMapped, "the mapped readers' faults still miss the page cache (%d major faults): the window stays at %d KiB, where they fetch what they touch, whatever read(2) reads",
			e.Faults.MajorFaults, cur)
	case e.AppReadBytes < MinStepBytes && e.mappedOver(MinStepBytes):
		// Reads through mmap: what they used is not counted, so no step can be judged.
		return decide(HoldMapped, "the server sent %s of READs in %.0f s, applications read %s with read(2): the rest was read through mmap, which mountstats does not count", mib(e.ServerReadBytes), e.Seconds, mib(e.AppReadBytes))
	case e.AppReadBytes < MinStepBytes:
		return decide(HoldTraffic, "application reads %s in %.0f s; a step needs %s", mib(e.AppReadBytes), e.Seconds, mib(MinStepBytes))
	case e.OverRead > ShrinkOverRead && max(half(cur), lo) >= cur:
		return decide(HoldLimit, "%s; floor %d KiB", f.figures, lo)
	case e.OverRead > ShrinkOverRead:
		s.ToKB = max(half(cur), lo)
		return decide(ReasonOverRead, "%s: over-read above %.1f", f.figures, ShrinkOverRead)
	case !e.Streaming():
		return decide(HoldSteady, "%s: not streaming (the average READ is under %.0f %% of what read-ahead makes)", f.figures, 100*StreamingREADs)
	case grow && e.Thrashing:
		// A thrashing pod loses what it read before it uses it; a larger window brings in
		// more at each read, and takes more from it and from the other readers of the
		// superblock (a mapped reader whose faults have not shown yet among them).
		return decide(HoldThrashing, "%s: streaming, but a pod that uses the mount thrashes its page cache: a larger window would evict more of what it is about to read", f.figures)
	case grow && e.mappedMisses():
		// A window is read around each of a mapped reader's misses, and a rise is judged
		// on read(2) bytes alone: it would cost the mapped readers before anything could
		// tell. Their first misses come intervals before their class does (docs/agent.md).
		return decide(HoldMapped, "%s: streaming, but mapped readers of the superblock took %d major faults: a larger window would be read around each of their misses of files opened after it, and a rise is judged on read(2) alone",
			f.figures, e.Faults.MajorFaults)
	case grow && e.UnseenMajorFaults > 0:
		// The row above without the collector: a pod's major faults say it reads through
		// mmap (or swaps), not on which files nor in what order, and what cannot be seen is
		// not risked (docs/agent.md).
		return decide(HoldMapped, "%s: streaming, but pods of the superblock took %d major faults that the per-pod collector does not place (their cgroups' pgmajfault): if they read its files through mmap, a larger window would be read around each of their misses of files opened after it",
			f.figures, e.UnseenMajorFaults)
	case grow && e.FaultsUnseen:
		// What the row above looks for cannot be seen in this interval; the next one has it.
		return decide(HoldFaultsUnseen, "%s: streaming, but the per-pod collector has no fault figures for this interval (it loaded, or could not be read, since it began): a rise waits for an interval that shows whether mapped readers miss", f.figures)
	case grow && e.noOpens():
		return decide(HoldNoOpens, "%s: streaming, but no file was opened in the interval: a larger window would reach none of the files being read", f.figures)
	case grow && c.baseline:
		c.baseline = false
		return decide(HoldBaseline, "%s: the rise to %d KiB was kept on this interval's reads; the next rise is measured against a fresh interval", f.figures, cur)
	case grow:
		s.ToKB = min(cur*2, hi)
		return decide(ReasonStreaming, "%s: streaming, over-read at most %.1f", f.figures, GrowOverRead)
	case f.steady >= c.probeWait() && e.AppReadBytes >= MinJudgedBytes && half(cur) >= lo && !e.noOpens():
		s.ToKB = half(cur)
		return decide(ReasonProbe, "%s: streaming at %d KiB without growing for %s; trying half", f.figures, cur, f.steady.Round(time.Second))
	case cur < hi:
		return decide(HoldSteady, "%s: over-read above %.1f, at most %.1f", f.figures, GrowOverRead, ShrinkOverRead)
	}
	return decide(HoldLimit, "%s; ceiling %d KiB, floor %d KiB", f.figures, hi, lo)
}

// mappedWindow is the window that would have fetched what mapped random readers touched:
// cur divided by their mapped over-read, in pages, not below floor nor above cur.
func mappedWindow(cur int, overRead float64, floor int) int {
	kb := int(float64(cur)/overRead) &^ 3
	return min(max(kb, floor), cur)
}

// judgeFaults is the verdict on a change of mapped readers' window: helped when their read
// faults served per second rose by RateChange or more, hurt when they fell by as much,
// no_change between, and too_little_traffic without fault figures on both sides.
func judgeFaults(before, after Evidence) (Verdict, string) {
	if before.Faults == nil || after.Faults == nil || before.Seconds <= 0 || after.Seconds <= 0 || before.Faults.Faults == 0 {
		return TooLittleTraffic, "no fault figures on both sides of the change"
	}
	b := float64(before.Faults.Faults) / before.Seconds
	a := float64(after.Faults.Faults) / after.Seconds
	why := fmt.Sprintf("read faults %.0f/s before, %.0f/s after", b, a)
	switch {
	case a >= b*(1+RateChange):
		return Helped, why
	case a <= b*(1-RateChange):
		return Hurt, why
	}
	return NoChange, why
}

// readsFaster reports whether after's application read rate is at least by (a fraction)
// above before's.
func readsFaster(before, after Evidence, by float64) bool {
	return after.AppBytesPerSecond >= (1+by)*before.AppBytesPerSecond
}

// half is kb halved, in whole pages.
func half(kb int) int { return kb / 2 &^ 3 }

// probeWait is how long a streaming mount that cannot grow holds before the next probe.
func (c *Controller) probeWait() time.Duration {
	return c.Interval * time.Duration(min(ProbeAfter<<min(c.probes, 8), HoldIntervals<<MaxHoldDoublings))
}

// Applied records that step s, decided on evidence e, was made at now: the change settles
// for an interval, then the next Decide judges it (unless it was a move into the bounds or
// an undo); a cut or an undo teaches a limit.
func (c *Controller) Applied(s Step, e Evidence, now time.Time) {
	if !s.Changed() {
		return
	}
	c.lastChange = now
	c.pending, c.baseline = nil, false
	switch s.Reason {
	case ReasonHurt:
		if s.Direction() == Down {
			c.ceiling = c.learn(&c.ceilings, s.ToKB, now)
		} else {
			c.floor = c.learn(&c.floors, s.ToKB, now)
		}
	case ReasonNoGain:
		if s.Direction() == Up {
			c.probes++ // a probe undone
		} else {
			c.ceiling = c.learn(&c.ceilings, s.ToKB, now) // a rise undone: it wasted
		}
	case ReasonOverRead:
		c.ceiling = c.learn(&c.ceilings, s.ToKB, now)
		c.pending = &pendingStep{step: s, before: e}
		if s.ToKB < c.MinKB {
			c.thrashLow = c.learn(&c.thrashes, s.ToKB, now)
		}
	case ReasonStreaming, ReasonProbe, ReasonMappedRandom:
		c.pending = &pendingStep{step: s, before: e}
	}
}

// learn returns a limit at kb held from now for HoldIntervals intervals, doubled for each
// limit already counted in *n (up to MaxHoldDoublings times), and counts it. The limit ends
// a quarter interval early: the agent's ticks come a few milliseconds late or early, and a
// hold of N intervals must end at the N-th tick, not at the N-th or the next by chance.
func (c *Controller) learn(n *int, kb int, now time.Time) learnedLimit {
	hold := HoldIntervals * c.Interval << min(*n, MaxHoldDoublings)
	*n++
	return learnedLimit{kb: kb, until: now.Add(hold - c.Interval/4)}
}

// Limits returns the learned ceiling and floor in force at now, 0 for none.
func (c *Controller) Limits(now time.Time) (ceilingKB, floorKB int) {
	if c.ceiling.active(now) {
		ceilingKB = c.ceiling.kb
	}
	if c.floor.active(now) {
		floorKB = c.floor.kb
	}
	return ceilingKB, floorKB
}
