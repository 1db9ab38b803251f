package readahead

import (
	"slices"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

const interval = 5 * time.Second

// intervalAt returns 5 s of evidence at read-ahead ra KiB: application reads at rate MiB/s
// with the given over-read, in READs of readKiB, 4 ms each, by readers that open a file
// a second (a change reaches only files opened after it).
func intervalAt(ra int, rateMiB, overRead float64, readKiB int) Evidence {
	e := Evidence{Seconds: interval.Seconds(), ReadAheadKB: ra, RSize: 1 << 20,
		AppReadBytes: uint64(rateMiB * interval.Seconds() * (1 << 20)), Opens: 5, OpensCounted: true}
	e.ServerReadBytes = uint64(float64(e.AppReadBytes) * overRead)
	e.Reads = e.ServerReadBytes / uint64(readKiB<<10)
	e.ReadRTTSeconds = 0.004 * float64(e.Reads)
	e.derive()
	return e
}

// seqAt and randomAt are a sequential reader's interval (READs of one rsize) and a random
// reader's (READs of 16 KiB).
func seqAt(ra int, rateMiB, overRead float64) Evidence {
	return intervalAt(ra, rateMiB, overRead, 1024)
}
func randomAt(ra int, rateMiB float64) Evidence { return intervalAt(ra, rateMiB, 1.0, 16) }

// mappedAt is an interval of readers of mmap'd files: READs of one rsize at serverMiB a
// second, and no application bytes (mountstats does not count mapped reads).
func mappedAt(ra int, serverMiB float64) Evidence {
	e := intervalAt(ra, serverMiB, 1.0, 1024)
	e.AppReadBytes, e.OverRead = 0, 0
	e.derive()
	return e
}

// faulting gives an interval the per-pod collector's fault figures: its READ payload,
// started in faults, perFaultKiB of it for each read fault. A reader in order takes a fault
// per 64 KiB it maps; one at random a fault per access, each reading the window around it
// unless the cache held some of it.
func faulting(e Evidence, perFaultKiB int) Evidence {
	e.Faults = &FaultEvidence{ReadBytes: e.ServerReadBytes, Faults: e.ServerReadBytes / uint64(perFaultKiB<<10)}
	return e
}

func newTestController() *Controller { return NewController(1024, 15360, interval) }

// run feeds the controller one interval and applies what it decides, as the agent does.
func run(c *Controller, e Evidence, now time.Time, stalled bool) Step {
	s := c.Decide(e, now, stalled)
	c.Applied(s, e, now)
	return s
}

// scriptStep is one interval of a scripted run: the evidence, whether the server stalled, and
// the step the controller must take.
type scriptStep struct {
	e       Evidence
	stalled bool
	kb      int
	reason  Reason
}

// runScript feeds the controller each interval in turn and fails at the first step that
// is not the one wanted.
func runScript(t *testing.T, c *Controller, script []scriptStep) {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	for i, w := range script {
		s := run(c, w.e, now, w.stalled)
		if s.ToKB != w.kb || s.Reason != w.reason {
			t.Fatalf("interval %d: %d -> %d KiB (%s: %s), want %d KiB (%s)", i, s.FromKB, s.ToKB, s.Reason, s.Why, w.kb, w.reason)
		}
		now = now.Add(interval)
	}
}

// runFor feeds the controller n intervals of workload(ra) from now, and returns the
// read-ahead after each and the steps that changed it.
func runFor(c *Controller, ra, n int, now time.Time, workload func(ra int) Evidence) (path []int, changes []Step, end time.Time) {
	for range n {
		s := run(c, workload(ra), now, false)
		if s.Changed() {
			changes = append(changes, s)
		}
		ra = s.ToKB
		path = append(path, ra)
		now = now.Add(interval)
	}
	return path, changes, now
}

func TestControllerStep(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	for _, tt := range []struct {
		name    string
		e       Evidence
		stalled bool
		want    int
		reason  Reason
	}{
		{"kernel default: up to one rsize, without traffic", Evidence{ReadAheadKB: 128}, false, 1024, ReasonBounds},
		{"above the cap: down to it", seqAt(65536, 100, 1.0), false, 15360, ReasonBounds},
		{"idle: hold", seqAt(4096, 1, 1.0), false, 4096, HoldTraffic},
		{"read through mmap: hold", mappedAt(4096, 100), false, 4096, HoldMapped},
		// 500 MiB of fault READs for faults of 64 KiB each: in order, the window is used.
		{"read through mmap in order, faults seen: hold", faulting(mappedAt(4096, 100), 64), false, 4096, HoldMapped},
		// 15 MiB read around each fault: 240 times the 64 KiB a fault maps; the window that
		// fetches what is touched is 64 KiB, under the kernel's 128.
		{"read through mmap at random at 15360, faults seen: to 128", faulting(mappedAt(15360, 100), 15360), false, 128, ReasonMappedRandom},
		// Half of each window in the cache already: 512 KiB per fault, 8 times.
		{"read through mmap at random at 4096, some cached: to what is touched", faulting(mappedAt(4096, 100), 512), false, 512, ReasonMappedRandom},
		{"read through mmap at random at the mapped floor: hold", faulting(mappedAt(128, 100), 1024), false, 128, HoldLimit},
		// Too few fault bytes to say.
		{"a little mmap at random: idle", faulting(mappedAt(4096, 1), 4096), false, 4096, HoldTraffic},
		{"a little read through mmap: idle", mappedAt(4096, 1), false, 4096, HoldTraffic},
		// 15 MiB read of 16.5 MiB sent: a slow read(2) reader, not a mapped one.
		{"slow reader just under a step: idle", seqAt(4096, 3, 1.1), false, 4096, HoldTraffic},
		{"wasting: halve", seqAt(15360, 21, 3.9), false, 7680, ReasonOverRead},
		{"wasting at the floor: hold", seqAt(1024, 21, 2.0), false, 1024, HoldLimit},
		{"streaming: double", seqAt(1024, 100, 1.0), false, 2048, ReasonStreaming},
		{"streaming near the cap: to the cap", seqAt(8192, 100, 1.0), false, 15360, ReasonStreaming},
		{"streaming at the cap: hold", seqAt(15360, 100, 1.0), false, 15360, HoldLimit},
		{"streaming with over-read in the gap: hold", seqAt(2048, 100, 1.2), false, 2048, HoldSteady},
		{"READs of half an rsize still stream", intervalAt(2048, 100, 1.0, 512), false, 4096, ReasonStreaming},
		{"READs of a quarter rsize: hold", intervalAt(2048, 100, 1.0, 256), false, 2048, HoldSteady},
		{"random reader: hold", randomAt(1024, 30), false, 1024, HoldSteady},
		{"random reader above one rsize: hold", randomAt(8192, 30), false, 8192, HoldSteady},
		// 5 s at 16 MiB/s in READs of 1 MiB: 80 READs, enough for a step.
		{"slow streaming reader: double", seqAt(1024, 16, 1.0), false, 2048, ReasonStreaming},
		{"streaming over 15 MiB: hold", seqAt(1024, 3, 1.0), false, 1024, HoldTraffic},
		{"streaming, no file opened: hold", noOpens(seqAt(1024, 100, 1.0)), false, 1024, HoldNoOpens},
		{"streaming, a pod thrashing: hold", func() Evidence { e := seqAt(1024, 100, 1.0); e.Thrashing = true; return e }(), false, 1024, HoldThrashing},
		// A mapped reader's first misses, before its fault READs say how it reads.
		{"streaming, mapped readers missing the cache: hold", mappedStarting(seqAt(1024, 100, 1.0), MinRandomMajorFaults), false, 1024, HoldMapped},
		{"streaming, mapped readers' faults found in the cache: double", mappedStarting(seqAt(1024, 100, 1.0), MinRandomMajorFaults-1), false, 2048, ReasonStreaming},
		// The collector loaded, or could not be read, during the interval: no figures to hold on.
		{"streaming, the collector's faults unseen: hold", func() Evidence { e := seqAt(1024, 100, 1.0); e.FaultsUnseen = true; return e }(), false, 1024, HoldFaultsUnseen},
		{"wasting, the collector's faults unseen: halve all the same", func() Evidence { e := seqAt(15360, 21, 3.9); e.FaultsUnseen = true; return e }(), false, 7680, ReasonOverRead},
		{"wasting, no file opened: halve all the same", noOpens(seqAt(15360, 21, 3.9)), false, 7680, ReasonOverRead},
		{"stalled: hold whatever the figures", seqAt(15360, 21, 3.9), true, 15360, HoldStalled},
		{"stalled out of bounds: hold", Evidence{ReadAheadKB: 128}, true, 128, HoldStalled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestController().Decide(tt.e, t0, tt.stalled)
			if s.ToKB != tt.want || s.Reason != tt.reason {
				t.Errorf("Decide = %d KiB (%s: %s), want %d KiB (%s)", s.ToKB, s.Reason, s.Why, tt.want, tt.reason)
			}
			if s.FromKB != tt.e.ReadAheadKB || s.Why == "" {
				t.Errorf("step %+v: want FromKB %d and a reason", s, tt.e.ReadAheadKB)
			}
		})
	}
}

