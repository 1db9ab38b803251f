// Package agent is nfstune's long-running node agent. It watches the mount table with
// poll(2) on /proc/<pid>/mountinfo and resyncs periodically, gives every new NFS superblock
// (NFSv4 submounts included) its profile's read-ahead, restores values that drift below the
// profile, forgets mounts that vanish, and serves Prometheus metrics, /healthz and /readyz.
// Run is all of that as `nfstune agent` runs it, with the policy reloaded on SIGHUP or
// when its file changes.
//
// Everything it reads comes from /proc and /sys under a hostfs.Root; it never opens, stats
// or statfs's a path below an NFS mount point, so a dead server cannot stall it. It never
// changes mount options.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/status"
	"github.com/nfstune/nfstune/internal/tune"
)

// Desired is what the policy wants for one mount, as far as the agent acts on it.
type Desired struct {
	// ReadAheadKB is the profile's read-ahead in KiB; 0 means no opinion.
	ReadAheadKB int
	// Mode is enforce (set and restore read-ahead) or observe (report only).
	Mode policy.Mode
	// ReadAheadRSizes and ReadAheadExact say how firmly ReadAheadKB holds, as in
	// policy.Profile: derived from rsize, or exact.
	ReadAheadRSizes int
	ReadAheadExact  bool
	// ReadAheadBy names the mount helper whose own value ReadAheadKB is (policy.Profile).
	ReadAheadBy string
	// Adaptive, when set, hands the mount's read-ahead to the adaptive controller (Adapt)
	// with these bounds: reconciles leave it alone.
	Adaptive *policy.AdaptiveReadAhead
}

// change reports whether read-ahead cur on a mount with rsize bytes should be set to
// d.ReadAheadKB (policy.Profile.ReadAheadChange).
func (d Desired) change(cur, rsize int, exact bool) bool {
	p := policy.Profile{ReadAheadKB: d.ReadAheadKB, ReadAheadRSizes: d.ReadAheadRSizes, ReadAheadExact: d.ReadAheadExact, ReadAheadBy: d.ReadAheadBy}
	return p.ReadAheadChange(cur, rsize, exact)
}

// Policy resolves the desired state of mounts and audits an inventory. A Policy is
// immutable; a reload replaces it.
type Policy struct {
	// Resolve returns the desired state of one mount.
	Resolve func(*inventory.Mount) Desired
	// Audit audits an inventory (audit.RunWith) with what the agent saw of its traffic
	// (the read traffic classes); nil means no audit.
	Audit func(*inventory.Inventory, audit.Options) audit.Report
	// Limits returns the service limits to export (ServiceLimits); nil means none.
	Limits func(*inventory.Inventory) []metrics.ServiceLimit
	// Recovery says when the agent frees the superblock of a dead server (Recover).
	Recovery policy.Recovery
	// Info names the policy in /status.
	Info status.Policy
	// Mode is observe when no mount is ever written (the agent's --observe, or the
	// policy's default mode), else enforce; it is reported in /status.
	Mode policy.Mode
	// AdaptiveInterval is how often Adapt runs: the shortest interval of the rules with an
	// adaptive read-ahead (policy.Policy.AdaptiveInterval); 0 when none has one.
	AdaptiveInterval time.Duration
}

// ReadFunc reads the host's NFS inventory. It must read only /proc and /sys.
type ReadFunc func(ctx context.Context) (*inventory.Inventory, error)

// LoadFunc loads the policy (the user's config file or the built-in default).
type LoadFunc func() (*Policy, error)

