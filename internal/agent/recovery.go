package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/tune"
)

// What the recovery rules make of a superblock whose server is stalled (the state label of
// nfstune_recovery_superblocks).
const (
	// RecoveryWaiting: the server has been stalled for less than the window.
	RecoveryWaiting = "waiting"
	// RecoveryKept: someone may still need the superblock; it is left alone.
	RecoveryKept = "kept"
	// RecoveryBlind: the agent cannot see what it needs to tell that nobody uses the
	// superblock (kubelet's root directory, or pods' processes through their cgroups); it
	// is left alone, and the agent says why.
	RecoveryBlind = "blind"
	// RecoveryEligible: nobody needs it; the action applies.
	RecoveryEligible = "eligible"
)

// Results of a recovery action (the result label of nfstune_recovery_actions_total).
const (
	ResultDone     = "done"     // shut down, or reported
	ResultObserved = "observed" // observe mode: logged and counted, nothing written
	ResultAborted  = "aborted"  // the last checks before the write said no
	ResultFailed   = "failed"   // the write or a read it needs failed
)

// DefaultRecoveryEvery is how often the recovery rules run: a superblock is freed at most
// this long, plus a stall window, after its server's window has passed.
const DefaultRecoveryEvery = 10 * time.Second

// recoveryFacts are what the recovery rules decide on; all of it comes from /proc and /sys.
type recoveryFacts struct {
	now    time.Time
	mounts []inventory.Mount
	// stalled are the servers seen stalled at the last comparison of transports, and since
	// when each has been seen stalled without a break (by stallKey).
	stalled []inventory.StalledServer
	since   map[string]time.Time
	// blocked are the superblocks of the stalled servers with their holders
	// (inventory.ReadBlocked).
	blocked []inventory.BlockedMount
	// procs is the scan of every process with the pods' process counts; nil when not
	// scanned.
	procs *inventory.ProcessScan
	// selfPod is the agent's own pod (Config.PodUID), whose processes the scan must find
	// for its count of a pod's processes to mean anything; empty outside a pod.
	selfPod string
	// kubeletRoot is kubelet's root directory as configured (Config.KubeletRoot); empty
	// takes it from procs.KubeletRoots.
	kubeletRoot kubelet.Root
	// knob tells, by device, whether /sys/fs/nfs/<device>/shutdown exists.
	knob map[string]bool
}

// recoveryDecision is what the rules make of one superblock of a stalled server.
type recoveryDecision struct {
	Device      string
	Source      string
	ServerAddr  string
	MountPoints []string
	// Pods are the pods whose volume paths are among MountPoints.
	Pods []string
	// StalledFor is how long the server has been seen stalled.
	StalledFor time.Duration
	// State is RecoveryWaiting, RecoveryKept, RecoveryBlind or RecoveryEligible.
	State string
	// Action is, when eligible, policy.RecoveryShutdown or policy.RecoveryReport (the
	// policy's action, or report where the kernel lacks the shutdown attribute).
	Action string
	// Why says why, in a sentence for the log.
	Why string
	// Unmounting are the unmount programs seen waiting on its mount points.
	Unmounting []int
}

// stallKey names a stalled server: one address has one per port behind local proxies.
func stallKey(s inventory.StalledServer) string { return fmt.Sprintf("%s:%d", s.Addr, s.Port) }