// TestStreaming: the average READ against the largest read-ahead makes.
func TestStreaming(t *testing.T) {
	for _, tt := range []struct {
		e    Evidence
		want bool
	}{
		{seqAt(1024, 100, 1.0), true},
		{randomAt(1024, 100), false},
		// A 128 KiB window makes READs of 128 KiB at most, whatever the rsize.
		{intervalAt(128, 100, 1.0, 128), true},
		{intervalAt(128, 100, 1.0, 32), false},
		{Evidence{ReadAheadKB: 1024, RSize: 1 << 20}, false}, // no READs
	} {
		if got := tt.e.Streaming(); got != tt.want {
			t.Errorf("ra %d KiB, average READ %.0f KiB, %d READs: Streaming() = %v, want %v",
				tt.e.ReadAheadKB, tt.e.AvgReadBytes/1024, tt.e.Reads, got, tt.want)
		}
	}
}

// TestControllerGrowsToCap: a streaming reader that gains from each doubling goes from one
// rsize to the cap in four changes, each followed by an interval of settling and judged on
// the next, where the next rise is made; then it holds.
func TestControllerGrowsToCap(t *testing.T) {
	c := newTestController()
	rate := 100.0
	path, changes, _ := runFor(c, 1024, 12, time.Unix(1_700_000_000, 0), func(ra int) Evidence {
		rate *= 1.1
		return seqAt(ra, rate*float64(ra)/1024, 1.0)
	})
	want := []int{2048, 2048, 4096, 4096, 8192, 8192, 15360, 15360, 15360, 15360, 15360, 15360}
	for i := range want {
		if path[i] != want[i] {
			t.Fatalf("path %v, want %v", path, want)
		}
	}
	if len(changes) != 4 {
		t.Errorf("changes %+v, want four rises", changes)
	}
}

// TestControllerSettles: after a change, a decision within three quarters of an interval
// holds (interval), one an interval later holds (settling), and the one after that judges
// the change and, the rise kept, makes the next.
func TestControllerSettles(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	run(c, seqAt(1024, 100, 1.0), now, false)
	if s := c.Decide(seqAt(2048, 100, 1.0), now.Add(interval/2), false); s.Changed() || s.Reason != HoldInterval {
		t.Errorf("half an interval later: %+v, want a hold (interval)", s)
	}
	if s := run(c, seqAt(2048, 100, 1.0), now.Add(interval), false); s.Changed() || s.Reason != HoldSettling {
		t.Errorf("an interval later: %+v, want a hold (settling)", s)
	}
	if s := run(c, seqAt(2048, 130, 1.0), now.Add(2*interval), false); s.Verdict != Helped || s.ToKB != 4096 {
		t.Errorf("two intervals later: %+v, want the rise judged helped and another rise", s)
	}
}

// TestControllerUndoesHurt: a rise judged hurt is undone at once, and the value before it
// becomes a ceiling for HoldIntervals intervals; then the controller may try again.
func TestControllerUndoesHurt(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	if s := run(c, seqAt(1024, 100, 1.0), now, false); s.ToKB != 2048 {
		t.Fatalf("first step %+v, want 2048", s)
	}
	now = now.Add(interval)
	run(c, seqAt(2048, 80, 1.0), now, false) // settling
	now = now.Add(interval)
	if s := run(c, seqAt(2048, 60, 1.0), now, false); s.Changed() || s.Reason != HoldSettling || s.Verdict != "" {
		t.Fatalf("a first interval 40 %% slower without waste: %+v, want one more interval of settling", s)
	}
	now = now.Add(interval)
	s := run(c, seqAt(2048, 60, 1.0), now, false)
	if s.ToKB != 1024 || s.Reason != ReasonHurt || s.Verdict != Hurt {
		t.Fatalf("after a 40 %% loss: %+v, want back to 1024 (hurt)", s)
	}
	if ceil, _ := c.Limits(now); ceil != 1024 {
		t.Errorf("ceiling %d, want 1024", ceil)
	}
	// Still streaming at 1024: held by the ceiling for the hold, then doubled again.
	grew := -1
	for i := range HoldIntervals + 2 {
		now = now.Add(interval)
		s := run(c, seqAt(1024, 100, 1.0), now, false)
		if s.Changed() {
			grew = i
			break
		}
		if s.Reason != HoldLimit && s.Reason != HoldSettling {
			t.Fatalf("interval %d: %+v, want a hold on the ceiling", i, s)
		}
	}
	if grew != HoldIntervals-1 {
		t.Errorf("grew again after interval %d, want %d", grew, HoldIntervals-1)
	}
}

