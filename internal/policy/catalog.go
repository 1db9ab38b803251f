package policy

import (
	_ "embed"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/backend"
	"github.com/nfstune/nfstune/internal/strictyaml"
)

// profilesYAML is the built-in catalog: backend facts and profiles, with the source of each
// number in a comment.
//
//go:embed profiles.yaml
var profilesYAML []byte

// Backend are the facts nfstune knows about an NFS service, used by the audit rules.
type Backend struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Versions are the NFS versions the service supports ("3", "4.0", "4.1", "4.2");
	// empty means any.
	Versions []string `json:"versions,omitempty"`
	// MaxNConnect is the largest nconnect that still helps on this service.
	MaxNConnect int `json:"max_nconnect"`
	// NConnectGain says whether the service is documented to gain from nconnect, so that a
	// mount without it is worth reporting.
	NConnectGain bool `json:"nconnect_gain"`
	// MaxRSize is the largest recommended rsize/wsize in bytes; 0 when only the kernel's
	// 1 MiB limit applies.
	MaxRSize int `json:"max_rsize,omitempty"`
	// RequiresNoLock says the service has no NLM lock manager (Azure Blob NFS), so NFSv3
	// mounts need nolock.
	RequiresNoLock bool `json:"requires_nolock,omitempty"`
	// Source names the documents the facts come from.
	Source string `json:"source"`

	profile   Overrides
	workloads map[string]Overrides
}

// Workload is a kind of use of a mount.
type Workload struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Static says the data changes rarely, so caching attributes long is safe.
	Static bool `json:"static"`

	profile Overrides
}

// catalog is the parsed built-in data.
type catalog struct {
	backends  map[string]*Backend
	workloads map[string]*Workload
}

// Backends lists the canonical backend names nfstune knows, in a stable order; every
// function that takes a backend name also takes its aliases (backend.Canonical).
func Backends() []string {
	return backend.Names()
}

// Workloads lists the workload names nfstune knows, in a stable order.
func Workloads() []string {
	return []string{WorkloadSequentialRead, WorkloadStaticTools, WorkloadWebContent, WorkloadGeneral, WorkloadSmallRandom}
}

// parseCatalog decodes the built-in catalog strictly.
func parseCatalog(name string, b []byte) (*catalog, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	d := &decoder{file: name}
	c := &catalog{backends: map[string]*Backend{}, workloads: map[string]*Workload{}}
	if len(root.Content) != 1 {
		return nil, fmt.Errorf("%s: empty catalog", name)
	}
	d.fields(root.Content[0], "", map[string]func(*yaml.Node, string){
		"backends": func(v *yaml.Node, key string) {
			d.named(v, key, Backends(), func(name string, n *yaml.Node, path string) {
				c.backends[name] = d.backend(name, n, path)
			})
		},
		"workloads": func(v *yaml.Node, key string) {
			d.named(v, key, Workloads(), func(name string, n *yaml.Node, path string) {
				c.workloads[name] = d.workload(name, n, path)
			})
		},
	})
	for _, b := range Backends() {
		if c.backends[b] == nil {
			d.errorf(&root, "backends", "missing backend %q", b)
		}
	}
	for _, w := range Workloads() {
		if c.workloads[w] == nil {
			d.errorf(&root, "workloads", "missing workload %q", w)
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// named walks a mapping whose keys must be among allowed.
func (d *decoder) named(n *yaml.Node, path string, allowed []string, f func(name string, v *yaml.Node, path string)) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping, got %s", kindName(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(allowed, k.Value) {
			d.errorf(k, join(path, k.Value), "unknown name (did you mean %q? want one of %v)", strictyaml.Nearest(k.Value, allowed), allowed)
			continue
		}
		f(k.Value, v, join(path, k.Value))
	}
}

func (d *decoder) backend(name string, n *yaml.Node, path string) *Backend {
	b := &Backend{Name: name, workloads: map[string]Overrides{}}
	d.fields(n, path, map[string]func(*yaml.Node, string){
		"description": func(v *yaml.Node, key string) { b.Description, _ = d.str(v, key) },
		"source":      func(v *yaml.Node, key string) { b.Source, _ = d.str(v, key) },
		"versions":    func(v *yaml.Node, key string) { b.Versions, _ = d.strings(v, key) },
		"maxNConnect": func(v *yaml.Node, key string) { b.MaxNConnect, _ = d.size(v, key) },
		"nconnectGain": func(v *yaml.Node, key string) {
			b.NConnectGain, _ = d.boolean(v, key)
		},
		"maxRSize": func(v *yaml.Node, key string) { b.MaxRSize, _ = d.size(v, key) },
		"requiresNoLock": func(v *yaml.Node, key string) {
			b.RequiresNoLock, _ = d.boolean(v, key)
		},
		"profile": func(v *yaml.Node, key string) { d.fields(v, key, d.profileFields(&b.profile)) },
		"workloads": func(v *yaml.Node, key string) {
			d.named(v, key, Workloads(), func(w string, n *yaml.Node, path string) {
				var o Overrides
				d.fields(n, path, d.profileFields(&o))
				b.workloads[w] = o
			})
		},
	})
	return b
}

func (d *decoder) workload(name string, n *yaml.Node, path string) *Workload {
	w := &Workload{Name: name}
	d.fields(n, path, map[string]func(*yaml.Node, string){
		"description": func(v *yaml.Node, key string) { w.Description, _ = d.str(v, key) },
		"static":      func(v *yaml.Node, key string) { w.Static, _ = d.boolean(v, key) },
		"profile":     func(v *yaml.Node, key string) { d.fields(v, key, d.profileFields(&w.profile)) },
	})
	return w
}

// profile builds the built-in profile for a backend and workload.
func (c *catalog) profile(name, workload string) (Profile, error) {
	canonical, _ := backend.Canonical(name)
	b, ok := c.backends[canonical]
	if !ok {
		return Profile{}, fmt.Errorf("unknown backend %q (want one of %v)", name, Backends())
	}
	w, ok := c.workloads[workload]
	if !ok {
		return Profile{}, fmt.Errorf("unknown workload %q (want one of %v)", workload, Workloads())
	}
	p := Profile{Backend: canonical, Workload: workload}
	b.profile.apply(&p)
	base := p.ReadAheadKB
	w.profile.apply(&p)
	p.ReadAheadKB = max(p.ReadAheadKB, base) // a workload only raises read-ahead
	if o, ok := b.workloads[workload]; ok {
		o.apply(&p)
	}
	return p, nil
}