// Config configures an Agent.
type Config struct {
	// Root is the host filesystem root; the DaemonSet mounts the host's / or /proc here.
	Root hostfs.Root
	// PID names the process whose mount namespace (/proc/<pid>/mountinfo) and network
	// namespace (/proc/<pid>/net/nfsfs) the agent follows; 1 is the host's init, 0 the
	// agent itself (/proc/self/mountinfo and /proc/fs/nfsfs), as in inventory.ReadOptions.
	PID int
	// Resync is the period of the full resync that catches drift and missed events.
	Resync time.Duration
	// Read reads the inventory for scrapes; Load loads the policy.
	Read ReadFunc
	Load LoadFunc
	// ReconcileRead is a cheaper read for reconciles, which need no statistics (see
	// ReadMountTable); nil uses Read. It is on the path from a mount table change to
	// read-ahead set, so its cost is the agent's reaction time. It may leave a mount's
	// ReadAheadKB nil: the reconcile then reads it, new superblocks first.
	ReconcileRead ReadFunc
	// StatisticsRead is a cheaper read for the read-ahead verdicts, which need each
	// superblock's statistics and read-ahead only (inventory.ReadOptions.StatisticsOnly); nil
	// uses Read. It runs after every reconcile that wrote, while the next new mount may be
	// waiting to be tuned, so it shares the CPU with the agent's reaction.
	StatisticsRead ReadFunc
	// PolicyChanged reports whether the policy source changed since the last Load (a
	// file's size or modification time); nil means never. It is checked at every resync
	// and every PolicyCheck.
	PolicyChanged func() bool
	// PolicyCheck is how often PolicyChanged is asked; 0 means 10 s.
	PolicyCheck time.Duration
	// Exact makes the agent lower read-ahead that is above the profile too. By default
	// profile values are minimums, as in the policy package.
	Exact bool
	// ReleaseMemory returns the garbage of each reconcile to the system at once
	// (runtime/debug.FreeOSMemory), so that an idle agent's resident size stays near its
	// live heap; it costs one garbage collection of a small heap per reconcile.
	ReleaseMemory bool
	// RecoveryEvery is how often Recover runs while the policy's recovery is on; 0 means
	// DefaultRecoveryEvery.
	RecoveryEvery time.Duration
	// PodUID is the UID of the pod the agent runs in (--pod-uid, the downward API's
	// metadata.uid): the recovery rules act only after the process scan has found this
	// pod's processes through their cgroups, the proof that they see pods at all. Empty
	// outside a pod: then the rules never act (RecoveryBlind).
	PodUID string
	// KubeletRoot is kubelet's root directory (--kubelet-root-dir); empty takes it from
	// kubelet's own command line (inventory.ProcessScan.KubeletRoots).
	KubeletRoot kubelet.Root
	// RecoveryStallWindow is how long the checks right before a shutdown watch the server's
	// transports again (tune.PlanShutdown, then tune.Shutdown); 0 means
	// inventory.DefaultStallWindow.
	RecoveryStallWindow time.Duration
	// VerdictWindow is how long the agent watches a mount's traffic after changing its
	// read-ahead before judging the change (readahead.Judge); 0 means DefaultVerdictWindow.
	VerdictWindow time.Duration
	// Node is the name of the node the agent runs on, reported in /status; empty outside
	// a pod.
	Node string
	// PodIO reads the per-pod NFS I/O collector (podio.Source.Read); nil when it is off
	// (--pod-io not given).
	PodIO func(time.Time) podio.Snapshot
	// Logger receives structured logs; Metrics receives the agent's own metrics.
	Logger  *slog.Logger
	Metrics *Metrics
}