// TestControllerKeepsRiseWithoutGain: a streaming reader that reads as fast at every window
// (a server bound, not the window) fetches nothing it does not read at any of them, so
// each rise is judged no_change and kept: it costs the reader nothing. The controller
// reaches the cap in four rises, one every two intervals, and holds there until its first
// probe.
func TestControllerKeepsRiseWithoutGain(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{seqAt(1024, 90, 1.0), false, 2048, ReasonStreaming},
		{seqAt(2048, 91, 1.0), false, 2048, HoldSettling},
		{seqAt(2048, 89, 1.0), false, 4096, ReasonStreaming}, // -1 %: kept, and the next rise
		{seqAt(4096, 90, 1.0), false, 4096, HoldSettling},
		{seqAt(4096, 92, 1.0), false, 8192, ReasonStreaming}, // +3 %
		{seqAt(8192, 90, 1.0), false, 8192, HoldSettling},
		{seqAt(8192, 86, 1.01), false, 15360, ReasonStreaming}, // -7 %, over-read +0.01
		{seqAt(15360, 90, 1.0), false, 15360, HoldSettling},
		{seqAt(15360, 90, 1.0), false, 15360, HoldLimit},
	})
}

// TestControllerHoldEndsOnItsTick: the agent's ticks drift by milliseconds. A ceiling
// learned on a tick that came 3 ms late still ends at the tick HoldIntervals intervals
// on, though that one comes 3 ms early.
func TestControllerHoldEndsOnItsTick(t *testing.T) {
	c := newTestController()
	t0 := time.Unix(1_700_000_000, 0)
	ra := 1024
	for i := range 3 + HoldIntervals {
		jitter := -3 * time.Millisecond
		if i <= 2 {
			jitter = 3 * time.Millisecond
		}
		e := seqAt(ra, 90, 1.0)
		if i == 2 {
			e = seqAt(ra, 90, 1.1) // the rise to 2048 wasted
		}
		s := run(c, e, t0.Add(time.Duration(i)*interval+jitter), false)
		ra = s.ToKB
		switch i {
		case 2:
			if s.Reason != ReasonNoGain {
				t.Fatalf("tick 2: %+v, want the rise undone", s)
			}
		case 2 + HoldIntervals:
			if s.Reason != ReasonStreaming {
				t.Fatalf("tick %d, %d intervals after the undo: %+v, want the rise tried again", i, HoldIntervals, s)
			}
			return
		default:
			if i > 2 && s.Changed() {
				t.Fatalf("tick %d: %+v, want a hold under the ceiling", i, s)
			}
		}
	}
	t.Fatal("no tick tried the rise again")
}

// TestControllerKeepsRisesThatDoNotHurt: a rise that fetches no more than is read is kept
// on its first judged interval whatever it gained, short of a loss of RateChange: 7 %
// faster, 3 % faster, 5 % and 9 % slower.
func TestControllerKeepsRisesThatDoNotHurt(t *testing.T) {
	for _, gain := range []float64{1.07, 1.03, 0.95, 0.91} {
		c := newTestController()
		now := time.Unix(1_700_000_000, 0)
		run(c, seqAt(1024, 90, 1.0), now, false)
		run(c, seqAt(2048, 90, 1.0), now.Add(interval), false)
		s := run(c, seqAt(2048, 90*gain, 1.0), now.Add(2*interval), false)
		if s.Verdict != NoChange || s.FromKB != 2048 || s.ToKB != 4096 {
			t.Errorf("gain %.2f: %+v, want the rise judged no_change, kept, and the next rise", gain, s)
		}
	}
}

// TestControllerUndoesRiseThatWastes: a rise that reads 9 % faster is kept at once while
// over-read holds, and undone at once when over-read rose by RiseWaste (the window outgrew
// its readers' memory). One that raised over-read and read RateChange faster is judged
// again with the next interval, and kept only when the two read RateChange faster
// together: a rise to 8192 KiB among sixteen readers in 64 MiB read 26 % faster on one
// interval and half as fast on the next, its waste growing as the cache filled.
func TestControllerUndoesRiseThatWastes(t *testing.T) {
	for _, tt := range []struct {
		gain, overRead   float64 // the first interval after settling
		gain2, overRead2 float64 // the second, when it is judged again
		kept             bool
	}{
		{1.09, 1.01, 0, 0, true},
		{1.09, 1.05, 0, 0, false},
		{1.09, 1.10, 0, 0, false},
		{1.12, 1.10, 1.12, 1.10, true},
		{1.26, 1.07, 0.68, 1.36, false},
	} {
		c := newTestController()
		now := time.Unix(1_700_000_000, 0)
		run(c, seqAt(1024, 90, 1.0), now, false)
		run(c, seqAt(2048, 90, 1.0), now.Add(interval), false)
		s := run(c, seqAt(2048, 90*tt.gain, tt.overRead), now.Add(2*interval), false)
		if tt.gain2 > 0 {
			if s.Changed() || s.Reason != HoldJudging || s.Verdict != "" {
				t.Fatalf("gain %.2f, over-read 1.00 -> %.2f: %+v, want a hold (judging) without a verdict", tt.gain, tt.overRead, s)
			}
			s = run(c, seqAt(2048, 90*tt.gain2, tt.overRead2), now.Add(3*interval), false)
		}
		if kept := s.ToKB >= 2048 && s.Reason != ReasonNoGain && s.Reason != ReasonHurt; kept != tt.kept {
			t.Errorf("gains %.2f, %.2f, over-read 1.00 -> %.2f, %.2f: %+v; want the rise kept: %v", tt.gain, tt.gain2, tt.overRead, tt.overRead2, s, tt.kept)
		}
		if !tt.kept && s.ToKB != 1024 {
			t.Errorf("gains %.2f, %.2f: %+v, want 1024 KiB back", tt.gain, tt.gain2, s)
		}
	}
}

