package agent

import (
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/status"
	"github.com/nfstune/nfstune/internal/version"
)

// status is the agent's /status document for the read v, or for a read that failed with
// readErr (v is then nil).
func (a *Agent) status(v *view, readErr error, now time.Time) status.Status {
	s := status.Status{
		APIVersion: status.APIVersion,
		Kind:       status.KindStatus,
		Node:       a.cfg.Node,
		Version:    version.Version,
		Ready:      a.Ready(),
		Mode:       string(policy.ModeEnforce),
	}
	if err := a.Healthy(now); err != nil {
		s.Unhealthy = err.Error()
	}
	s.Learned = a.learned.Load().values()
	a.mu.Lock()
	if pol := a.policy; pol != nil {
		s.Policy = pol.Info
		if pol.Mode == policy.ModeObserve {
			s.Mode = string(policy.ModeObserve)
		}
	}
	a.mu.Unlock()
	if readErr != nil {
		s.ReadError = readErr.Error()
	}
	if v == nil {
		return s
	}
	s.GatheredAt = v.at
	inv := v.snap.Inventory
	s.Mounts = len(inv.Mounts)
	s.Tuned = s.Mounts - len(v.untuned)
	s.Untuned = firstN(v.untuned, status.MaxListed)
	for _, f := range v.snap.Findings {
		s.Findings.Add(f.Severity)
	}
	mounts := map[string]int{}
	blocked := map[string]int{}
	for _, b := range inv.Blocked {
		mounts[b.ServerAddr]++
		blocked[b.ServerAddr] += len(b.Holders)
	}
	for _, st := range firstN(inv.Stalled, status.MaxListed) {
		s.Stalled = append(s.Stalled, status.Server{Addr: st.Addr, Port: st.Port, Waiting: st.Waiting,
			Mounts: mounts[st.Addr], BlockedProcesses: blocked[st.Addr]})
	}
	return s
}

// audit is the agent's /audit document for the read v.
func (a *Agent) audit(v *view) status.Audit {
	doc := status.Audit{
		APIVersion: status.APIVersion,
		Kind:       status.KindAudit,
		Node:       a.cfg.Node,
		GatheredAt: v.at,
		Warnings:   v.snap.Inventory.Warnings,
	}
	if v.report != nil {
		doc.Report = *v.report
	} else {
		doc.Report = audit.Report{Mounts: v.snap.Inventory.Mounts, Findings: []audit.Finding{}}
	}
	if doc.Warnings == nil {
		doc.Warnings = []string{}
	}
	return doc
}

func firstN[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}