// Agent reconciles NFS read-ahead with the policy. Create it with New.
type Agent struct {
	cfg Config

	mu         sync.Mutex
	policy     *Policy
	known      map[string]int       // device -> read_ahead_kb seen at the last reconcile
	settling   map[string]time.Time // device -> when it was tuned as new, during its settle re-checks
	lastOK     time.Time
	lastResync time.Time
	ready      bool

	// transports is the sunrpc transport sample a scrape's is compared with, and stalled
	// the result of the last comparison (see sampleStalls).
	transports inventory.TransportSample
	stalled    []inventory.StalledServer
	// stalledSince is when each server of stalled (by stallKey) was first seen stalled in
	// an unbroken run of comparisons.
	stalledSince map[string]time.Time
	// tried are the recovery actions taken, by device (Recover).
	tried map[string]recoveryTried
	// blindWhy is the last reason logged at warn level for a superblock the recovery rules
	// could not judge (RecoveryBlind).
	blindWhy string

	// verdicts judges the agent's read-ahead writes on each mount's traffic.
	verdicts *verdicts
	// verdictsLater, while Run runs, hands a reconcile's writes to the goroutine that reads
	// their statistics (afterReconcile), so that the read does not hold up the next mount
	// table change; nil runs afterReconcile in Reconcile. Only Run sets it, before its first
	// reconcile.
	verdictsLater func([]written)
	// traffic classifies each mount's read traffic, and its pods', between reads.
	traffic *trafficClasses

	// adaptive is the adaptive read-ahead state by device; only Adapt uses it, and Adapt
	// runs on Run's goroutine (or in Reconcile, on the same). targets are the controllers'
	// targets by device, for scrapes, under mu.
	adaptive map[string]*adaptiveMount
	targets  map[string]int
	// learned is the read-ahead the controllers settled on per volume (tune.LearnedPath), read
	// at the first Adapt; nil before.
	learned atomic.Pointer[tune.LearnedStore]
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Read == nil || cfg.Load == nil {
		return nil, errors.New("agent: Read and Load are required")
	}
	if cfg.ReconcileRead == nil {
		cfg.ReconcileRead = cfg.Read
	}
	if cfg.StatisticsRead == nil {
		cfg.StatisticsRead = cfg.Read
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.PolicyCheck <= 0 {
		cfg.PolicyCheck = 10 * time.Second
	}
	if cfg.RecoveryEvery <= 0 {
		cfg.RecoveryEvery = DefaultRecoveryEvery
	}
	if cfg.RecoveryStallWindow <= 0 {
		cfg.RecoveryStallWindow = inventory.DefaultStallWindow
	}
	if cfg.PID < 0 {
		return nil, fmt.Errorf("agent: invalid pid %d", cfg.PID)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	return &Agent{cfg: cfg, known: make(map[string]int), settling: make(map[string]time.Time),
		stalledSince: map[string]time.Time{}, tried: map[string]recoveryTried{},
		verdicts: newVerdicts(cfg.VerdictWindow, cfg.Logger), traffic: newTrafficClasses(cfg.Root),
		adaptive: make(map[string]*adaptiveMount), targets: make(map[string]int)}, nil
}

// Trigger names what started a reconcile; it is a label of nfstune_agent_reconciles_total.
type Trigger string

// The triggers: the agent's start, a change of mountinfo, the periodic resync, a reload of
// a changed policy file, and the settle re-check.
const (
	TriggerStart     Trigger = "start"
	TriggerMountinfo Trigger = "mountinfo"
	TriggerResync    Trigger = "resync"
	TriggerReload    Trigger = "reload"
	// TriggerSettle re-checks new superblocks shortly after they were tuned: udev's
	// nfsrahead (nfs-utils' 99-nfs.rules) writes read_ahead_kb asynchronously after the
	// bdi appears and can overwrite the agent's value.
	TriggerSettle Trigger = "settle"
)

// settleAfter are the delays after a new superblock was tuned at which it is checked again:
// nfs-utils' udev rule (nfsrahead) writes read_ahead_kb once after the bdi appears, in the
// lab from a fraction of a second to about 15 s later on a loaded machine. A settle reconcile
// reads the read-ahead of such superblocks only; the others keep the value of the last
// reconcile until the next resync or mount table change.
var settleAfter = []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second, 20 * time.Second}

// settleFor is how long a new superblock counts as settling: past the last re-check, with
// room for a timer that fired late.
var settleFor = settleAfter[len(settleAfter)-1] + 5*time.Second

// Run loads the policy, reconciles once, then reacts to mount table changes, resyncs and
// reloads, and steps adaptive read-ahead (Adapt) once per interval, until ctx ends. hangup
// receives a value for every SIGHUP. Run returns nil when ctx ends and an error only when it
// cannot start.
func (a *Agent) Run(ctx context.Context, hangup <-chan struct{}) error {
	if err := a.loadPolicy(); err != nil {
		return err
	}
	mountinfo := a.cfg.Root.Proc(procDir(a.cfg.PID), "mountinfo")
	changes := make(chan time.Time, 1)
	settle := make(chan struct{}, 1)
	watchErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchErr <- watchMountinfo(ctx, mountinfo, changes)
	}()
	defer wg.Wait()

	// settleLater schedules the re-checks of superblocks a reconcile tuned as new, whatever
	// started it: a settle or resync can find a new mount before its change event is handled.
	settleLater := func(tunedNew int) {
		if tunedNew == 0 {
			return
		}
		for _, d := range settleAfter {
			// A timer firing after Run returned only fills the buffered channel.
			time.AfterFunc(d, func() {
				select {
				case settle <- struct{}{}:
				default:
				}
			})
		}
	}

	a.verdictsLater = a.runVerdicts(ctx, &wg)
	defer func() { a.verdictsLater = nil }()
	settleLater(a.Reconcile(ctx, TriggerStart, time.Now()))
	resync := time.NewTicker(a.cfg.Resync)
	defer resync.Stop()
	check := time.NewTicker(a.cfg.PolicyCheck)
	defer check.Stop()
	recovery := time.NewTicker(a.cfg.RecoveryEvery)
	defer recovery.Stop()
	// adapt ticks at the shortest adaptive interval of the policy in force, never without
	// an adaptive rule (a nil channel).
	var adapt <-chan time.Time
	var adaptTicker *time.Ticker
	resetAdapt := func() {
		if adaptTicker != nil {
			adaptTicker.Stop()
			adaptTicker, adapt = nil, nil
		}
		if iv := a.adaptiveInterval(); iv > 0 {
			adaptTicker = time.NewTicker(iv)
			adapt = adaptTicker.C
		} else {
			a.forgetAdaptive()
		}
	}
	resetAdapt()
	defer func() {
		if adaptTicker != nil {
			adaptTicker.Stop()
		}
	}()
	reload := func() {
		a.reloadPolicy(ctx)
		resetAdapt()
	}
	a.cfg.Logger.Info("agent started", "mountinfo", mountinfo, "resync", a.cfg.Resync.String())

	for {
		// A mount table change goes before a settle, resync or policy check that is due
		// at the same time: its new superblocks are what the reaction time measures.
		select {
		case at := <-changes:
			settleLater(a.Reconcile(ctx, TriggerMountinfo, at))
			continue
		default:
		}
		select {
		case <-ctx.Done():
			a.cfg.Logger.Info("agent stopping")
			return nil
		case err := <-watchErr:
			if err != nil {
				// Without change events the resync still keeps mounts tuned, only later.
				a.cfg.Metrics.Errors.WithLabelValues("watch").Inc()
				a.cfg.Logger.Error("mount table watch stopped; relying on resync", "err", err)
			}
		case at := <-changes:
			settleLater(a.Reconcile(ctx, TriggerMountinfo, at))
		case <-settle:
			settleLater(a.Reconcile(ctx, TriggerSettle, time.Now()))
		case <-resync.C:
			if a.policyChanged() {
				reload()
				continue
			}
			settleLater(a.Reconcile(ctx, TriggerResync, time.Now()))
		case <-check.C:
			if a.policyChanged() {
				reload()
			}
		case <-recovery.C:
			a.Recover(ctx, time.Now()) // the time of the reading, as for Adapt below
		case <-hangup:
			reload()
		case <-adapt:
			// The time of the reading, not the tick's: a tick handled late (the loop busy,
			// the CPU short) would otherwise count the bytes of a longer interval over the
			// ticker's period, and the next interval's over a shorter one.
			a.Adapt(ctx, time.Now())
		}
	}
}