// TestControllerSettlesAgainAfterSlowInterval: a rise whose first interval reads 10 % or
// more slower while over-read stays is given one more interval of settling and judged on
// the next alone (sixteen lab readers in 64 MiB, files open 13 s: 1024 -> 2048 KiB read
// 49.3 -> 24.6 MiB/s, over-read 1.00 -> 1.01, where 1024 read 31 to 55 before and after).
// Judged on the next, it is kept when it helped or read as fast (and the next rise made),
// and undone as hurt when it read slower again; a rise that also raised over-read by
// RiseWaste is undone at once.
func TestControllerSettlesAgainAfterSlowInterval(t *testing.T) {
	for _, tt := range []struct {
		name           string
		rate, overRead float64   // the first interval after settling
		rate2          []float64 // the intervals after it, when it is settled again
		want           Reason
	}{
		{"slow, then faster", 24.6, 1.01, []float64{56}, ReasonStreaming},
		{"slow, then as fast", 24.6, 1.01, []float64{50}, ReasonStreaming},
		{"slow twice", 24.6, 1.01, []float64{33}, ReasonHurt},
		{"slow and wasteful", 33.2, 1.11, nil, ReasonHurt},
	} {
		c := newTestController()
		now := time.Unix(1_700_000_000, 0)
		run(c, seqAt(1024, 49.3, 1.0), now, false)
		run(c, seqAt(2048, 40, 1.0), now.Add(interval), false)
		now = now.Add(2 * interval)
		s := run(c, seqAt(2048, tt.rate, tt.overRead), now, false)
		if tt.rate2 != nil {
			if s.Changed() || s.Reason != HoldSettling || s.Verdict != "" {
				t.Fatalf("%s: %+v, want one more interval of settling without a verdict", tt.name, s)
			}
			for _, r := range tt.rate2 {
				now = now.Add(interval)
				s = run(c, seqAt(2048, r, 1.0), now, false)
			}
		}
		if s.Reason != tt.want {
			t.Errorf("%s: %+v, want %s", tt.name, s, tt.want)
		}
		if kept := s.ToKB >= 2048; kept != (tt.want == ReasonStreaming) {
			t.Errorf("%s: ends at %d KiB", tt.name, s.ToKB)
		}
	}
}

// streams gives e the READs in flight of n streams, each with one window of READs out
// (Evidence.WindowBound n).
func streams(e Evidence, n float64) Evidence {
	e.ReadRTTSeconds = n * e.WindowReads * e.Seconds
	e.derive()
	return e
}

// TestControllerAllowsRiseItsLead: a rise's first interval counts the larger lead that the
// files opened after it fetch ahead of their readers (leadFill). Sixteen readers in 64 MiB,
// 14 streams with their window in flight: 2048 -> 4096 KiB read 110.7 -> 74.9 MiB/s with
// over-read 0.99 -> 1.05, within the 0.15 their leads can add, and the rise is judged once
// more on the next interval alone: kept when that reads as fast, undone when it reads slower
// again. Over-read up by 0.26, past RiseWaste and the lead, undoes it at once.
func TestControllerAllowsRiseItsLead(t *testing.T) {
	for _, tt := range []struct {
		name     string
		overRead float64   // the first interval after settling, at 74.9 MiB/s
		next     []float64 // the rates of the intervals after it
		want     Reason
		wantKB   int
	}{
		{"its lead, then as fast", 1.05, []float64{104}, ReasonStreaming, 8192},
		{"its lead, then slower again", 1.05, []float64{80}, ReasonHurt, 2048},
		{"past its lead", 1.25, nil, ReasonHurt, 2048},
	} {
		c := newTestController()
		now := time.Unix(1_700_000_000, 0)
		run(c, seqAt(1024, 90, 1.0), now, false)
		run(c, seqAt(2048, 90, 1.0), now.Add(interval), false)
		s := run(c, streams(seqAt(2048, 110.7, 0.99), 14), now.Add(2*interval), false)
		if s.ToKB != 4096 {
			t.Fatalf("%s: %+v, want the rise to 4096 KiB", tt.name, s)
		}
		run(c, seqAt(4096, 90, 1.0), now.Add(3*interval), false)
		now = now.Add(4 * interval)
		s = run(c, streams(seqAt(4096, 74.9, tt.overRead), 14), now, false)
		if tt.next != nil {
			if s.Changed() || s.Reason != HoldSettling || s.Verdict != "" {
				t.Fatalf("%s: %+v, want one more interval of settling without a verdict", tt.name, s)
			}
			for _, r := range tt.next {
				now = now.Add(interval)
				s = run(c, streams(seqAt(4096, r, 1.0), 14), now, false)
			}
		}
		if s.Reason != tt.want || s.ToKB != tt.wantKB {
			t.Errorf("%s: %+v, want %s to %d KiB", tt.name, s, tt.want, tt.wantKB)
		}
	}
}

// noOpens is e read by files all opened before it.
func noOpens(e Evidence) Evidence {
	e.Opens = 0
	return e
}

// TestControllerJudgesOnFilesOpenedAfter: readers that keep their files open keep the
// window they opened with (file_ra_state_init), so a rise is judged on no interval in
// which no file was opened: the controller holds, and neither takes a next rise on the
// old files' figures nor judges the rise on them; the first interval with opens judges it.
func TestControllerJudgesOnFilesOpenedAfter(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{seqAt(1024, 90, 1.0), false, 2048, ReasonStreaming},
		{noOpens(seqAt(2048, 90, 1.0)), false, 2048, HoldSettling},
		{noOpens(seqAt(2048, 60, 1.0)), false, 2048, HoldNoOpens}, // slower, on the old windows
		{noOpens(seqAt(2048, 90, 1.0)), false, 2048, HoldNoOpens},
		{seqAt(2048, 110, 1.0), false, 4096, ReasonStreaming}, // judged helped on new files, and up again
	})
}

// TestControllerMeasuresBaseline: a rise kept for reading RateChange faster on two intervals
// (it raised over-read) is not the next rise's "before": those intervals were chosen for
// reading fast. The controller holds an interval (baseline) and rises from a fresh one.
func TestControllerMeasuresBaseline(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{seqAt(1024, 90, 1.0), false, 2048, ReasonStreaming},
		{seqAt(2048, 92, 1.0), false, 2048, HoldSettling},
		{seqAt(2048, 101, 1.05), false, 2048, HoldJudging},  // +12 %, over-read +0.05
		{seqAt(2048, 101, 1.05), false, 2048, HoldBaseline}, // kept on two intervals
		{seqAt(2048, 92, 1.02), false, 4096, ReasonStreaming},
	})
}

