package agent

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/tune"
)

// adaptiveMount is the adaptive read-ahead state of one superblock.
type adaptiveMount struct {
	rule   policy.AdaptiveReadAhead // the mount's bounds and interval when the controller was made
	ctl    *readahead.Controller
	last   *inventory.Stats // the statistics at the last step, nil before the first
	lastAt time.Time
	// lastFaults are the per-pod collector's fault figures of the superblock, summed over
	// its cgroups, at the last step; nil without the collector.
	lastFaults map[podio.PodKey]readahead.FaultEvidence
}

// Adapt takes one step of adaptive read-ahead (readahead.Controller) on every superblock
// whose rule has readAheadAdaptive and whose interval has passed: it reads the
// statistics, measures the interval since the superblock's last step, and makes the
// controller's change, journaled first (tune.JournalReadAhead, so that `nfstune revert`
// restores the value from before the first change) and written through setReadAhead. In
// observe mode it logs the change it would make. now is when the step was due.
func (a *Agent) Adapt(ctx context.Context, now time.Time) {
	inv, err := a.cfg.Read(ctx)
	if err != nil {
		a.cfg.Metrics.Errors.WithLabelValues("read").Inc()
		a.cfg.Logger.Error("reading NFS statistics for adaptive read-ahead", "err", err)
		return
	}
	a.mu.Lock()
	pol := a.policy
	a.mu.Unlock()
	a.stallsAt(inv, now)
	learned := a.learnedValues()
	learnedChanged := false
	var faults map[podio.PodKey]readahead.FaultEvidence // the mapped readers' faults, by superblock
	var io *podio.Snapshot
	if a.cfg.PodIO != nil {
		s := a.cfg.PodIO(now)
		io = &s
		faults = cumulativeFaults(io)
	}
	// The pods' classes from the same read (the scrapes classify too, at most every
	// MinTrafficInterval): a thrashing pod lets the window go below one rsize.
	a.traffic.observe(inv, io, now)
	classes := a.traffic.latest()
	volumes := a.newVolumeListing()
	present := make(map[string]bool, len(inv.Mounts))
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		if m.Stats == nil || m.ReadAheadKB == nil {
			continue
		}
		want := pol.Resolve(m)
		if want.Adaptive == nil {
			continue
		}
		present[m.Device] = true
		st := a.adaptive[m.Device]
		if st == nil || st.rule != *want.Adaptive {
			// New, or the policy changed its bounds: start again from what is there.
			st = &adaptiveMount{rule: *want.Adaptive, ctl: a.newController(*want.Adaptive, m)}
			a.adaptive[m.Device] = st
		}
		if !st.lastAt.IsZero() && now.Sub(st.lastAt) < st.rule.Interval*3/4 {
			continue // a shorter interval's tick
		}
		e := readahead.Evidence{ReadAheadKB: *m.ReadAheadKB, RSize: m.RSize}
		if st.last != nil {
			e = readahead.Measure(m, st.last, now.Sub(st.lastAt))
			if e.SinceMount {
				// The device number names another superblock now.
				st.ctl = a.newController(st.rule, m)
				e = readahead.Evidence{ReadAheadKB: *m.ReadAheadKB, RSize: m.RSize}
			}
		}
		if st.last != nil && !e.SinceMount {
			e.Faults = faultsBetween(st.lastFaults, faults, podio.PodKey{PodUID: allPods, Device: m.Device})
			e.FaultsUnseen = countsFaults(io) && e.Faults == nil
			e.Thrashing = thrashing(classes[m.Device])
			e.UnseenMajorFaults = unseenMajorFaults(classes[m.Device])
		}
		st.last, st.lastAt, st.lastFaults = m.Stats, now, faults
		stalled := slices.ContainsFunc(inv.Stalled, func(s inventory.StalledServer) bool { return s.Reaches(m) })
		step := st.ctl.Decide(e, now, stalled)
		log := a.cfg.Logger.With("device", m.Device, "mountpoint", first(m.MountPoints), "from_kb", step.FromKB, "to_kb", step.ToKB,
			"reason", string(step.Reason), "figures", step.Why)
		if step.Verdict != "" {
			log.Info("adaptive read-ahead verdict", "verdict", string(step.Verdict), "verdict_figures", step.VerdictWhy)
		}
		a.setTarget(m.Device, step.ToKB)
		writes := want.Mode != policy.ModeObserve && !want.Adaptive.Observe
		if writes && st.ctl.Settled(step) {
			if v, changed := learned.Set(m, step.ToKB, now); changed {
				learnedChanged = true
				log.Info("adaptive read-ahead learned for the volume", "server", v.Server, "export", v.Export, "read_ahead_kb", v.ReadAheadKB)
			}
		}
		if !step.Changed() {
			log.Debug("adaptive read-ahead held")
			continue
		}
		if !writes {
			log.Info("adaptive read-ahead would change; observe mode, left alone")
			continue
		}
		if err := a.confirmNFS(volumes, m); err != nil {
			a.cfg.Metrics.Errors.WithLabelValues("write").Inc()
			log.Error("adaptive read-ahead not changed", "err", err)
			a.setTarget(m.Device, step.FromKB)
			continue
		}
		if err := tune.JournalReadAhead(a.cfg.Root, m.Device); err != nil {
			a.cfg.Metrics.Errors.WithLabelValues("journal").Inc()
			log.Error("adaptive read-ahead not changed: the value before it could not be journaled", "err", err)
			a.setTarget(m.Device, step.FromKB)
			continue
		}
		if err := setReadAhead(a.cfg.Root, m, volumes, step.ToKB); err != nil {
			a.setTarget(m.Device, step.FromKB)
			if errors.Is(err, hostfs.ErrOverwritten) {
				// Written, then changed by another writer before the read-back: the next
				// step starts from that writer's value, and this change is not the
				// controller's to judge.
				log.Warn("adaptive read-ahead set, then changed by another writer", "err", err)
				continue
			}
			a.cfg.Metrics.Errors.WithLabelValues("write").Inc()
			log.Error("setting adaptive read-ahead", "err", err)
			continue
		}
		st.ctl.Applied(step, e, now)
		a.cfg.Metrics.AdaptiveChanges.WithLabelValues(step.Direction(), string(step.Reason)).Inc()
		log.Info("adaptive read-ahead changed")
	}
	if learnedChanged {
		if err := learned.Save(); err != nil {
			a.cfg.Metrics.Errors.WithLabelValues("write").Inc()
			a.cfg.Logger.Error("the read-ahead learned per volume could not be kept; the next mounts start at their bounds", "err", err)
		}
	}
	for dev := range a.adaptive {
		if !present[dev] {
			delete(a.adaptive, dev)
		}
	}
	a.mu.Lock()
	maps.DeleteFunc(a.targets, func(dev string, _ int) bool { return !present[dev] })
	a.mu.Unlock()
}

