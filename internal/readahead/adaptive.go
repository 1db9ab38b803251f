package readahead

import (
	"fmt"
	"time"
)

// The adaptive controller's thresholds (docs/agent.md, Adaptive read-ahead).
const (
	// ShrinkOverRead is the over-read above which the controller halves the window: close
	// to a third of the fetched bytes unused (WastefulOverRead's 1.5 is the audit's, over
	// much more traffic; an interval of a few seconds acts on less, and sooner).
	ShrinkOverRead = 1.3
	// GrowOverRead is the over-read at or below which a window-bound mount may grow. The
	// gap up to ShrinkOverRead is the hysteresis: a window that grows until it starts
	// to waste stops in the gap instead of going back and forth.
	GrowOverRead = 1.1
	// MinStepBytes is the application read bytes an interval needs before the controller
	// acts on it: below, the mount is idle or nearly so and its read-ahead is held.
	MinStepBytes = 16 << 20
	// MinStepReads is the READs an interval needs before its window-bound figure counts:
	// 16 MiB of reads at the largest rsize (1 MiB). The audit's MinWindowReads (100) is for
	// a traffic window of tens of seconds; a 5 s interval of a window-bound reader at
	// 16 MiB/s holds 80 READs of 1 MiB.
	MinStepReads = 16
	// HoldIntervals is how many intervals a learned limit holds at first; each limit learned
	// again in the same direction doubles it, up to MaxHoldDoublings times.
	HoldIntervals    = 12
	MaxHoldDoublings = 5
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
	// ReasonWindowBound doubles a window that bounds the READs in flight.
	ReasonWindowBound Reason = "window_bound"
	// ReasonHurt goes back on the previous change, judged hurt (Judge).
	ReasonHurt Reason = "hurt"
)

// ChangeReasons lists the reasons of a change.
var ChangeReasons = []Reason{ReasonBounds, ReasonOverRead, ReasonWindowBound, ReasonHurt}