// TestControllerUndoesHurtCut: a cut judged hurt is undone, and the value before it becomes
// a floor.
func TestControllerUndoesHurtCut(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	run(c, seqAt(8192, 100, 1.5), now, false)
	now = now.Add(interval)
	run(c, seqAt(4096, 70, 1.0), now, false) // settling
	now = now.Add(interval)
	s := run(c, seqAt(4096, 50, 1.0), now, false)
	if s.ToKB != 8192 || s.Reason != ReasonHurt {
		t.Fatalf("after the cut halved the rate: %+v, want back to 8192", s)
	}
	if _, floor := c.Limits(now); floor != 8192 {
		t.Errorf("floor %d, want 8192", floor)
	}
	now = now.Add(2 * interval)
	if s := run(c, seqAt(8192, 100, 1.5), now, false); s.Changed() || s.Reason != HoldLimit {
		t.Errorf("wasting again above the floor: %+v, want a hold", s)
	}
}

// TestControllerProbeFindsSmallerWindow: readers that read faster at 4096 KiB than at
// 8192 (memory pressure that shows as a lower rate, not as over-read) sit at the cap with
// nothing to say it hurts; a probe finds the smaller window, keeps it, and the ceiling it
// leaves keeps the controller there for the hold.
func TestControllerProbeFindsSmallerWindow(t *testing.T) {
	c := NewController(1024, 8192, interval)
	workload := func(ra int) Evidence {
		if ra > 4096 {
			return seqAt(ra, 25, 1.0)
		}
		return seqAt(ra, 44, 1.0)
	}
	path, changes, now := runFor(c, 8192, ProbeAfter+3, time.Unix(1_700_000_000, 0), workload)
	if len(changes) != 1 || changes[0].Reason != ReasonProbe || path[len(path)-1] != 4096 {
		t.Fatalf("path %v, changes %+v: want one probe to 4096", path, changes)
	}
	if ceil, _ := c.Limits(now); ceil != 4096 {
		t.Errorf("ceiling %d after a probe that helped, want 4096", ceil)
	}
	// For the ceiling's hold: no rise, and probes further down (no faster) undone.
	path, changes, _ = runFor(c, 4096, HoldIntervals-1, now, workload)
	for _, s := range changes {
		if s.ToKB > 4096 || (s.Reason != ReasonProbe && s.Reason != ReasonNoGain) {
			t.Errorf("change %+v under the ceiling, want only probes below it and their undos", s)
		}
	}
	if slices.Max(path) != 4096 {
		t.Errorf("path %v under the ceiling, want 4096 at most, and 4096 held", path)
	}
}

// TestControllerProbesBackOff: a streaming reader at the cap that reads as fast at half
// the window is probed, the probe undone (no_gain), and each next probe waits twice as long.
func TestControllerProbesBackOff(t *testing.T) {
	c := newTestController()
	_, changes, _ := runFor(c, 15360, int(time.Hour/interval), time.Unix(1_700_000_000, 0), func(ra int) Evidence {
		return seqAt(ra, 100, 1.0)
	})
	var probes []int
	for i, s := range changes {
		switch {
		case i%2 == 0 && s.Reason != ReasonProbe, i%2 == 1 && s.Reason != ReasonNoGain:
			t.Fatalf("change %d: %+v, want probes and their undos in turn", i, s)
		case s.Reason == ReasonProbe:
			probes = append(probes, s.ToKB)
		}
	}
	t.Logf("%d probes in an hour", len(probes))
	// Waits of 12, 24, 48, 96, 192 intervals (plus two each for settling and the undo)
	// fill 382 of the hour's 720 intervals with 5 probes; the next waits 384.
	if len(probes) != 5 {
		t.Errorf("%d probes in an hour (%+v), want 5", len(probes), changes)
	}
}

// TestControllerCannotOscillate: a workload whose window wastes above 2048 KiB (readers in a
// small memory cgroup) and streams without waste below it. Without the learned ceiling the
// controller would go 2048 -> 4096 -> 2048 every other step; with it, the tries above 2048
// come further and further apart.
func TestControllerCannotOscillate(t *testing.T) {
	c := newTestController()
	workload := func(ra int) Evidence {
		if ra > 2048 {
			return seqAt(ra, 40, 2.5)
		}
		return seqAt(ra, 60, 1.0)
	}
	const hours = 2
	n := int(hours * time.Hour / interval)
	path, changes, _ := runFor(c, 15360, n, time.Unix(1_700_000_000, 0), workload)
	ra := path[len(path)-1]
	t.Logf("%d changes in %d h, ending at %d KiB", len(changes), hours, ra)
	// 15360 -> 7680 -> 3840 -> 1920: three cuts; then a rise and its undo per hold, the
	// holds doubling from 1 min up to 32 min: 1+2+4+8+16+32+32 min cover the 2 h.
	if len(changes) > 3+2*8 {
		t.Errorf("%d changes in %d h (%d intervals); want at most %d", len(changes), hours, n, 3+2*8)
	}
	if ra > 2048 {
		t.Errorf("ended at %d KiB, want at most 2048", ra)
	}
}

// TestControllerFollowsWorkloadSwitch: a random reader (held at one rsize) turns into a
// sequential reader; the controller reaches the cap within 60 s.
func TestControllerFollowsWorkloadSwitch(t *testing.T) {
	c := newTestController()
	path, _, now := runFor(c, 128, 12, time.Unix(1_700_000_000, 0), func(ra int) Evidence { return randomAt(ra, 30) })
	if ra := path[len(path)-1]; ra != 1024 {
		t.Fatalf("random reader at %d KiB, want 1024", ra)
	}
	rate := 40.0
	path, _, _ = runFor(c, 1024, int(time.Minute/interval), now, func(ra int) Evidence {
		rate *= 1.1
		return seqAt(ra, rate, 1.0)
	})
	for i, ra := range path {
		if ra == 15360 {
			t.Logf("at the cap %s after the switch", time.Duration(i+1)*interval)
			return
		}
	}
	t.Fatalf("path %v a minute after the switch, want the cap", path)
}