// newFirst returns the indexes of mounts, those whose device was not known at the last
// reconcile first: a mount table change is about them, and their read-ahead is on the
// path the reaction time measures.
func newFirst(mounts []inventory.Mount, known map[string]int) []int {
	order := make([]int, 0, len(mounts))
	for i := range mounts {
		if _, ok := known[mounts[i].Device]; !ok {
			order = append(order, i)
		}
	}
	for i := range mounts {
		if _, ok := known[mounts[i].Device]; ok {
			order = append(order, i)
		}
	}
	return order
}

func (a *Agent) policyChanged() bool {
	return a.cfg.PolicyChanged != nil && a.cfg.PolicyChanged()
}

func (a *Agent) loadPolicy() error {
	p, err := a.cfg.Load()
	if err != nil {
		return fmt.Errorf("loading policy: %w", err)
	}
	if p.Info.LoadedAt.IsZero() {
		p.Info.LoadedAt = time.Now()
	}
	a.mu.Lock()
	a.policy = p
	a.mu.Unlock()
	return nil
}

// reloadPolicy loads the policy again; on failure the previous one stays in force.
func (a *Agent) reloadPolicy(ctx context.Context) {
	if err := a.loadPolicy(); err != nil {
		a.cfg.Metrics.Errors.WithLabelValues("policy").Inc()
		a.cfg.Logger.Error("policy reload failed; keeping the previous policy", "err", err)
		return
	}
	a.cfg.Logger.Info("policy reloaded")
	a.Reconcile(ctx, TriggerReload, time.Now())
}

