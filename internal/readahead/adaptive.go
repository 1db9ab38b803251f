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
	// and of readers under a memory limit (docs/benchmarks.md, scenario b).
	RiseWaste = 0.04
)

// Reason says why the controller changed, or held, a mount's read-ahead. The reasons of
// changes are a fixed set: label values of nfstune_agent_readahead_adaptive_changes_total.
type Reason string

// The reasons of a change.
const (
	// ReasonBounds moves a value outside the rule's bounds to the nearest bound.
	ReasonBounds Reason = "bounds"
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
)

// ChangeReasons lists the reasons of a change.
var ChangeReasons = []Reason{ReasonBounds, ReasonOverRead, ReasonStreaming, ReasonProbe, ReasonHurt, ReasonNoGain}

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
// intervals apart. Per interval with at least MinStepBytes of application reads and no
// stalled server:
//
//   - a value outside the bounds moves to the nearest bound (at once, without traffic);
//   - a change judged hurt is undone, and the value it goes back to becomes a limit (a
//     ceiling after a rise, a floor after a cut) for HoldIntervals intervals; a rise that
//     raised over-read by RiseWaste without being judged helped is undone too (no_gain),
//     with a ceiling as long; any other rise is kept, and the next step decided in the
//     same interval: a window whose fetched pages are read costs the readers nothing. A
//     rise whose first interval reads hurt while over-read rose by less than RiseWaste
//     settles one more interval and is judged on the next alone: files opened before it
//     may still be open (sixteen readers each keep a file open longer than an interval).
//     A rise judged helped on its first interval while it raised over-read by RiseWaste
//     holds for the next (judging) and is judged on the two together, since one
//     interval's spread can make a gain; a probe that did not gain ProbeGain is undone
//     (no_gain), and one that did leaves a ceiling;
//   - over-read above ShrinkOverRead halves the window (never below MinKB nor a learned
//     floor) and makes the new value a ceiling for the hold: a window that wasted is not
//     grown again at once;
//   - streaming traffic (Streaming: READs as large as read-ahead makes them) with over-read
//     at most GrowOverRead doubles it (never above MaxKB nor a learned ceiling): a window
//     whose pages are read costs nothing a reader does not use, and the interval after
//     the settling one says whether it hurt. After a rise kept on two intervals the next
//     rise waits an interval (baseline): those intervals were chosen for reading fast,
//     and as the next rise's "before" they would make that rise look slower than it is;
//   - streaming traffic that cannot grow, held for ProbeAfter intervals, has its window
//     halved once (a probe): kept only when the rate rose by ProbeGain, so a window that
//     grew past its best without a visible loss comes back down; each probe undone doubles
//     the wait;
//   - anything else holds.
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
// mount's server is not answering. It judges the previous change (once: the next call
// has nothing left to judge). e.ReadAheadKB is the current read-ahead.
func (c *Controller) Decide(e Evidence, now time.Time, stalled bool) Step {
	cur := e.ReadAheadKB
	s := Step{FromKB: cur, ToKB: cur}
	decide := func(r Reason, format string, args ...any) Step {
		s.Reason, s.Why = r, fmt.Sprintf(format, args...)
		return s
	}
	if c.started.IsZero() {
		c.started = now
	}
	if stalled {
		c.pending = nil // the interval says nothing about read-ahead
		return decide(HoldStalled, "the server is not answering")
	}
	since := now.Sub(c.lastChange)
	changed := !c.lastChange.IsZero()
	if changed && since < c.Interval*3/4 {
		return decide(HoldInterval, "last change %s ago, interval %s", since.Round(time.Millisecond), c.Interval)
	}
	if cur < c.MinKB || cur > c.MaxKB {
		c.pending = nil
		s.ToKB = min(max(cur, c.MinKB), c.MaxKB)
		return decide(ReasonBounds, "%d KiB is outside the bounds %d..%d KiB", cur, c.MinKB, c.MaxKB)
	}
	if changed && since < c.Interval*7/4 {
		return decide(HoldSettling, "last change %s ago: files opened before it still read with the old window", since.Round(time.Millisecond))
	}
	if p := c.pending; p != nil {
		c.pending = nil
		if p.step.ToKB == cur {
			after := e
			if p.first != nil {
				after = combine(*p.first, e)
			}
			if after.Opens == 0 {
				// Every file read since was opened before the change, at the old window:
				// nothing shows the change yet.
				c.pending = p
				return decide(HoldNoOpens, "no file opened since %d -> %d KiB: open files keep the window they were opened with, so the change is judged on files opened after it", p.step.FromKB, p.step.ToKB)
			}
			s.Verdict, s.VerdictWhy = Judge(p.before, after)
			switch {
			case s.Verdict == Hurt && p.step.Reason == ReasonStreaming && p.first == nil && !p.resettled &&
				after.OverRead-p.before.OverRead < RiseWaste:
				// Files opened before the rise may still be open: settle one more interval
				// and judge the rise on the next alone.
				why := s.VerdictWhy
				s.Verdict, s.VerdictWhy = "", ""
				c.pending = &pendingStep{step: p.step, before: p.before, resettled: true}
				return decide(HoldSettling, "the rise %d -> %d KiB read slower on its first interval without fetching more than was read (%s); judged on the next alone", p.step.FromKB, p.step.ToKB, why)
			case s.Verdict == Hurt:
				s.ToKB = p.step.FromKB
				return decide(ReasonHurt, "the change %d -> %d KiB hurt: %s", p.step.FromKB, p.step.ToKB, s.VerdictWhy)
			case p.step.Reason == ReasonProbe && !(s.Verdict == Helped && readsFaster(p.before, e, ProbeGain)):
				s.ToKB = p.step.FromKB
				return decide(ReasonNoGain, "the probe %d -> %d KiB did not read %.0f %% faster (%s): %s", p.step.FromKB, p.step.ToKB, 100*ProbeGain, s.Verdict, s.VerdictWhy)
			case p.step.Reason == ReasonStreaming && s.Verdict == Helped && p.first == nil && e.OverRead-p.before.OverRead >= RiseWaste:
				// A rise that fetches more than is read is kept only when it helped on two
				// intervals: under a memory limit its waste grows as the cache fills.
				why := c.judgeAgain(p, e, &s)
				return decide(HoldJudging, "the rise %d -> %d KiB read faster but raised over-read by %.2f or more on one interval (%s); judged again with the next", p.step.FromKB, p.step.ToKB, RiseWaste, why)
			case p.step.Reason == ReasonStreaming && s.Verdict == NoChange && after.OverRead-p.before.OverRead >= RiseWaste:
				s.ToKB = p.step.FromKB
				return decide(ReasonNoGain, "the rise %d -> %d KiB fetched more than was read without reading %.0f %% faster: %s", p.step.FromKB, p.step.ToKB, 100*RateChange, s.VerdictWhy)
			case p.step.Reason == ReasonProbe:
				c.probes = 0 // a smaller window reads faster: keep it, and grow no further for a while
				c.ceiling = c.learn(&c.ceilings, cur, now)
			case s.Verdict == Helped && p.step.Direction() == Up:
				c.ceilings = 0
			}
			// A rise kept on two intervals was kept for reading fast (it raised over-read):
			// the interval that kept it is not the next rise's "before".
			c.baseline = p.step.Reason == ReasonStreaming && p.first != nil
		}
	}
	if e.AppReadBytes < MinStepBytes && e.mappedOver(MinStepBytes) {
		// Reads through mmap: what they used is not counted, so no step can be judged.
		return decide(HoldMapped, "the server sent %s of READs in %.0f s, applications read %s with read(2): the rest was read through mmap, which mountstats does not count", mib(e.ServerReadBytes), e.Seconds, mib(e.AppReadBytes))
	}
	if e.AppReadBytes < MinStepBytes {
		return decide(HoldTraffic, "application reads %s in %.0f s; a step needs %s", mib(e.AppReadBytes), e.Seconds, mib(MinStepBytes))
	}
	figures := fmt.Sprintf("over-read %.2f, average READ %.0f KiB (rsize %d KiB), %.1f READs in flight, application reads %.1f MiB/s",
		e.OverRead, e.AvgReadBytes/1024, e.RSize/1024, e.InFlight, e.AppBytesPerSecond/(1<<20))
	lo, hi := c.MinKB, c.MaxKB
	if c.floor.active(now) {
		lo = max(lo, c.floor.kb)
	}
	if c.ceiling.active(now) {
		hi = min(hi, c.ceiling.kb)
	}
	switch {
	case e.OverRead > ShrinkOverRead:
		if s.ToKB = max(half(cur), lo); s.ToKB >= cur {
			s.ToKB = cur
			return decide(HoldLimit, "%s; floor %d KiB", figures, lo)
		}
		return decide(ReasonOverRead, "%s: over-read above %.1f", figures, ShrinkOverRead)
	case !e.Streaming():
		return decide(HoldSteady, "%s: not streaming (the average READ is under %.0f %% of what read-ahead makes)", figures, 100*StreamingREADs)
	case e.OverRead <= GrowOverRead && cur < hi && e.Opens == 0:
		return decide(HoldNoOpens, "%s: streaming, but no file was opened in the interval: a larger window would reach none of the files being read", figures)
	case e.OverRead <= GrowOverRead && cur < hi:
		if c.baseline {
			c.baseline = false
			return decide(HoldBaseline, "%s: the rise to %d KiB was kept on this interval's reads; the next rise is measured against a fresh interval", figures, cur)
		}
		s.ToKB = min(cur*2, hi)
		return decide(ReasonStreaming, "%s: streaming, over-read at most %.1f", figures, GrowOverRead)
	}
	steady := now.Sub(c.started)
	if changed {
		steady = since
	}
	if steady >= c.probeWait() && e.AppReadBytes >= MinJudgedBytes && half(cur) >= lo && e.Opens > 0 {
		s.ToKB = half(cur)
		return decide(ReasonProbe, "%s: streaming at %d KiB without growing for %s; trying half", figures, cur, steady.Round(time.Second))
	}
	if cur < hi {
		return decide(HoldSteady, "%s: over-read above %.1f, at most %.1f", figures, GrowOverRead, ShrinkOverRead)
	}
	return decide(HoldLimit, "%s; ceiling %d KiB, floor %d KiB", figures, hi, lo)
}

// judgeAgain keeps rise p pending, to be judged on e and the next interval together, and
// takes s's verdict back (none is given yet), returning its figures.
func (c *Controller) judgeAgain(p *pendingStep, e Evidence, s *Step) string {
	c.pending = &pendingStep{step: p.step, before: p.before, first: &e}
	why := s.VerdictWhy
	s.Verdict, s.VerdictWhy = "", ""
	return why
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
	case ReasonStreaming, ReasonProbe:
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
