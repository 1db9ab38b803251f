package readahead

import (
	"fmt"
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

// Judge compares the windows of traffic before and after a change of read-ahead:
//
//   - too_little_traffic: either window has less than MinJudgedBytes of application reads;
//   - helped: application read bytes per second rose by RateChange or more, or held within
//     RateChange while over-read fell by OverReadChange or more (the same reads for fewer
//     server bytes);
//   - hurt: the rate fell by RateChange or more, or held while over-read rose by
//     OverReadChange or more;
//   - no_change: anything else.
//
// The reason names the figures. A workload that changes between the windows is not told
// apart from an effect of the change; the windows should be of equal length and close.
func Judge(before, after Evidence) (Verdict, string) {
	if before.AppReadBytes < MinJudgedBytes || after.AppReadBytes < MinJudgedBytes {
		return TooLittleTraffic, fmt.Sprintf("application reads %s before, %s after; each window needs %s",
			mib(before.AppReadBytes), mib(after.AppReadBytes), mib(MinJudgedBytes))
	}
	rate := after.AppBytesPerSecond/before.AppBytesPerSecond - 1
	waste := after.OverRead - before.OverRead
	why := fmt.Sprintf("application reads %.1f -> %.1f MiB/s (%+.0f %%), over-read %.2f -> %.2f",
		before.AppBytesPerSecond/(1<<20), after.AppBytesPerSecond/(1<<20), 100*rate, before.OverRead, after.OverRead)
	switch {
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