// Reconcile reads the inventory and brings every NFS superblock's read-ahead up to its
// profile. since is when the triggering change happened; reactions are measured from it.
// It returns how many new superblocks it wrote, whose settle re-checks follow (one that
// another writer changed before the read-back among them).
func (a *Agent) Reconcile(ctx context.Context, trigger Trigger, since time.Time) (tunedNew int) {
	m := a.cfg.Metrics
	m.Reconciles.WithLabelValues(string(trigger)).Inc()
	start := time.Now()
	inv, err := a.cfg.ReconcileRead(ctx)
	read := time.Since(start)
	if err != nil {
		m.Errors.WithLabelValues("read").Inc()
		a.cfg.Logger.Error("reading NFS inventory", "err", err)
		return 0
	}
	a.mu.Lock()
	pol := a.policy
	prev := a.known
	a.mu.Unlock()
	settling := a.settling // only Reconcile uses it, and reconciles never overlap

	volumes := a.newVolumeListing()
	var writes []written
	next := make(map[string]int, len(inv.Mounts))
	var starts []pendingWrite // new superblocks' adaptive starts, journaled together
	// startNew journals and writes the starts gathered so far: once the loop has passed the
	// new superblocks (newFirst puts them first), before it checks the known ones.
	startNew := func() {
		if len(starts) == 0 {
			return
		}
		// The controller goes on from these values: journaled first, as its own changes
		// are, so that revert puts back the values from before the first.
		devs := make([]string, len(starts))
		for i, w := range starts {
			devs[i] = w.mount.Device
		}
		if err := tune.JournalReadAheads(a.cfg.Root, devs); err != nil {
			m.Errors.WithLabelValues("journal").Inc()
			a.cfg.Logger.Error("read-ahead of new superblocks not set: the values before could not be journaled", "devices", devs, "err", err)
			starts = nil
			return
		}
		for _, w := range starts {
			if made, _ := a.writeReadAhead(w, volumes, since, trigger); made {
				next[w.mount.Device] = w.target
				tunedNew++
				settling[w.mount.Device] = time.Now()
			}
		}
		starts = nil
	}
	for _, i := range newFirst(inv.Mounts, prev) {
		mnt := &inv.Mounts[i]
		if mnt.ReadAheadKB == nil {
			// ReadMountTable leaves read-ahead to be read here, new superblocks first.
			_, recent := settling[mnt.Device]
			if last, ok := prev[mnt.Device]; ok && trigger == TriggerSettle && !recent {
				mnt.ReadAheadKB = &last
			} else {
				mnt.ReadAheadKB = readReadAhead(a.cfg.Root, mnt.Device)
			}
		}
		if mnt.ReadAheadKB == nil {
			// Usually a superblock being unmounted: its bdi went before its mountinfo line.
			a.cfg.Logger.Debug("read-ahead unreadable", "device", mnt.Device, "mountpoints", mnt.MountPoints)
			continue
		}
		cur := *mnt.ReadAheadKB
		last, seen := prev[mnt.Device]
		if seen {
			startNew() // past the new superblocks
		}
		next[mnt.Device] = cur
		want := pol.Resolve(mnt)
		target := want.ReadAheadKB
		switch {
		case want.Adaptive != nil && seen:
			continue // the controller owns it, and journals its changes (Adapt)
		case want.Adaptive != nil:
			// A new superblock starts now, before its first process opens a file with
			// the kernel's window: at the value learned on its volume, else in its bounds.
			// The controller takes it from there (Adapt).
			kb, ok := adaptiveStart(*want.Adaptive, cur, a.learnedValues(), mnt)
			a.setTarget(mnt.Device, kb)
			if !ok {
				continue
			}
			target = kb
		case !want.change(cur, mnt.RSize, a.cfg.Exact):
			continue
		}
		reason := "new"
		if seen {
			if cur == last && trigger != TriggerReload {
				// Already off at the last reconcile and not changed since: either observe
				// mode or a write that keeps failing, both already reported.
				if want.Mode == policy.ModeObserve {
					continue
				}
				reason = "retry"
			} else {
				reason = "drift"
				if trigger == TriggerReload && cur == last {
					reason = "policy"
				}
			}
		}
		if reason == "drift" {
			m.Drifts.Inc()
		}
		log := a.cfg.Logger.With("device", mnt.Device, "mountpoint", first(mnt.MountPoints), "current_kb", cur, "want_kb", target, "reason", reason, "trigger", trigger)
		if want.Mode == policy.ModeObserve || (want.Adaptive != nil && want.Adaptive.Observe) {
			log.Info("read-ahead differs from profile; observe mode, left alone")
			continue
		}
		if err := a.confirmNFS(volumes, mnt); err != nil {
			m.Errors.WithLabelValues("write").Inc()
			log.Error("setting read-ahead", "err", err)
			continue
		}
		w := pendingWrite{mount: mnt, cur: cur, target: target, reason: reason, log: log}
		if want.Adaptive != nil {
			// Journaled first, all together after the loop: one journal write for a
			// reconcile that finds many new superblocks (an agent's start on a node with
			// thousands of mounts).
			starts = append(starts, w)
			continue
		}
		made, held := a.writeReadAhead(w, volumes, since, trigger)
		if made {
			next[mnt.Device] = target
			if reason == "new" {
				tunedNew++
				settling[mnt.Device] = time.Now()
			}
		}
		if held {
			// A fixed value's effect is judged (verdicts); the controller judges its own.
			writes = append(writes, written{mount: mnt, from: cur, to: target})
		}
	}
	startNew()
	m.Mounts.Set(float64(len(next)))
	written := time.Since(start)
	if a.verdictsLater != nil {
		if len(writes) > 0 || a.verdicts.due(time.Now()) {
			a.verdictsLater(writes)
		}
	} else {
		a.afterReconcile(ctx, writes)
	}
	now := time.Now()
	verdicts := now.Sub(start) - written
	if trigger == TriggerResync || trigger == TriggerStart {
		m.LastResync.Set(float64(now.UnixNano()) / 1e9)
	}
	for dev, at := range settling {
		if _, ok := next[dev]; !ok || now.Sub(at) > settleFor {
			delete(settling, dev)
		}
	}
	a.mu.Lock()
	a.known = next // vanished devices are dropped here
	a.lastOK = now
	if trigger == TriggerResync || trigger == TriggerStart {
		a.lastResync = now
	}
	a.ready = true
	a.mu.Unlock()
	if a.cfg.ReleaseMemory {
		debug.FreeOSMemory()
	}
	// The stages of a reconcile, for a slow reaction: how long the change waited for the
	// loop, the mount table read, the writes, the verdicts' statistics read after them, and
	// the whole reconcile, which the next change waits for.
	a.cfg.Logger.Debug("reconcile", "trigger", trigger, "waited", start.Sub(since), "read", read,
		"written", written, "verdicts", verdicts, "total", time.Since(start),
		"mounts", len(inv.Mounts), "new", tunedNew, "writes", len(writes))
	return tunedNew
}