// learnedValues returns the values learned per volume, read from tune.LearnedPath the first
// time (an unreadable file is logged once and read as none).
func (a *Agent) learnedValues() *tune.LearnedStore {
	if l := a.learned.Load(); l != nil {
		return l
	}
	l, err := tune.LoadLearned(a.cfg.Root)
	if err != nil {
		a.cfg.Metrics.Errors.WithLabelValues("read").Inc()
		a.cfg.Logger.Warn("adaptive read-ahead starts every new mount at its bounds: the values learned before cannot be read", "err", err)
	}
	if !a.learned.CompareAndSwap(nil, l) {
		return a.learned.Load()
	}
	return l
}

// adaptiveStart is the read-ahead a new superblock under adaptive bounds r starts at, and
// whether cur must change for it: the value learned for m's volume (down to
// readahead.MappedFloorKB, where mapped random readers took it), else cur moved into the
// bounds. It is the controller's first step (Controller.StartAt, the bounds row), taken
// when the mount appears rather than at the next interval.
func adaptiveStart(r policy.AdaptiveReadAhead, cur int, learned *tune.LearnedStore, m *inventory.Mount) (int, bool) {
	kb := min(max(cur, r.MinKB), r.MaxKB)
	if l, ok := learned.Get(m); ok && l >= min(r.MinKB, readahead.MappedFloorKB) && l <= r.MaxKB {
		kb = l
	}
	return kb, kb != cur
}

// newController returns the controller of a superblock under rule r, starting at the value
// learned for m's volume, if any (readahead.Controller.StartAt).
func (a *Agent) newController(r policy.AdaptiveReadAhead, m *inventory.Mount) *readahead.Controller {
	c := readahead.NewController(r.MinKB, r.MaxKB, r.Interval)
	if kb, ok := a.learned.Load().Get(m); ok {
		c.StartAt(kb)
	}
	return c
}

// forgetAdaptive drops every controller and target: the policy has no adaptive rule left.
func (a *Agent) forgetAdaptive() {
	clear(a.adaptive)
	a.mu.Lock()
	clear(a.targets)
	a.mu.Unlock()
}

// setTarget records the read-ahead the controller wants for dev, for the metrics.
func (a *Agent) setTarget(dev string, kb int) {
	a.mu.Lock()
	a.targets[dev] = kb
	a.mu.Unlock()
}

// adaptiveTargets returns a copy of the controllers' targets by device.
func (a *Agent) adaptiveTargets() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.targets) == 0 {
		return nil
	}
	return maps.Clone(a.targets)
}

// adaptiveInterval is how often Adapt must run under the current policy, 0 for never.
func (a *Agent) adaptiveInterval() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.policy == nil {
		return 0
	}
	return a.policy.AdaptiveInterval
}

// unseenMajorFaults sums the major faults the mount's pods took where nothing places them
// (readahead.PodClass.UnseenMajorFaults).
func unseenMajorFaults(c readahead.Classification) uint64 {
	var n uint64
	for _, p := range c.Pods {
		n += p.UnseenMajorFaults
	}
	return n
}

// thrashing reports whether the mount's traffic, or one of its pods', was classified as a
// pod thrashing its page cache.
func thrashing(c readahead.Classification) bool {
	return c.Class == readahead.Thrashing || slices.ContainsFunc(c.Pods, func(p readahead.PodClass) bool { return p.Class == readahead.Thrashing })
}
