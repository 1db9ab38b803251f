package readahead

import (
	"fmt"
	"math"
	"time"
)

// Verdict is what a change of read_ahead_kb did to the mount's own traffic.
type Verdict string

// The verdicts, a fixed set: they are label values of nfstune_mount_readahead_verdict.
const (
	Helped           Verdict = "helped"
	NoChange         Verdict = "no_change"
	Hurt             Verdict = "hurt"
	TooLittleTraffic Verdict = "too_little_traffic"
)

// Verdicts lists every Verdict.
var Verdicts = []Verdict{Helped, NoChange, Hurt, TooLittleTraffic}

// The verdict rule's thresholds (docs/policy.md, "Read-ahead verdicts").
const (
	// MinJudgedBytes is the application read bytes each window needs: 64 MiB is four
	// windows of the largest default read-ahead (15 x 1 MiB), and a few seconds of a slow
	// sequential reader.
	MinJudgedBytes = 64 << 20
	// RateChange is the relative change of application read bytes per second that counts:
	// a read-ahead change that matters moves throughput by tens of percent or more
	// (docs/benchmarks.md), while repeated reads on a shared network spread by a few
	// percent.
	RateChange = 0.10
	// OverReadChange is the change of over-read that counts when the rate did not move:
	// a quarter of the application's bytes more, or fewer, fetched from the server.
	OverReadChange = 0.25
)

// Judge compares the windows of traffic before and after a change of read-ahead. Its rule
// is a table; the first row that matches gives the verdict:
//
//	too_little_traffic  either window has less than MinJudgedBytes of application reads
//	no_change           the rate moved by RateChange or more, but no more than the server's
//	                    own answers did (outsideShare): the slowdown or speed-up came from outside
//	helped              the rate rose by RateChange or more
//	hurt                the rate fell by RateChange or more
//	helped              over-read fell by OverReadChange or more (the same reads for fewer
//	                    server bytes)
//	hurt                over-read rose by OverReadChange or more
//	no_change           anything else
//
// The control (outsideShare) is the server's time per READ, used only where the change
// cannot have moved it: the READs kept their size and over-read held (the same RPCs for the
// same reads), and no more of them were in flight (a larger window queues more at the server,
// which lengthens each answer). A server or host that slowed for reasons of its own then
// shows as longer answers to the same requests, and the rate that fell with them is not
// blamed on the change. The reason names the figures. A workload that changes between the
// windows is not told apart from an effect of the change; the windows should be of equal
// length and close.
func Judge(before, after Evidence) (Verdict, string) {
	if before.AppReadBytes < MinJudgedBytes || after.AppReadBytes < MinJudgedBytes {
		return TooLittleTraffic, fmt.Sprintf("application reads %s before, %s after; each window needs %s",
			mib(before.AppReadBytes), mib(after.AppReadBytes), mib(MinJudgedBytes))
	}
	rate := after.AppBytesPerSecond/before.AppBytesPerSecond - 1
	waste := after.OverRead - before.OverRead
	why := fmt.Sprintf("application reads %.1f -> %.1f MiB/s (%+.0f %%), over-read %.2f -> %.2f",
		before.AppBytesPerSecond/(1<<20), after.AppBytesPerSecond/(1<<20), 100*rate, before.OverRead, after.OverRead)
	outside, controlled := outsideShare(before, after)
	// The rate the change alone would have given: the rate after, with the server's own
	// change in answer time taken out.
	own := rate
	if controlled {
		own = (1+rate)*outside - 1
		why += fmt.Sprintf("; the server's time per READ of the same size x%.2f (rate without it %+.0f %%)", outside, 100*own)
	}
	switch {
	case math.Abs(rate) >= RateChange && controlled && math.Abs(own) < RateChange:
		return NoChange, why + ": the change came from outside the mount"
	case rate >= RateChange:
		return Helped, why
	case rate <= -RateChange:
		return Hurt, why
	case waste <= -OverReadChange:
		return Helped, why
	case waste >= OverReadChange:
		return Hurt, why
	}
	return NoChange, why
}

// The control's conditions (Judge): how far the READs' size and the READs in flight may move
// for the server's time per READ to be the server's own.
const (
	ControlReadSizeChange = 0.10
	ControlInFlightRise   = 0.10
)

// outsideShare returns how many times longer the server took per READ after the change than
// before, when the change cannot have caused that (Judge): the same READ size within
// ControlReadSizeChange, over-read held within OverReadChange, and READs in flight up by less
// than ControlInFlightRise. ok is false when any of that fails or a window has no READ timing.
func outsideShare(before, after Evidence) (factor float64, ok bool) {
	if before.Reads == 0 || after.Reads == 0 || before.ReadRTTSeconds <= 0 || after.ReadRTTSeconds <= 0 ||
		before.AvgReadBytes <= 0 || before.InFlight <= 0 {
		return 0, false
	}
	if math.Abs(after.AvgReadBytes/before.AvgReadBytes-1) >= ControlReadSizeChange ||
		math.Abs(after.OverRead-before.OverRead) >= OverReadChange ||
		after.InFlight/before.InFlight-1 >= ControlInFlightRise {
		return 0, false
	}
	perRead := func(e Evidence) float64 { return e.ReadRTTSeconds / float64(e.Reads) }
	return perRead(after) / perRead(before), true
}

// Change is one change of a superblock's read-ahead with its verdict: what apply --measure
// prints and keeps in the journal, and what the agent exports for its own writes.
type Change struct {
	Device     string    `json:"device"`
	MountPoint string    `json:"mountpoint"`
	FromKB     int       `json:"from_kb"`
	ToKB       int       `json:"to_kb"`
	At         time.Time `json:"at"`
	Before     Evidence  `json:"before"`
	After      Evidence  `json:"after"`
	Verdict    Verdict   `json:"verdict"`
	Reason     string    `json:"reason"`
}

// NewChange judges the change of dev's read-ahead from fromKB to toKB at at.
func NewChange(dev, mountPoint string, fromKB, toKB int, at time.Time, before, after Evidence) Change {
	v, why := Judge(before, after)
	return Change{Device: dev, MountPoint: mountPoint, FromKB: fromKB, ToKB: toKB, At: at.UTC(),
		Before: before, After: after, Verdict: v, Reason: why}
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
