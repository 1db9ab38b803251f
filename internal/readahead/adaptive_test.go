package readahead

import (
	"testing"
	"time"
)

const interval = 5 * time.Second

// interval returns 5 s of evidence at read-ahead ra KiB: application reads at rate MiB/s,
// over-read and window-bound as given, in READs of 1 MiB.
func intervalAt(ra int, rateMiB, overRead, windowBound float64) Evidence {
	e := Evidence{Seconds: interval.Seconds(), ReadAheadKB: ra, RSize: 1 << 20,
		AppReadBytes: uint64(rateMiB * interval.Seconds() * (1 << 20))}
	e.ServerReadBytes = uint64(float64(e.AppReadBytes) * overRead)
	e.Reads = e.ServerReadBytes / (1 << 20)
	e.derive()
	// Set the READs' RTT so that the figure comes out as asked.
	e.ReadRTTSeconds = windowBound * e.WindowReads * e.Seconds
	e.derive()
	return e
}

func newTestController() *Controller { return NewController(1024, 15360, interval) }

// run feeds the controller one interval and applies what it decides, as the agent does.
func run(c *Controller, e Evidence, now time.Time, stalled bool) Step {
	s := c.Decide(e, now, stalled)
	c.Applied(s, e, now)
	return s
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
		{"above the cap: down to it", intervalAt(65536, 100, 1.0, 0.2), false, 15360, ReasonBounds},
		{"idle: hold", intervalAt(4096, 1, 1.0, 0.9), false, 4096, HoldTraffic},
		{"wasting: halve", intervalAt(15360, 21, 3.9, 0.3), false, 7680, ReasonOverRead},
		{"wasting at the floor: hold", intervalAt(1024, 21, 2.0, 0.3), false, 1024, HoldLimit},
		{"window-bound: double", intervalAt(1024, 100, 1.0, 0.9), false, 2048, ReasonWindowBound},
		{"window-bound near the cap: to the cap", intervalAt(8192, 100, 1.0, 0.9), false, 15360, ReasonWindowBound},
		{"window-bound at the cap: hold", intervalAt(15360, 100, 1.0, 0.9), false, 15360, HoldLimit},
		{"window-bound but over-read in the gap: hold", intervalAt(2048, 100, 1.2, 0.9), false, 2048, HoldSteady},
		{"over-read in the gap, not window-bound: hold", intervalAt(2048, 100, 1.25, 0.2), false, 2048, HoldSteady},
		{"not window-bound: hold", intervalAt(2048, 100, 1.0, 0.5), false, 2048, HoldSteady},
		{"random reader: hold", intervalAt(1024, 30, 1.0, 0.02), false, 1024, HoldSteady},
		// 5 s at 16 MiB/s in READs of 1 MiB: 80 READs, enough for a step.
		{"slow window-bound reader: double", intervalAt(1024, 16, 1.0, 1.2), false, 2048, ReasonWindowBound},
		{"window-bound over 15 MiB: hold", intervalAt(1024, 3, 1.0, 1.2), false, 1024, HoldTraffic},
		{"stalled: hold whatever the figures", intervalAt(15360, 21, 3.9, 0.3), true, 15360, HoldStalled},
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

// TestControllerGrowsToCap: a window-bound sequential reader that gains from each doubling
// goes from one rsize to the cap in four intervals, one change per interval, then holds.
func TestControllerGrowsToCap(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	ra, rate := 1024, 100.0
	var path []int
	for range 8 {
		s := run(c, intervalAt(ra, rate, 1.0, 0.9), now, false)
		if s.Verdict == Hurt {
			t.Fatalf("judged hurt: %+v", s)
		}
		ra = s.ToKB
		path = append(path, ra)
		rate *= 1.2
		now = now.Add(interval)
	}
	want := []int{2048, 4096, 8192, 15360, 15360, 15360, 15360, 15360}
	for i := range want {
		if path[i] != want[i] {
			t.Fatalf("path %v, want %v", path, want)
		}
	}
}

// TestControllerOneChangePerInterval: a second decision within the interval holds.
func TestControllerOneChangePerInterval(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	run(c, intervalAt(1024, 100, 1.0, 0.9), now, false)
	if s := c.Decide(intervalAt(2048, 100, 1.0, 0.9), now.Add(interval/2), false); s.Changed() || s.Reason != HoldInterval {
		t.Errorf("half an interval later: %+v, want a hold (interval)", s)
	}
}

// TestControllerUndoesHurt: a rise judged hurt is undone at once, and the value before it
// becomes a ceiling for HoldIntervals intervals; then the controller may try again.
func TestControllerUndoesHurt(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	if s := run(c, intervalAt(1024, 100, 1.0, 0.9), now, false); s.ToKB != 2048 {
		t.Fatalf("first step %+v, want 2048", s)
	}
	now = now.Add(interval)
	s := run(c, intervalAt(2048, 60, 1.0, 0.9), now, false)
	if s.ToKB != 1024 || s.Reason != ReasonHurt || s.Verdict != Hurt {
		t.Fatalf("after a 40 %% loss: %+v, want back to 1024 (hurt)", s)
	}
	if ceil, _ := c.Limits(now); ceil != 1024 {
		t.Errorf("ceiling %d, want 1024", ceil)
	}
	// Still window-bound at 1024: held by the ceiling for the hold, then doubled again.
	var changes []int
	for i := range HoldIntervals + 2 {
		now = now.Add(interval)
		s := run(c, intervalAt(1024, 100, 1.0, 0.9), now, false)
		if s.Changed() {
			changes = append(changes, i)
			break
		}
		if s.Reason != HoldLimit {
			t.Fatalf("interval %d: %+v, want a hold on the ceiling", i, s)
		}
	}
	if len(changes) != 1 || changes[0] != HoldIntervals-1 {
		t.Errorf("grew again after intervals %v, want after %d", changes, HoldIntervals-1)
	}
}

// TestControllerUndoesHurtCut: a cut judged hurt is undone, and the value before it becomes
// a floor.
func TestControllerUndoesHurtCut(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	run(c, intervalAt(8192, 100, 1.5, 0.3), now, false)
	now = now.Add(interval)
	s := run(c, intervalAt(4096, 50, 1.0, 0.3), now, false)
	if s.ToKB != 8192 || s.Reason != ReasonHurt {
		t.Fatalf("after the cut halved the rate: %+v, want back to 8192", s)
	}
	if _, floor := c.Limits(now); floor != 8192 {
		t.Errorf("floor %d, want 8192", floor)
	}
	now = now.Add(interval)
	if s := run(c, intervalAt(8192, 100, 1.5, 0.3), now, false); s.Changed() || s.Reason != HoldLimit {
		t.Errorf("wasting again under the floor: %+v, want a hold", s)
	}
}

// TestControllerCannotOscillate: a workload whose window wastes above 2048 KiB (readers in a
// small memory cgroup) and is window-bound below it. Without the learned ceiling the
// controller would go 2048 -> 4096 -> 2048 every other interval; with it, the probes above
// 2048 come further and further apart.
func TestControllerCannotOscillate(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	workload := func(ra int) Evidence {
		if ra > 2048 {
			return intervalAt(ra, 40, 2.5, 0.5)
		}
		return intervalAt(ra, 60, 1.0, 0.9)
	}
	ra := 15360
	changes := 0
	const hours = 2
	n := int(hours * time.Hour / interval)
	for range n {
		s := run(c, workload(ra), now, false)
		if s.Changed() {
			changes++
		}
		ra = s.ToKB
		now = now.Add(interval)
	}
	t.Logf("%d changes in %d h, ending at %d KiB", changes, hours, ra)
	// 15360 -> 7680 -> 3840 -> 1920: three cuts; then a probe and its undo per hold,
	// the holds doubling from 1 min up to 32 min: 1+2+4+8+16+32+32 min cover the 2 h.
	if changes > 3+2*8 {
		t.Errorf("%d changes in %d h (%d intervals); want at most %d", changes, hours, n, 3+2*8)
	}
	if ra > 2048 {
		t.Errorf("ended at %d KiB, want at most 2048", ra)
	}
}

// TestControllerFollowsWorkloadSwitch: a random reader (held at one rsize) turns into a
// window-bound sequential reader; the controller reaches the cap within 60 s.
func TestControllerFollowsWorkloadSwitch(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	ra := 128
	for range 12 { // a minute of random reads
		s := run(c, intervalAt(ra, 30, 1.0, 0.02), now, false)
		ra = s.ToKB
		now = now.Add(interval)
	}
	if ra != 1024 {
		t.Fatalf("random reader at %d KiB, want 1024", ra)
	}
	switched := now
	rate := 40.0
	for ra < 15360 {
		s := run(c, intervalAt(ra, rate, 1.0, 0.9), now, false)
		ra = s.ToKB
		rate *= 1.3
		now = now.Add(interval)
		if now.Sub(switched) > time.Minute {
			t.Fatalf("at %d KiB a minute after the switch", ra)
		}
	}
}

// TestControllerStallDropsJudgement: a change followed by a stalled interval is not judged
// on it (the stall, not the change, cut the rate).
func TestControllerStallDropsJudgement(t *testing.T) {
	c := newTestController()
	now := time.Unix(1_700_000_000, 0)
	run(c, intervalAt(1024, 100, 1.0, 0.9), now, false)
	now = now.Add(interval)
	if s := run(c, intervalAt(2048, 0, 0, 0), now, true); s.Changed() {
		t.Fatalf("stalled: %+v", s)
	}
	now = now.Add(interval)
	s := run(c, intervalAt(2048, 50, 1.0, 0.5), now, false)
	if s.Verdict != "" || s.Changed() {
		t.Errorf("after the stall: %+v, want no verdict and a hold", s)
	}
}
