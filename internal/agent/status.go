package agent

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/readahead"
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
	s.Learned = a.learned.Load().Values()
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
	s.PodIO = podTraffic(v.snap.PodIO, inv)
	s.TrafficClasses = listedClasses(v.snap.TrafficClasses, inv)
	return s
}

// listedClasses are the superblocks' classes as /status lists them: those whose mount or
// one of whose pods has a class other than unknown, by device, at most MaxListed.
func listedClasses(classes map[string]readahead.Classification, inv *inventory.Inventory) []status.TrafficClass {
	var out []status.TrafficClass
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		c, ok := classes[m.Device]
		if !ok || (c.Class == readahead.Unknown && !slices.ContainsFunc(c.Pods, func(p readahead.PodClass) bool { return p.Class != readahead.Unknown })) {
			continue
		}
		t := status.TrafficClass{Device: m.Device, MountPoint: first(m.MountPoints), Class: string(c.Class), Why: c.Why}
		for _, p := range c.Pods {
			t.Pods = append(t.Pods, status.PodClass{PodUID: p.UID, Class: string(p.Class), Why: p.Why})
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b status.TrafficClass) int { return cmp.Compare(a.Device, b.Device) })
	return firstN(out, status.MaxListed)
}

// mappedReaders are, by device, the pods the collector saw read through page faults over its
// last interval, busiest first (audit NFS005 names them); nil without the collector.
func mappedReaders(snap *podio.Snapshot) map[string][]audit.MappedReader {
	if snap == nil || len(snap.Rates) == 0 {
		return nil
	}
	out := map[string][]audit.MappedReader{}
	for k, r := range snap.Rates {
		if k.PodUID == "" || r.FaultReadBytes <= 0 {
			continue
		}
		out[k.Device] = append(out[k.Device], audit.MappedReader{PodUID: k.PodUID, FaultBytesPerSecond: r.FaultReadBytes, MajorFaultsPerSecond: r.MajorFaults})
	}
	for _, readers := range out {
		slices.SortFunc(readers, func(a, b audit.MappedReader) int {
			return cmp.Or(cmp.Compare(b.FaultBytesPerSecond, a.FaultBytesPerSecond), cmp.Compare(a.PodUID, b.PodUID))
		})
	}
	return out
}

// podTraffic is the collector's snapshot as /status lists it: the pairs of a pod and a
// superblock with traffic in the last interval, busiest first, with the mount's names.
func podTraffic(snap *podio.Snapshot, inv *inventory.Inventory) *status.PodIO {
	if snap == nil {
		return nil
	}
	out := &status.PodIO{Loaded: snap.Loaded, Why: snap.Why}
	if snap.Loaded && len(snap.Missing) > 0 {
		var why []string
		for _, part := range podio.Parts {
			if w := snap.Missing[part]; w != "" {
				why = append(why, string(part)+" not loaded: "+w)
			}
		}
		out.Why = strings.Join(why, "; ")
	}
	byDevice := make(map[string]*inventory.Mount, len(inv.Mounts))
	for i := range inv.Mounts {
		byDevice[inv.Mounts[i].Device] = &inv.Mounts[i]
	}
	for k, r := range snap.Rates {
		if r.ReadBytes == 0 && r.ServerReadBytes == 0 && r.WriteBytes == 0 && r.MajorFaults == 0 {
			continue
		}
		t := status.PodTraffic{PodUID: k.PodUID, Device: k.Device, ReadBytes: r.ReadBytes, ServerReadBytes: r.ServerReadBytes,
			FaultReadBytes: r.FaultReadBytes, WriteBytes: r.WriteBytes, MajorFaults: r.MajorFaults, ReadLatency: r.ReadLatencyMean}
		if m := byDevice[k.Device]; m != nil {
			t.MountPoint, t.Server, t.Export = first(m.MountPoints), m.Server, m.Export
		}
		out.Pods = append(out.Pods, t)
	}
	slices.SortFunc(out.Pods, func(a, b status.PodTraffic) int {
		return cmp.Or(cmp.Compare(b.ServerReadBytes, a.ServerReadBytes), cmp.Compare(b.ReadBytes, a.ReadBytes),
			cmp.Compare(b.WriteBytes, a.WriteBytes), cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Device, b.Device))
	})
	out.Pods = firstN(out.Pods, status.MaxListed)
	return out
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