// decideRecovery applies the recovery rules to every superblock of a stalled server that
// r selects, in device order. A superblock is eligible only when all of these hold, in
// this order (the first that fails gives the state):
//
//  1. its server has been seen stalled, without a break, for at least r.Window (else
//     waiting);
//  2. kubelet's root directory is known: configured, or the one root every kubelet
//     process names (else blind);
//  3. every one of its mount points is a pod volume path or a CSI staging path below
//     that root: nothing else on the host mounted it (else kept);
//  4. the holder scan looked at every process, and no process holds it (an open file, a
//     working directory, a root), whatever its name: a command name proves nothing
//     (else kept);
//  5. the process scan looked at every process (else kept);
//  6. that scan found the agent's own pod's processes through their cgroups: a pod
//     layout the agent does not recognise (a kubelet --cgroup-root, a node nested in a
//     container) would make every pod look empty (else blind);
//  7. no process runs in the cgroup of a pod whose volume it is: kubelet stops every
//     container and the sandbox of a pod before it unmounts the pod's volumes, and a pod
//     that is running always has its sandbox (else kept).
//
// It reads nothing: the facts are gathered before.
func decideRecovery(r policy.Recovery, f recoveryFacts) []recoveryDecision {
	if !r.Enabled {
		return nil
	}
	var out []recoveryDecision
	for i := range f.mounts {
		m := &f.mounts[i]
		if !r.Selects(m) {
			continue
		}
		var stall *inventory.StalledServer
		for j := range f.stalled {
			if f.stalled[j].Reaches(m) {
				stall = &f.stalled[j]
				break
			}
		}
		if stall == nil {
			continue
		}
		d := recoveryDecision{Device: m.Device, Source: m.Server + ":" + m.Export, ServerAddr: stall.Addr, MountPoints: m.MountPoints}
		if since, ok := f.since[stallKey(*stall)]; ok {
			d.StalledFor = f.now.Sub(since)
		}
		d.State, d.Why = eligibility(r, f, m, &d)
		if d.State == RecoveryEligible {
			d.Action = r.Action
			if d.Action == policy.RecoveryShutdown && !f.knob[m.Device] {
				d.Action = policy.RecoveryReport
				d.Why += fmt.Sprintf("; the kernel has no %s (Linux %s and later), so it is only reported: umount -f then umount -l of its mount points free what is left", hostfs.NFSShutdownAttr(m.Device), tune.ShutdownKernel)
			}
		}
		out = append(out, d)
	}
	return out
}

// eligibility runs the rules of decideRecovery on m, filling d's pods and unmount programs.
func eligibility(r policy.Recovery, f recoveryFacts, m *inventory.Mount, d *recoveryDecision) (state, why string) {
	if d.StalledFor < r.Window {
		return RecoveryWaiting, fmt.Sprintf("server %s stalled for %s of the %s window", d.ServerAddr, d.StalledFor.Round(time.Second), r.Window)
	}
	root, why := nodeKubeletRoot(f)
	if root == "" {
		return RecoveryBlind, why
	}
	for _, mp := range m.MountPoints {
		if uid, ok := root.VolumePod(mp); ok {
			if !slices.Contains(d.Pods, uid) {
				d.Pods = append(d.Pods, uid)
			}
			continue
		}
		if !root.IsStaging(mp) {
			return RecoveryKept, fmt.Sprintf("mounted at %s, which is not a volume path below kubelet's root %s: someone on the host mounted it", mp, root)
		}
	}
	slices.Sort(d.Pods)
	bi := slices.IndexFunc(f.blocked, func(b inventory.BlockedMount) bool { return b.Device == m.Device })
	if bi < 0 {
		return RecoveryKept, "its holders were not read"
	}
	b := f.blocked[bi]
	if b.Incomplete {
		return RecoveryKept, fmt.Sprintf("not every process could be inspected for holders (%d uninspected): one may still use it", b.Uninspected)
	}
	if len(b.Holders) > 0 {
		h := b.Holders[0]
		who := fmt.Sprintf("pid %d (%s)", h.PID, h.Comm)
		if h.PodUID != "" {
			who += " of pod " + h.PodUID
		}
		return RecoveryKept, fmt.Sprintf("%s holds it (%s)", who, strings.Join(h.Via, "+"))
	}
	if f.procs == nil {
		return RecoveryKept, "the processes were not scanned"
	}
	if !f.procs.Complete {
		return RecoveryKept, "the process scan stopped before the end: a pod's process may have been missed"
	}
	if f.selfPod == "" {
		return RecoveryBlind, "the agent does not know its own pod (--pod-uid, $POD_UID), so it cannot prove that it sees pods' processes through their cgroups"
	}
	if f.procs.PodProcesses[f.selfPod] == 0 {
		return RecoveryBlind, fmt.Sprintf("the process scan found no process of the agent's own pod %s through the cgroups kubelet and the runtime name: pods' processes are not seen (a kubelet --cgroup-root, a node nested in a container, a cgroup namespace without the pod's sandbox beside the agent, or cgroup files it cannot read), so an empty pod proves nothing", f.selfPod)
	}
	for _, uid := range d.Pods {
		if n := f.procs.PodProcesses[uid]; n > 0 {
			return RecoveryKept, fmt.Sprintf("pod %s still runs %d process(es): it is not being torn down", uid, n)
		}
	}
	for _, p := range f.procs.Programs {
		if p.Program == inventory.ProgramUnmount && slices.Contains(m.MountPoints, p.Target) {
			d.Unmounting = append(d.Unmounting, p.PID)
		}
	}
	why = fmt.Sprintf("server %s stalled for %s; mounted only for pods %s, which run no process any more", d.ServerAddr, d.StalledFor.Round(time.Second), strings.Join(d.Pods, ", "))
	if len(d.Pods) == 0 {
		why = fmt.Sprintf("server %s stalled for %s; mounted only at a CSI staging path, for no pod of this node", d.ServerAddr, d.StalledFor.Round(time.Second))
	}
	if len(d.Unmounting) > 0 {
		why += fmt.Sprintf("; an unmount waits on it (pid %d)", d.Unmounting[0])
	}
	return RecoveryEligible, why
}

