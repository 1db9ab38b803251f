package agent

import (
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

// ServiceLimits returns, for every mount whose policy rule names the provisioned service
// behind it, that service's read and write limits, labelled with the mount's server (the
// one behind a local proxy: inventory.Mount.ServerName) and export, as the mount series
// are. The collector exports each distinct limit once.
func ServiceLimits(inv *inventory.Inventory, resolve func(*inventory.Mount) policy.Resolved) []metrics.ServiceLimit {
	var out []metrics.ServiceLimit
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		s := resolve(m).Service
		if s == nil {
			continue
		}
		l := metrics.ServiceLimit{Server: m.ServerName(), Export: m.Export, Service: s.Name, Tier: s.Tier}
		l.Access, l.BytesPerSecond = "read", s.ReadBytesPerSecond
		out = append(out, l)
		l.Access, l.BytesPerSecond = "write", s.WriteBytesPerSecond
		out = append(out, l)
	}
	return out
}