// view is one read of the host under the policy in force: what /metrics, /status and
// /audit serve.
type view struct {
	snap metrics.Snapshot
	// report is the full audit; nil when the policy has no audit.
	report *audit.Report
	// untuned are the mounts whose read-ahead is not what the policy wants, in the
	// inventory's order.
	untuned []status.Mount
	at      time.Time
}

// Snapshot reads a fresh inventory and audits it under the current policy: the source of
// every scrape.
func (a *Agent) Snapshot(ctx context.Context) (metrics.Snapshot, error) {
	v, err := a.read(ctx)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	return v.snap, nil
}

// read reads a fresh inventory, audits it under the current policy, and notes which
// mounts are not tuned.
func (a *Agent) read(ctx context.Context) (*view, error) {
	inv, err := a.cfg.Read(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	pol := a.policy
	a.mu.Unlock()
	now := time.Now()
	a.sampleStalls(inv, now)
	a.verdicts.observe(inv, now)
	var io *podio.Snapshot
	if a.cfg.PodIO != nil {
		s := a.cfg.PodIO(now)
		io = &s
	}
	a.traffic.observe(inv, io, now)
	v := &view{snap: metrics.Snapshot{Inventory: inv, ReadAheadVerdicts: a.verdicts.latest(), ReadAheadTargets: a.adaptiveTargets(),
		TrafficClasses: a.traffic.latest(), PodIO: io}, at: now}
	if pol != nil && pol.Audit != nil {
		rep := pol.Audit(inv, audit.Options{Classes: v.snap.TrafficClasses, MappedReaders: mappedReaders(v.snap.PodIO)})
		v.report = &rep
		v.snap.Findings = make([]metrics.Finding, 0, len(rep.Findings))
		for _, f := range rep.Findings {
			v.snap.Findings = append(v.snap.Findings, metrics.Finding{Device: f.Device, Rule: f.ID, Severity: f.Severity})
		}
	}
	if pol != nil && pol.Limits != nil {
		v.snap.Limits = pol.Limits(inv)
	}
	if pol != nil && pol.Resolve != nil {
		v.untuned = a.untuned(inv, pol)
	}
	return v, nil
}

// untuned returns the mounts whose read-ahead the agent would change, or does not change
// only because they are observed; a mount whose read-ahead is unreadable counts as tuned.
func (a *Agent) untuned(inv *inventory.Inventory, pol *Policy) []status.Mount {
	var out []status.Mount
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		if m.ReadAheadKB == nil {
			continue
		}
		want := pol.Resolve(m)
		if !want.change(*m.ReadAheadKB, m.RSize, a.cfg.Exact) {
			continue
		}
		out = append(out, status.Mount{Device: m.Device, MountPoint: first(m.MountPoints), Server: m.Server,
			Export: m.Export, ReadAheadKB: *m.ReadAheadKB, WantKB: want.ReadAheadKB, Mode: string(want.Mode)})
	}
	return out
}

