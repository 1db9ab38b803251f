package agent

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/readahead"
)

// DefaultVerdictWindow is how long the agent watches a mount's traffic after changing its
// read-ahead before it judges the change.
const DefaultVerdictWindow = time.Minute

// verdicts judges the agent's read-ahead writes on each mount's own traffic
// (readahead.Judge). The window before a write is the traffic since the last statistics
// the agent read (a scrape), when that is at most ten windows old; the window after is
// VerdictWindow from the write, closed by the first scrape or reconcile after it. The last
// verdict per superblock is kept until the superblock goes.
type verdicts struct {
	window time.Duration
	logger *slog.Logger

	mu      sync.Mutex
	last    map[string]*inventory.Stats // device -> statistics at lastAt
	lastAt  time.Time
	pending map[string]pendingChange
	judged  map[string]readahead.Change
}

// pendingChange is a write whose window after has not closed yet.
type pendingChange struct {
	mountPoint string
	from, to   int
	at         time.Time
	start      *inventory.Stats
	before     readahead.Evidence
}

// written is one read-ahead write of a reconcile.
type written struct {
	mount    *inventory.Mount
	from, to int
}

func newVerdicts(window time.Duration, logger *slog.Logger) *verdicts {
	if window <= 0 {
		window = DefaultVerdictWindow
	}
	return &verdicts{window: window, logger: logger, last: map[string]*inventory.Stats{},
		pending: map[string]pendingChange{}, judged: map[string]readahead.Change{}}
}

// observe takes a fresh inventory with statistics, read at now: it closes the windows after
// of the writes that are due, forgets the superblocks that went, and keeps the statistics
// as the start of the next window before.
func (v *verdicts) observe(inv *inventory.Inventory, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	present := make(map[string]*inventory.Mount, len(inv.Mounts))
	for i := range inv.Mounts {
		present[inv.Mounts[i].Device] = &inv.Mounts[i]
	}
	for dev, p := range v.pending {
		m := present[dev]
		switch {
		case m == nil || m.Stats == nil:
			delete(v.pending, dev)
		case now.Sub(p.at) >= v.window:
			after := readahead.Measure(m, p.start, now.Sub(p.at))
			c := readahead.NewChange(dev, p.mountPoint, p.from, p.to, p.at, p.before, after)
			v.judged[dev] = c
			delete(v.pending, dev)
			v.logger.Info("read-ahead verdict", "device", dev, "mountpoint", p.mountPoint, "from_kb", p.from, "to_kb", p.to,
				"verdict", string(c.Verdict), "reason", c.Reason)
		}
	}
	for dev := range v.judged {
		if present[dev] == nil {
			delete(v.judged, dev)
		}
	}
	clear(v.last)
	for dev, m := range present {
		if m.Stats != nil {
			v.last[dev] = m.Stats
		}
	}
	v.lastAt = now
}

// started records writes made just before inv was read, at now: each write's window before
// is the traffic since the last statistics, its window after starts here.
func (v *verdicts) started(inv *inventory.Inventory, now time.Time, writes []written) {
	v.mu.Lock()
	byDev := make(map[string]*inventory.Mount, len(inv.Mounts))
	for i := range inv.Mounts {
		byDev[inv.Mounts[i].Device] = &inv.Mounts[i]
	}
	recent := !v.lastAt.IsZero() && now.Sub(v.lastAt) <= 10*v.window
	for _, w := range writes {
		m := byDev[w.mount.Device]
		if m == nil || m.Stats == nil {
			continue
		}
		var before readahead.Evidence // none: too_little_traffic
		if prev := v.last[m.Device]; recent && prev != nil {
			before = readahead.Measure(m, prev, now.Sub(v.lastAt))
		}
		v.pending[m.Device] = pendingChange{mountPoint: first(m.MountPoints), from: w.from, to: w.to, at: now, start: m.Stats, before: before}
	}
	v.mu.Unlock()
	v.observe(inv, now)
}

// due reports whether a write's window after has closed at now.
func (v *verdicts) due(now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range v.pending {
		if now.Sub(p.at) >= v.window {
			return true
		}
	}
	return false
}

// latest returns the last verdict of each superblock, by device.
func (v *verdicts) latest() map[string]readahead.Verdict {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]readahead.Verdict, len(v.judged))
	for dev, c := range v.judged {
		out[dev] = c.Verdict
	}
	return out
}

// runVerdicts starts the goroutine that runs afterReconcile for Run until ctx ends, and
// returns the function that hands it a reconcile's writes. The statistics read (mountstats
// and read-ahead, Config.StatisticsRead) takes many times longer than the reconcile's own
// mountinfo read, and on Run's loop a mount table change that came meanwhile waited for
// it: the next new superblock's reaction. Writes
// handed over while a read runs go to the next read, all at once; a write's window after
// then starts that much later, a small part of VerdictWindow.
func (a *Agent) runVerdicts(ctx context.Context, wg *sync.WaitGroup) func([]written) {
	var mu sync.Mutex
	var queued []written
	wake := make(chan struct{}, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			mu.Lock()
			writes := queued
			queued = nil
			mu.Unlock()
			a.afterReconcile(ctx, writes)
			if a.cfg.ReleaseMemory {
				debug.FreeOSMemory()
			}
		}
	}()
	return func(writes []written) {
		mu.Lock()
		queued = append(queued, writes...)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// afterReconcile starts the verdicts of a reconcile's writes, and closes those that are due,
// with one read of the statistics, only when there is something to do.
func (a *Agent) afterReconcile(ctx context.Context, writes []written) {
	now := time.Now()
	if len(writes) == 0 && !a.verdicts.due(now) {
		return
	}
	inv, err := a.cfg.StatisticsRead(ctx)
	if err != nil {
		a.cfg.Metrics.Errors.WithLabelValues("read").Inc()
		a.cfg.Logger.Error("reading NFS statistics for read-ahead verdicts", "err", err)
		return
	}
	a.verdicts.started(inv, time.Now(), writes)
}