// The reasons of a hold.
const (
	HoldTraffic  Reason = "too_little_traffic"
	HoldStalled  Reason = "stalled"
	HoldInterval Reason = "interval"
	HoldLimit    Reason = "learned_limit"
	HoldSteady   Reason = "steady"
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
// Per interval with at least MinStepBytes of application reads and no stalled server:
//
//   - a value outside the bounds moves to the nearest bound (at once, without traffic);
//   - the change of the previous interval is judged against the interval before it
//     (Judge); a change judged hurt is undone, and the value it left becomes a limit
//     (a ceiling after a rise, a floor after a cut) for HoldIntervals intervals;
//   - over-read above ShrinkOverRead halves the window (never below MinKB nor a learned
//     floor) and makes the new value a ceiling for the hold: a window that wasted is not
//     grown again at once;
//   - window-bound at WindowBoundAt or more, over MinStepReads READs, with over-read at
//     most GrowOverRead, doubles it (never above MaxKB nor a learned ceiling);
//   - anything else holds.
//
// A limit learned again in the same direction holds twice as long as the last one, up
// to 2^MaxHoldDoublings times HoldIntervals; a rise judged helped forgets the ceilings'
// count. Changes are at least three quarters of an Interval apart.
type Controller struct {
	MinKB, MaxKB int
	Interval     time.Duration

	lastChange       time.Time
	pending          *pendingStep // the last change, to be judged on the next interval
	ceiling, floor   learnedLimit
	ceilings, floors int // limits learned in each direction, for the hold's doubling
}

type pendingStep struct {
	step   Step
	before Evidence
}

// learnedLimit is a value the read-ahead must not pass until a time.
type learnedLimit struct {
	kb    int
	until time.Time
}

func (l learnedLimit) active(now time.Time) bool { return l.kb > 0 && now.Before(l.until) }

// NewController returns a controller for bounds [minKB, maxKB] in KiB (minKB <= maxKB)
// that steps once per interval.
func NewController(minKB, maxKB int, interval time.Duration) *Controller {
	if maxKB < minKB {
		maxKB = minKB
	}
	return &Controller{MinKB: minKB, MaxKB: maxKB, Interval: interval}
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
	if stalled {
		c.pending = nil // the interval says nothing about read-ahead
		return decide(HoldStalled, "the server is not answering")
	}
	if !c.lastChange.IsZero() && now.Sub(c.lastChange) < c.Interval*3/4 {
		return decide(HoldInterval, "last change %s ago, interval %s", now.Sub(c.lastChange).Round(time.Millisecond), c.Interval)
	}
	if cur < c.MinKB || cur > c.MaxKB {
		c.pending = nil
		s.ToKB = min(max(cur, c.MinKB), c.MaxKB)
		return decide(ReasonBounds, "%d KiB is outside the bounds %d..%d KiB", cur, c.MinKB, c.MaxKB)
	}
	if p := c.pending; p != nil {
		c.pending = nil
		if p.step.ToKB == cur {
			s.Verdict, s.VerdictWhy = Judge(p.before, e)
			if s.Verdict == Helped && p.step.Direction() == Up {
				c.ceilings = 0
			}
			if s.Verdict == Hurt {
				s.ToKB = p.step.FromKB
				return decide(ReasonHurt, "the change %d -> %d KiB hurt: %s", p.step.FromKB, p.step.ToKB, s.VerdictWhy)
			}
		}
	}
	if e.AppReadBytes < MinStepBytes {
		return decide(HoldTraffic, "application reads %s in %.0f s; a step needs %s", mib(e.AppReadBytes), e.Seconds, mib(MinStepBytes))
	}
	figures := fmt.Sprintf("over-read %.2f, window-bound %.2f (%.1f READs in flight, %.1f per window), application reads %.1f MiB/s",
		e.OverRead, e.WindowBound, e.InFlight, e.WindowReads, e.AppBytesPerSecond/(1<<20))
	switch {
	case e.OverRead > ShrinkOverRead:
		lo := c.MinKB
		if c.floor.active(now) {
			lo = max(lo, c.floor.kb)
		}
		s.ToKB = max(cur/2&^3, lo)
		if s.ToKB >= cur {
			s.ToKB = cur
			return decide(HoldLimit, "%s; floor %d KiB", figures, lo)
		}
		return decide(ReasonOverRead, "%s: over-read above %.1f", figures, ShrinkOverRead)
	case e.Reads >= MinStepReads && e.WindowBound >= WindowBoundAt && e.OverRead <= GrowOverRead:
		hi := c.MaxKB
		if c.ceiling.active(now) {
			hi = min(hi, c.ceiling.kb)
		}
		s.ToKB = min(cur*2, hi)
		if s.ToKB <= cur {
			s.ToKB = cur
			return decide(HoldLimit, "%s; ceiling %d KiB", figures, hi)
		}
		return decide(ReasonWindowBound, "%s: window-bound at %.2f or more, over-read at most %.1f", figures, WindowBoundAt, GrowOverRead)
	}
	return decide(HoldSteady, "%s", figures)
}

// Applied records that step s, decided on evidence e, was made at now: the next Decide
// judges it (unless it was a move into the bounds or an undo), and a cut or an undo
// teaches a limit.
func (c *Controller) Applied(s Step, e Evidence, now time.Time) {
	if !s.Changed() {
		return
	}
	c.lastChange = now
	c.pending = nil
	switch s.Reason {
	case ReasonHurt:
		if s.Direction() == Down {
			c.ceiling = c.learn(&c.ceilings, s.ToKB, now)
		} else {
			c.floor = c.learn(&c.floors, s.ToKB, now)
		}
	case ReasonOverRead:
		c.ceiling = c.learn(&c.ceilings, s.ToKB, now)
		c.pending = &pendingStep{step: s, before: e}
	case ReasonWindowBound:
		c.pending = &pendingStep{step: s, before: e}
	}
}

// learn returns a limit at kb held from now, counting it in *n.
func (c *Controller) learn(n *int, kb int, now time.Time) learnedLimit {
	hold := time.Duration(HoldIntervals) * c.Interval << min(*n, MaxHoldDoublings)
	*n++
	return learnedLimit{kb: kb, until: now.Add(hold)}
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