// sampleStalls fills inv.Stalled by comparing the transports read now with the sample
// kept from an earlier scrape, adaptive step or recovery run, at least
// inventory.DefaultStallWindow before, so that a scrape never waits for a second sample;
// scrapes closer together than that reuse the last result. For the mounts of a stalled
// server it reads the processes using them (inv.Blocked) and the mounts in progress
// (inv.Mounting); only then does a scrape look at other processes. It returns since when
// each stalled server (by stallKey) has been seen stalled: from the sample before the first
// comparison that showed it, for as long as every later comparison shows it too.
func (a *Agent) sampleStalls(inv *inventory.Inventory, now time.Time) map[string]time.Time {
	since := a.stallsAt(inv, now)
	inventory.ReadBlocked(context.Background(), a.cfg.Root, inv, inventory.HolderLimits{})
	return since
}

// stallsAt fills inv.Stalled as sampleStalls does, without looking for the processes
// (scrapes, adaptive steps and recovery runs share the transport sample), and returns
// since when each stalled server has been seen stalled.
func (a *Agent) stallsAt(inv *inventory.Inventory, now time.Time) map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if since := now.Sub(a.transports.At); a.transports.At.IsZero() || since >= inventory.DefaultStallWindow {
		if !a.transports.At.IsZero() {
			a.stalled = inventory.Stalls(a.transports.Transports, inv.Transports, since)
			next := make(map[string]time.Time, len(a.stalled))
			for _, s := range a.stalled {
				k := stallKey(s)
				if t, ok := a.stalledSince[k]; ok {
					next[k] = t
				} else {
					next[k] = a.transports.At
				}
			}
			a.stalledSince = next
		}
		a.transports = inventory.TransportSample{Transports: inv.Transports, At: now}
	}
	inv.Stalled = a.stalled
	return maps.Clone(a.stalledSince)
}