// TestControllerStallDropsJudgement: a change followed by a stalled interval is not judged
// on the interval after it (the stall, not the change, cut the rate).
func TestControllerStallDropsJudgement(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	run(c, seqAt(1024, 100, 1.0), now, false)
	now = now.Add(interval)
	if s := run(c, intervalAt(2048, 0, 0, 1024), now, true); s.Changed() {
		t.Fatalf("stalled: %+v", s)
	}
	now = now.Add(interval)
	if s := run(c, seqAt(2048, 50, 1.0), now, false); s.Verdict != "" || s.Reason == ReasonHurt {
		t.Errorf("after the stall: %+v, want no verdict", s)
	}
}

// TestControllerStallDropsJudging: a stall while a rise is being judged on a second
// interval drops that judgement, and leaves no baseline behind: the rise was never kept,
// so the next streaming interval rises at once.
func TestControllerStallDropsJudging(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{seqAt(1024, 90, 1.0), false, 2048, ReasonStreaming},
		{seqAt(2048, 90, 1.0), false, 2048, HoldSettling},
		{seqAt(2048, 101, 1.05), false, 2048, HoldJudging}, // +12 %, over-read +0.05
		{intervalAt(2048, 0, 0, 1024), true, 2048, HoldStalled},
		{seqAt(2048, 92, 1.0), false, 4096, ReasonStreaming},
	})
}

// TestControllerJudgesLateEffects: sixteen readers whose files stay open 14 s, each reading
// with the window it opened its file with, so a change reaches the mount's rate only as
// the files are opened again. They read 22 MiB/s in all at 1024 KiB, 32 at 2048, 44 at
// 4096 and 25 above (memory pressure that shows as a lower rate, not as over-read). Judged
// on the interval after the settling one, the rises to 4096 help and each rise to 8192
// shows as hurt, is given one more interval of settling (it fetched no more than was read)
// and is undone on the next: the window is above 4096 KiB for three intervals per try,
// the tries a learned ceiling's hold apart.
func TestControllerJudgesLateEffects(t *testing.T) {
	const streams, fileSeconds, tick = 16, 14.0, 0.1
	rate := func(kb int) float64 {
		switch {
		case kb > 4096:
			return 25.0 / streams
		case kb > 2048:
			return 44.0 / streams
		case kb > 1024:
			return 32.0 / streams
		}
		return 22.0 / streams
	}
	window := make([]int, streams)     // each reader's window, from its file's open
	reopen := make([]float64, streams) // when each reader opens its next file
	for i := range window {
		window[i], reopen[i] = 128, fileSeconds*float64(i)/streams
	}
	c := newTestController()
	now, clock, ra := time.Unix(1_700_000_000, 0), 0.0, 128
	var path []int
	for range 24 { // two minutes
		mib := 0.0
		for range int(interval.Seconds() / tick) {
			for i := range window {
				if clock >= reopen[i] {
					window[i], reopen[i] = ra, reopen[i]+fileSeconds
				}
				mib += rate(window[i]) * tick
			}
			clock += tick
		}
		now = now.Add(interval)
		s := run(c, seqAt(ra, mib/interval.Seconds(), 1.0), now, false)
		ra = s.ToKB
		path = append(path, ra)
	}
	// Each try above 4096 lasts its two settling intervals and the one that judges it.
	run := 0
	for i, kb := range path {
		if run = 0; kb > 4096 {
			run = 1
			for j := i - 1; j >= 0 && path[j] > 4096; j-- {
				run++
			}
		}
		if run > 3 {
			t.Fatalf("above 4096 KiB for %d intervals in a row at %s (path %v), want at most 3", run, time.Duration(i+1)*interval, path)
		}
	}
	if !slices.Contains(path, 8192) {
		t.Errorf("path %v never tried 8192: the case tests nothing", path)
	}
}

// TestControllerFloorOnePage: the bounds of a mount with an rsize of 1 KiB (one rsize to 15)
// start at one page, which the kernel can hold: a cut below it would be stored as 0,
// read-ahead off.
func TestControllerFloorOnePage(t *testing.T) {
	c := NewController(1, 15, interval)
	if c.MinKB != hostfs.MinReadAheadKB || c.MaxKB != 15 {
		t.Errorf("bounds %d..%d KiB, want %d..15", c.MinKB, c.MaxKB, hostfs.MinReadAheadKB)
	}
	e := intervalAt(hostfs.MinReadAheadKB, 50, 2.0, 1)
	e.RSize = 1024
	if s := c.Decide(e, time.Unix(1_700_000_000, 0), false); s.ToKB != hostfs.MinReadAheadKB || s.Reason != HoldLimit {
		t.Errorf("over-read at one page: %d -> %d KiB (%s: %s), want a hold at %d", s.FromKB, s.ToKB, s.Reason, s.Why, hostfs.MinReadAheadKB)
	}
	if c := NewController(1, 2, interval); c.MinKB != hostfs.MinReadAheadKB || c.MaxKB != hostfs.MinReadAheadKB {
		t.Errorf("bounds 1..2 KiB became %d..%d, want one page", c.MinKB, c.MaxKB)
	}
}

// TestControllerStartsAtLearned: a new superblock of a volume the controller settled on
// before starts there, not at the bound; a learned value outside the bounds is ignored; the
// start is not judged, and the controller goes on from it.
func TestControllerStartsAtLearned(t *testing.T) {
	c := newTestController()
	c.StartAt(4096)
	runScript(t, c, []scriptStep{
		{Evidence{ReadAheadKB: 128}, false, 4096, ReasonLearned},
		{seqAt(4096, 100, 1.0), false, 4096, HoldSettling},
		{seqAt(4096, 100, 1.0), false, 8192, ReasonStreaming},
	})
	c = newTestController()
	c.StartAt(65536)
	runScript(t, c, []scriptStep{{Evidence{ReadAheadKB: 128}, false, 1024, ReasonBounds}})
}