// nodeKubeletRoot returns kubelet's root directory: the configured one, else the one every
// kubelet process names; "" and why when it is not known.
func nodeKubeletRoot(f recoveryFacts) (kubelet.Root, string) {
	if f.kubeletRoot != "" {
		return f.kubeletRoot, ""
	}
	if f.procs == nil {
		return "", "kubelet's root directory is not known yet: the processes were not scanned"
	}
	switch roots := f.procs.KubeletRoots; {
	case len(roots) == 0:
		return "", "no kubelet process was seen and no --kubelet-root-dir is set: kubelet's root directory is not known"
	case len(roots) > 1 || roots[0] == "":
		return "", fmt.Sprintf("the kubelet processes seen do not name one root directory (%q): set --kubelet-root-dir", roots)
	default:
		return roots[0], ""
	}
}

// pastWindow reports whether a superblock r selects has a server stalled for at least the
// window: only then is the scan of every process's cgroup worth its cost.
func pastWindow(r policy.Recovery, f recoveryFacts) bool {
	for _, d := range decideRecovery(r, f) {
		if d.State != RecoveryWaiting {
			return true
		}
	}
	return false
}

// recoveryTried is what the agent remembers of an action on a superblock, so that it acts
// once and retries a failure only after a window. It is kept with the action and mode it
// was taken in: what observe mode logged, or a report, is no shutdown, and a policy that
// turns to enforce or to shutdown acts on the superblock at its next run.
type recoveryTried struct {
	source string
	action string
	mode   policy.Mode
	at     time.Time
	final  bool
}

// settles reports whether the action t remembers stands for d under r: the same superblock,
// action and mode, and either final or too recent to retry.
func (t recoveryTried) settles(r policy.Recovery, d recoveryDecision, now time.Time) bool {
	return t.source == d.Source && t.action == d.Action && t.mode == r.Mode && (t.final || now.Sub(t.at) < r.Window)
}

