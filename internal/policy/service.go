package policy

import (
	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/plan"
)

// Service is the cloud file service behind a rule's mounts, as provisioned: the planner's
// model (nfstune plan) gives the throughput limit that provisioning has, which the agent
// exports so that dashboards and alerts can show the headroom left.
type Service struct {
	// Name and Tier are the planner's names (nfstune plan show lists them), resolved from
	// what the config wrote: "anf" is azure-netapp-files.
	Name string `json:"name"`
	Tier string `json:"tier"`
	// Capacity is the provisioned size as written, e.g. "4TiB".
	Capacity string `json:"capacity"`
	// ReadBytesPerSecond and WriteBytesPerSecond are the model's throughput limits at
	// Capacity. Some services publish different limits for the two directions.
	ReadBytesPerSecond  float64 `json:"readBytesPerSecond"`
	WriteBytesPerSecond float64 `json:"writeBytesPerSecond"`
}

// service decodes a rule's service: {name, tier, capacity} and checks it against the
// planner's models, which must be able to provision that tier at that capacity.
func (d *decoder) service(n *yaml.Node, prefix string) *Service {
	var name, tier, capacity string
	ok := d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"name":     func(v *yaml.Node, key string) { name, _ = d.str(v, key) },
		"tier":     func(v *yaml.Node, key string) { tier, _ = d.str(v, key) },
		"capacity": func(v *yaml.Node, key string) { capacity, _ = d.str(v, key) },
	})
	if !ok {
		return nil
	}
	if name == "" || capacity == "" {
		d.errorf(n, prefix, "want name and capacity (and tier when the service has several), e.g. {name: azure-files, tier: provisioned-v2, capacity: 4TiB}")
		return nil
	}
	size, err := plan.ParseSize(capacity)
	if err != nil {
		d.errorf(n, prefix+".capacity", "%v", err)
		return nil
	}
	cat, err := plan.LoadCatalog()
	if err != nil {
		d.errorf(n, prefix, "%v", err)
		return nil
	}
	s := &Service{Capacity: capacity}
	for _, access := range []plan.Access{plan.Read, plan.Write} {
		o, err := plan.TierAt(cat, name, tier, size, access)
		if err != nil {
			d.errorf(n, prefix, "%s at %s: %v", name, capacity, err)
			return nil
		}
		s.Name, s.Tier = o.Service, o.Tier
		limit := o.MiBps * plan.MiB
		if access == plan.Read {
			s.ReadBytesPerSecond = limit
		} else {
			s.WriteBytesPerSecond = limit
		}
	}
	return s
}
