package plan

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nfstune/nfstune/internal/backend"
	"github.com/nfstune/nfstune/internal/strictyaml"
)

//go:embed models.yaml
var modelsYAML []byte

// APIVersion is the apiVersion of the embedded models and of user price files.
const APIVersion = "nfstune.io/v1alpha1"

// Catalog is the set of services and tiers the planner knows, with their sources.
type Catalog struct {
	APIVersion string            `yaml:"apiVersion" json:"apiVersion"`
	Kind       string            `yaml:"kind" json:"kind"`
	Sources    map[string]Source `yaml:"sources" json:"sources"`
	Services   []Service         `yaml:"services" json:"services"`
}

// Source is a vendor document that published some of the numbers.
type Source struct {
	Doc  string `yaml:"doc" json:"doc"`
	URL  string `yaml:"url" json:"url"`
	Date string `yaml:"date" json:"date"` // when the document was read, YYYY-MM
}

// Service is one NFS offering, such as Azure Files or Amazon EFS.
type Service struct {
	// Name is the service's canonical backend name; its aliases are package backend's.
	Name  string `yaml:"name" json:"name"`
	Title string `yaml:"title" json:"title"`
	Tiers []Tier `yaml:"tiers" json:"tiers"`
}

// Tier is a service level or billing model of a service with its model's constants.
type Tier struct {
	Name   string            `yaml:"name" json:"name"`
	Title  string            `yaml:"title" json:"title"`
	Model  string            `yaml:"model" json:"model"`
	Params map[string]Number `yaml:"params" json:"params"`
}

// Number is a published constant with its provenance.
type Number struct {
	V    float64 `yaml:"v" json:"value"`
	Src  string  `yaml:"src" json:"source"`
	Note string  `yaml:"note" json:"note,omitempty"`
}

// LoadCatalog decodes the embedded models and checks that every tier has the
// constants its model needs and that every constant names a known source.
func LoadCatalog() (*Catalog, error) {
	return parseCatalog(modelsYAML)
}

func parseCatalog(b []byte) (*Catalog, error) {
	var c Catalog
	if err := strictyaml.Decode("models.yaml", b, &c, strictyaml.YAML); err != nil {
		return nil, fmt.Errorf("decoding models: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("invalid models: %w", err)
	}
	return &c, nil
}

func (c *Catalog) validate() error {
	var errs []error
	if c.APIVersion != APIVersion || c.Kind != "PlanModels" {
		errs = append(errs, fmt.Errorf("want apiVersion %s kind PlanModels, got %s %s", APIVersion, c.APIVersion, c.Kind))
	}
	for id, s := range c.Sources {
		if s.Doc == "" || s.URL == "" || s.Date == "" {
			errs = append(errs, fmt.Errorf("source %q needs doc, url and date", id))
		}
	}
	seen := map[string]bool{}
	for _, svc := range c.Services {
		if canonical, ok := backend.Canonical(svc.Name); !ok || canonical != svc.Name {
			errs = append(errs, fmt.Errorf("service %q is not a canonical backend name (package backend)", svc.Name))
		}
		if seen[svc.Name] {
			errs = append(errs, fmt.Errorf("service %q listed twice", svc.Name))
		}
		seen[svc.Name] = true
		for _, t := range svc.Tiers {
			m, ok := kindOf(t.Model)
			if !ok {
				errs = append(errs, fmt.Errorf("%s/%s: unknown model %q", svc.Name, t.Name, t.Model))
				continue
			}
			for _, p := range m.params {
				if _, ok := t.Params[p]; !ok {
					errs = append(errs, fmt.Errorf("%s/%s: model %s needs parameter %q", svc.Name, t.Name, t.Model, p))
				}
			}
			for name, n := range t.Params {
				if !slices.Contains(m.params, name) {
					errs = append(errs, fmt.Errorf("%s/%s: parameter %q is not used by model %s", svc.Name, t.Name, name, t.Model))
				}
				if _, ok := c.Sources[n.Src]; !ok {
					errs = append(errs, fmt.Errorf("%s/%s: parameter %q cites unknown source %q", svc.Name, t.Name, name, n.Src))
				}
				if n.V < 0 {
					errs = append(errs, fmt.Errorf("%s/%s: parameter %q is negative", svc.Name, t.Name, name))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Service returns the service called name or one of its aliases (package backend).
func (c *Catalog) Service(name string) (*Service, error) {
	canonical, _ := backend.Canonical(name)
	for i := range c.Services {
		if s := &c.Services[i]; s.Name == canonical {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unknown service %q: want one of %s", name, strings.Join(c.serviceNames(), ", "))
}

func (c *Catalog) serviceNames() []string {
	var names []string
	for _, s := range c.Services {
		names = append(names, s.Name)
	}
	return names
}

// Tier returns the tier called name.
func (s *Service) Tier(name string) (*Tier, error) {
	var names []string
	for i := range s.Tiers {
		if s.Tiers[i].Name == name {
			return &s.Tiers[i], nil
		}
		names = append(names, s.Tiers[i].Name)
	}
	return nil, fmt.Errorf("unknown tier %q of %s: want one of %s", name, s.Name, strings.Join(names, ", "))
}

// p returns the value of a parameter; validate guarantees it exists.
func (t *Tier) p(name string) float64 { return t.Params[name].V }