// TestControllerSettled: a value held for lack of room or reason, with no verdict pending, is
// settled; a hold while a change waits, or for lack of traffic, is not.
func TestControllerSettled(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	s := run(c, seqAt(15360, 100, 1.0), now, false)
	if s.Reason != HoldLimit || !c.Settled(s) {
		t.Errorf("at the cap: %+v, settled %v; want learned_limit, settled", s, c.Settled(s))
	}
	s = run(c, seqAt(15360, 1, 1.0), now.Add(interval), false)
	if c.Settled(s) {
		t.Errorf("idle: %+v counts as settled", s)
	}
	c = newTestController()
	run(c, seqAt(1024, 100, 1.0), now, false) // a rise, waiting for its verdict
	if s := run(c, seqAt(2048, 100, 1.0), now.Add(interval), false); c.Settled(s) {
		t.Errorf("settling after a rise: %+v counts as settled", s)
	}
	if s := run(c, noOpens(seqAt(2048, 100, 1.0)), now.Add(2*interval), false); s.Reason != HoldNoOpens || c.Settled(s) {
		t.Errorf("a rise waiting for files opened after it: %+v, settled %v; want no_opens, not settled", s, c.Settled(s))
	}
	// A cut for mapped readers at random whose files were opened before it: settled, the
	// value the volume's next superblock starts at.
	c = newTestController()
	run(c, sharedAt(1024, 20), now, false)
	run(c, sharedAt(128, 20), now.Add(interval), false)
	stale := sharedAt(128, 20)
	stale.Faults.ReadBytes *= 8 // each major fault still reads 1024 KiB
	if s := run(c, stale, now.Add(2*interval), false); s.Reason != HoldLimit || !c.Settled(s) || s.ToKB != 128 || s.Verdict != "" {
		t.Errorf("a mapped cut waiting for faults at the new window: %+v, settled %v; want 128 KiB, learned_limit, no verdict yet, settled", s, c.Settled(s))
	}
}

// TestControllerMappedRandom: readers of a mapped file at random offsets, seen through the
// per-pod collector, take the window below one rsize, to the kernel's 128 KiB, in one step;
// it holds while no file is opened after it, is judged on the read faults served per second
// once one is, and stays there while the mount is idle; read(2) traffic then takes it back
// to the rule's floor.
func TestControllerMappedRandom(t *testing.T) {
	// faultsPerSecond read faults a second, each missing the page cache and reading
	// perFaultKiB: the window around it, less what the cache held.
	random := func(ra int, faultsPerSecond float64, perFaultKiB int) Evidence {
		e := faulting(mappedAt(ra, faultsPerSecond*float64(perFaultKiB)/1024), perFaultKiB)
		e.Faults.MajorFaults, e.Faults.FilemapFaults = e.Faults.Faults, e.Faults.Faults
		return e
	}
	runScript(t, newTestController(), []scriptStep{
		{e: random(15360, 6, 15360), kb: 128, reason: ReasonMappedRandom},
		{e: random(128, 6, 15360), kb: 128, reason: HoldSettling},
		{e: noOpens(random(128, 6, 15360)), kb: 128, reason: HoldNoOpens},
		// NFSv4 counts no opens, but the faults still read 15360 KiB each: the reader's
		// file was opened before the change.
		{e: v4(random(128, 6, 15360)), kb: 128, reason: HoldLimit},
		// A new reader opened the file at 128 KiB: 25 times the faults served.
		{e: random(128, 150, 128), kb: 128, reason: HoldLimit},
		{e: seqAt(128, 0.5, 1.0), kb: 128, reason: HoldTraffic},
		{e: seqAt(128, 100, 1.0), kb: 1024, reason: ReasonBounds},
	})
	// Hurt: fewer faults served after the change; back to where it was.
	runScript(t, newTestController(), []scriptStep{
		// 1709 KiB per fault of 4096 KiB read around it: 26.7 times what is touched.
		{e: random(4096, 60, 1709), kb: 152, reason: ReasonMappedRandom},
		{e: random(152, 60, 152), kb: 152, reason: HoldSettling},
		{e: random(152, 20, 152), kb: 4096, reason: ReasonHurt},
		// Not lowered again while the floor learned from the hurt holds.
		{e: random(4096, 60, 1709), kb: 4096, reason: HoldSettling},
		{e: random(4096, 60, 1709), kb: 4096, reason: HoldLimit},
	})
	// Faults still at the window the readers' files were opened with: not judged, lowered
	// on by what they touch; the readers stop before a verdict: kept, and the value holds
	// while the mount is idle.
	runScript(t, newTestController(), []scriptStep{
		{e: random(4096, 60, 1709), kb: 152, reason: ReasonMappedRandom},
		{e: random(152, 60, 1709), kb: 152, reason: HoldSettling},
		{e: v4(random(152, 60, 1709)), kb: 128, reason: ReasonMappedRandom},
		{e: random(128, 60, 1709), kb: 128, reason: HoldSettling},
		{e: random(128, 60, 1709), kb: 128, reason: HoldLimit},
		{e: mappedAt(128, 0), kb: 128, reason: HoldTraffic},
	})
}

// v4 is e on an NFSv4 mount, which counts no file opens.
func v4(e Evidence) Evidence { e.Opens, e.OpensCounted = 0, false; return e }

// sharedAt is an interval of a superblock two pods share: one reads its files in order with
// read(2) at 100 MiB/s, the other a mapped file at random, faultsPerSecond read faults a
// second, each missing the page cache (a major fault) and reading the window around it.
func sharedAt(ra int, faultsPerSecond float64) Evidence {
	e := seqAt(ra, 100, 1.0)
	faults := uint64(faultsPerSecond * e.Seconds)
	mapped := faults * uint64(min(ra, 15360)<<10)
	e.ServerReadBytes += mapped
	e.Faults = &FaultEvidence{ReadBytes: mapped, Faults: faults, MajorFaults: faults, FilemapFaults: faults}
	e.derive()
	return e
}

// fetching sets the READ payload of an interval's faults to perFaultKiB for each read fault.
func fetching(e Evidence, perFaultKiB uint64) Evidence {
	e.Faults.ReadBytes = e.Faults.Faults * perFaultKiB << 10
	return e
}

// missing sets how many of an interval's faults past fault-around missed the page cache.
func missing(e Evidence, majors uint64) Evidence {
	e.Faults.MajorFaults = majors
	return e
}