// Recover runs the recovery rules once: it reads the inventory, compares the transports
// with the last sample, gathers the facts, decides, and acts on the eligible superblocks.
// It does nothing while the policy's recovery is off.
func (a *Agent) Recover(ctx context.Context, now time.Time) {
	a.mu.Lock()
	pol := a.policy
	a.mu.Unlock()
	if pol == nil || !pol.Recovery.Enabled {
		a.cfg.Metrics.setRecoveryStates(nil)
		return
	}
	r := pol.Recovery
	inv, err := a.cfg.Read(ctx)
	if err != nil {
		a.cfg.Metrics.Errors.WithLabelValues("read").Inc()
		a.cfg.Logger.Error("recovery: reading NFS inventory", "err", err)
		return
	}
	since := a.sampleStalls(inv, now)
	f := recoveryFacts{now: now, mounts: inv.Mounts, stalled: inv.Stalled, since: since, blocked: inv.Blocked, knob: map[string]bool{},
		selfPod: a.cfg.PodUID, kubeletRoot: a.cfg.KubeletRoot}
	for _, m := range inv.Mounts {
		if _, err := hostfs.ReadNFSShutdown(a.cfg.Root, m.Device); !errors.Is(err, fs.ErrNotExist) {
			f.knob[m.Device] = true
		}
	}
	if pastWindow(r, f) {
		scan := inventory.ScanProcesses(ctx, a.cfg.Root, inventory.ScanOptions{Pods: true, SelfPod: a.cfg.PodUID})
		f.procs = &scan
	}
	decisions := decideRecovery(r, f)
	a.cfg.Metrics.setRecoveryStates(decisions)

	// Forget superblocks that went: their devices may be reused.
	present := map[string]bool{}
	for _, m := range inv.Mounts {
		present[m.Device] = true
	}
	for dev := range a.tried {
		if !present[dev] {
			delete(a.tried, dev)
		}
	}
	if !slices.ContainsFunc(decisions, func(d recoveryDecision) bool { return d.State == RecoveryBlind }) {
		a.blindWhy = "" // seeing again: the next blind spell is said at warn level again
	}
	for _, d := range decisions {
		log := a.cfg.Logger.With("device", d.Device, "source", d.Source, "server_addr", d.ServerAddr,
			"mountpoints", d.MountPoints, "pods", d.Pods, "stalled_for", d.StalledFor.Round(time.Second).String())
		if d.State == RecoveryBlind {
			// Said once per reason at warn level: the agent cannot do its job until someone
			// fixes its view of the node.
			level := slog.LevelDebug
			if a.blindWhy != d.Why {
				level, a.blindWhy = slog.LevelWarn, d.Why
			}
			log.Log(ctx, level, "recovery: left alone, the agent cannot see who uses it", "state", d.State, "why", d.Why)
			continue
		}
		if d.State != RecoveryEligible {
			log.Debug("recovery: left alone", "state", d.State, "why", d.Why)
			continue
		}
		if t, ok := a.tried[d.Device]; ok && t.settles(r, d, now) {
			continue
		}
		result := a.recoverOne(ctx, r, d, log, now)
		a.cfg.Metrics.RecoveryActions.WithLabelValues(d.Action, result).Inc()
		a.tried[d.Device] = recoveryTried{source: d.Source, action: d.Action, mode: r.Mode, at: now, final: result == ResultDone || result == ResultObserved}
	}
}

// recoverOne carries out the decision on one eligible superblock and returns the result.
func (a *Agent) recoverOne(ctx context.Context, r policy.Recovery, d recoveryDecision, log *slog.Logger, now time.Time) string {
	if r.Mode == policy.ModeObserve {
		log.Warn("recovery: would "+d.Action+"; observe mode, left alone", "action", d.Action, "why", d.Why)
		return ResultObserved
	}
	if d.Action == policy.RecoveryReport {
		log.Warn("recovery: nobody needs this superblock of a dead server; reported only", "action", d.Action, "why", d.Why)
		return ResultDone
	}
	plan, err := tune.PlanShutdown(ctx, a.cfg.Root, d.Device, tune.ShutdownOptions{PID: a.cfg.PID, StallWindow: a.cfg.RecoveryStallWindow})
	if err != nil {
		if errors.Is(err, tune.ErrNotStalled) || errors.Is(err, tune.ErrNoMount) || errors.Is(err, inventory.ErrNotNFS) {
			log.Info("recovery: not shutting down", "why", d.Why, "err", err)
			return ResultAborted
		}
		log.Error("recovery: planning the shutdown", "why", d.Why, "err", err)
		return ResultFailed
	}
	if plan.Source != d.Source {
		log.Info("recovery: not shutting down: the device shows another superblock", "planned", plan.Source)
		return ResultAborted
	}
	if plan.AlreadyShutDown {
		log.Info("recovery: already shut down; nothing written")
		return ResultDone
	}
	if len(plan.Warnings) > 0 {
		log.Info("recovery: not shutting down: the holders could not all be read again", "warnings", plan.Warnings)
		return ResultAborted
	}
	for _, h := range plan.Affected {
		if h.Kind == tune.HolderProcess {
			log.Info("recovery: not shutting down: a process holds it now", "holder", h.Name, "detail", h.Detail)
			return ResultAborted
		}
	}
	res, err := tune.Shutdown(ctx, a.cfg.Root, plan, now)
	if err != nil {
		if res == nil && (errors.Is(err, tune.ErrNotStalled) || errors.Is(err, tune.ErrSuperblockChanged) || ctx.Err() != nil) {
			log.Info("recovery: not shutting down", "why", d.Why, "err", err)
			return ResultAborted
		}
		log.Error("recovery: shutting down", "why", d.Why, "err", err)
		return ResultFailed
	}
	log.Warn("recovery: superblock shut down; every request on it now fails with EIO, so its unmount can finish",
		"why", d.Why, "attribute", plan.Attribute, "read_back", res.ReadBack, "journal", res.Journal)
	return ResultDone
}