// Ready reports whether the first reconcile has completed.
func (a *Agent) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// Healthy reports whether a reconcile succeeded within three resync periods.
func (a *Agent) Healthy(now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ready {
		return nil // starting; readiness says so
	}
	if age := now.Sub(a.lastOK); age > 3*a.cfg.Resync {
		return fmt.Errorf("last successful reconcile %s ago", age.Round(time.Second))
	}
	return nil
}

// Known returns how many superblocks the agent tracks; vanished ones are not counted.
func (a *Agent) Known() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.known)
}

// procDir is the /proc entry of pid: "self" for 0.
func procDir(pid int) string {
	if pid == 0 {
		return "self"
	}
	return strconv.Itoa(pid)
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// pendingWrite is one read-ahead write a reconcile decided: target for mount, found at cur,
// for reason (new, drift, policy, retry), with its log.
type pendingWrite struct {
	mount       *inventory.Mount
	cur, target int
	reason      string
	log         *slog.Logger
}

// writeReadAhead makes w's write through the guarded writer and counts it; it reports
// whether the value was written (made) and whether it held until read back (held). A write
// another writer overwrote before the read-back is made, not held: the next reconcile or
// settle re-check repairs it.
func (a *Agent) writeReadAhead(w pendingWrite, volumes *inventory.VolumeListing, since time.Time, trigger Trigger) (made, held bool) {
	m := a.cfg.Metrics
	err := setReadAhead(a.cfg.Root, w.mount, volumes, w.target)
	overwritten := errors.Is(err, hostfs.ErrOverwritten)
	if err != nil && !overwritten {
		m.Errors.WithLabelValues("write").Inc()
		w.log.Error("setting read-ahead", "err", err)
		return false, false
	}
	m.Repairs.WithLabelValues(w.reason).Inc()
	if overwritten {
		// Written, then changed before it was read back (udev's nfsrahead on a new
		// superblock, say): a drift, which the next reconcile or settle re-check repairs.
		w.log.Warn("read-ahead set, then changed by another writer; it is checked again", "err", err)
		return true, false
	}
	took := time.Since(since)
	if w.reason == "new" && trigger == TriggerMountinfo {
		m.Reaction.Observe(took.Seconds())
	}
	w.log.Info("read-ahead set", "took", took)
	return true, true
}