// TestControllerMappedRandomShared: on a superblock shared with a pod that streams with
// read(2), the window lowered below one rsize for a pod reading a mapped file at random
// stays there while that pod's faults keep missing the page cache: the streaming pod's
// read(2) neither takes it back to the rule's floor nor grows it. Once the faults stop,
// the floor comes back.
func TestControllerMappedRandomShared(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{e: sharedAt(1024, 6), kb: 128, reason: ReasonMappedRandom},
		{e: sharedAt(128, 60), kb: 128, reason: HoldSettling},
		// Ten times the faults served: kept; at 128 KiB the faults fetch twice what they
		// map, no longer "random" by over-read, but they still miss the cache.
		{e: sharedAt(128, 60), kb: 128, reason: HoldLimit},
		// Fewer misses than the controller lowers for, but misses still: held.
		{e: missing(sharedAt(128, 60), 8), kb: 128, reason: HoldMapped},
		{e: seqAt(128, 100, 1.0), kb: 1024, reason: ReasonBounds},
	})
	// Faults that fetch only twice what they map but miss at random: halved at least, on
	// to the floor as long as they do.
	runScript(t, newTestController(), []scriptStep{
		{e: fetching(sharedAt(1024, 60), 128), kb: 512, reason: ReasonMappedRandom},
		{e: fetching(sharedAt(512, 60), 128), kb: 512, reason: HoldSettling},
		{e: fetching(sharedAt(512, 60), 128), kb: 256, reason: ReasonMappedRandom},
	})
	// A few misses, as of a program started from the mount: not lowered, but no rise on
	// them either; the next interval without misses rises.
	runScript(t, newTestController(), []scriptStep{
		{e: missing(fetching(sharedAt(1024, 6), 128), 10), kb: 1024, reason: HoldMapped},
		{e: seqAt(1024, 100, 1.0), kb: 2048, reason: ReasonStreaming},
	})
	// A reader in order through mmap takes a major fault only where it starts: the
	// streaming pod's read(2) takes the window back to the floor.
	inOrder := func(e Evidence) Evidence { e.Faults.MajorFaults = 1; return e }
	runScript(t, newTestController(), []scriptStep{
		{e: sharedAt(1024, 6), kb: 128, reason: ReasonMappedRandom},
		{e: inOrder(sharedAt(128, 60)), kb: 1024, reason: ReasonBounds},
	})
}

// TestControllerThrashingBelowRsize: readers in a pod that thrashes its page cache
// (Evidence.Thrashing) and waste at one rsize have their window halved below it, down to
// MappedFloorKB; the smaller window stays for a learned while after the pod stops
// thrashing, instead of going back into the bounds at once. Without a thrashing pod the
// same waste stops at one rsize.
func TestControllerThrashingBelowRsize(t *testing.T) {
	thrashing := func(e Evidence) Evidence { e.Thrashing = true; return e }
	runScript(t, newTestController(), []scriptStep{
		{e: thrashing(seqAt(1024, 20, 2.0)), kb: 512, reason: ReasonOverRead},
		{e: thrashing(seqAt(512, 20, 2.0)), kb: 512, reason: HoldSettling},
		{e: thrashing(seqAt(512, 20, 2.0)), kb: 256, reason: ReasonOverRead},
		{e: seqAt(256, 20, 1.0), kb: 256, reason: HoldSettling},
		// The pod stopped thrashing at 256 KiB: kept, not moved back to one rsize.
		{e: seqAt(256, 20, 1.0), kb: 256, reason: HoldLimit},
		{e: seqAt(256, 20, 1.0), kb: 256, reason: HoldLimit},
	})
	runScript(t, newTestController(), []scriptStep{
		{e: seqAt(1024, 20, 2.0), kb: 1024, reason: HoldLimit},
	})
}

// TestControllerNoRiseWhileAPodThrashes: two pods on one superblock, one streaming and one
// reading a mapped file at random in a memory-limited cgroup. Before the mapped reader's
// faults show, its pod already thrashes: the streaming reader's traffic does not grow the
// window, which would take the thrashing pod more of what it is about to use. Once no pod
// thrashes the window grows again.
func TestControllerNoRiseWhileAPodThrashes(t *testing.T) {
	thrashing := func(e Evidence) Evidence { e.Thrashing = true; return e }
	runScript(t, newTestController(), []scriptStep{
		{e: thrashing(seqAt(1024, 80, 1.0)), kb: 1024, reason: HoldThrashing},
		{e: thrashing(seqAt(1024, 80, 1.0)), kb: 1024, reason: HoldThrashing},
		{e: seqAt(1024, 80, 1.0), kb: 2048, reason: ReasonStreaming},
	})
}

// mappedStarting is e with a mapped reader's first faults, as the collector counts them:
// major of them missing the page cache, each fetching a page (too little to classify).
func mappedStarting(e Evidence, major uint64) Evidence {
	e.Faults = &FaultEvidence{ReadBytes: major * 4096, Faults: 2 * major, MajorFaults: major, FilemapFaults: major + 1}
	return e
}

// TestControllerNoRiseWhileMappedReadersMiss: in the intervals a mapped reader starts in,
// its faults miss the page cache before they fetch enough to be classified; the streaming
// reader next to it on the superblock gets no rise until they stop.
func TestControllerNoRiseWhileMappedReadersMiss(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{e: mappedStarting(seqAt(1024, 80, 1.0), 8), kb: 1024, reason: HoldMapped},
		{e: mappedStarting(seqAt(1024, 80, 1.0), MinStepMajorFaults-1), kb: 1024, reason: HoldMapped},
		{e: mappedStarting(seqAt(1024, 80, 1.0), 0), kb: 2048, reason: ReasonStreaming},
	})
}

// TestControllerNoRiseWhileUnseenFaults: without the per-pod collector, a pod of the
// superblock faulting where nothing places it (its cgroup's major faults) holds the
// streaming reader's rise, as the collector's count of misses does; without them it rises.
func TestControllerNoRiseWhileUnseenFaults(t *testing.T) {
	unseen := func(e Evidence) Evidence { e.UnseenMajorFaults = 400; return e }
	runScript(t, newTestController(), []scriptStep{
		{e: unseen(seqAt(1024, 80, 1.0)), kb: 1024, reason: HoldMapped},
		{e: unseen(seqAt(1024, 80, 1.0)), kb: 1024, reason: HoldMapped},
		{e: seqAt(1024, 80, 1.0), kb: 2048, reason: ReasonStreaming},
	})
}

// TestControllerNFSv4OpensNotCounted: NFSv4 counts no file opens in mountstats (vfsopen is
// directory opens there), so an interval without counted opens says nothing: a streaming
// reader's window grows and its rise is judged after settling, as for NFSv3 readers who
// open files. With NFSv3's counter at zero the same intervals hold.
func TestControllerNFSv4OpensNotCounted(t *testing.T) {
	runScript(t, newTestController(), []scriptStep{
		{e: v4(seqAt(1024, 50, 1.0)), kb: 2048, reason: ReasonStreaming},
		{e: v4(seqAt(2048, 90, 1.0)), kb: 2048, reason: HoldSettling},
		{e: v4(seqAt(2048, 90, 1.0)), kb: 4096, reason: ReasonStreaming},
	})
	runScript(t, newTestController(), []scriptStep{
		{e: noOpens(seqAt(1024, 50, 1.0)), kb: 1024, reason: HoldNoOpens},
	})
}
