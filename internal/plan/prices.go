package plan

import (
	_ "embed"
	"errors"
	"fmt"
	"math"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/strictyaml"
)

// PriceList is a list of prices for some service tiers: the built-in list
// (DefaultPrices, prices.yaml, every price with its source and date) or a user's file.
// List prices differ by region, change often and are not what most contracts pay, so a
// user's files replace the built-in list.
//
//	apiVersion: nfstune.io/v1alpha1
//	kind: PriceList
//	currency: USD
//	region: westeurope
//	date: "2026-01-15"
//	source: pay-as-you-go list prices
//	prices:
//	  - service: azure-files
//	    tier: provisioned-v1
//	    perGiBMonth: 0.2
type PriceList struct {
	APIVersion string  `yaml:"apiVersion" json:"-"`
	Kind       string  `yaml:"kind" json:"-"`
	Currency   string  `yaml:"currency" json:"currency"`
	Region     string  `yaml:"region" json:"region,omitempty"`
	Date       string  `yaml:"date" json:"date,omitempty"`
	Source     string  `yaml:"source" json:"source,omitempty"`
	Prices     []Price `yaml:"prices" json:"-"`
}

// Price is what one tier costs per month. The monthly cost of an option is
// PerGiBMonth x capacity + PerIOPSMonth x (IOPS - IncludedIOPS) + PerMiBpsMonth x (MiB/s - IncludedMiBps),
// counting only provisioned IOPS and throughput.
type Price struct {
	Service       string   `yaml:"service" json:"service"`
	Tier          string   `yaml:"tier" json:"tier"`
	PerGiBMonth   *float64 `yaml:"perGiBMonth" json:"perGiBMonth,omitempty"`
	PerIOPSMonth  *float64 `yaml:"perIOPSMonth" json:"perIOPSMonth,omitempty"`
	IncludedIOPS  float64  `yaml:"includedIOPS" json:"includedIOPS,omitempty"`
	PerMiBpsMonth *float64 `yaml:"perMiBpsMonth" json:"perMiBpsMonth,omitempty"`
	IncludedMiBps float64  `yaml:"includedMiBps" json:"includedMiBps,omitempty"`
	Note          string   `yaml:"note" json:"note,omitempty"`
	// Source and Date say where the price was published and when it was read; required
	// in the built-in list, optional in a user's file.
	Source string `yaml:"source" json:"source,omitempty"`
	Date   string `yaml:"date" json:"date,omitempty"`

	// From is the file the price came from, for the output.
	From string `yaml:"-" json:"from"`
}

// Prices maps "service/tier" to its price.
type Prices struct {
	ByTier map[string]Price
	// Lists are the files that were read, in order, for currency and dates.
	Lists []PriceList
}

//go:embed prices.yaml
var pricesYAML []byte

// BuiltinPrices names the built-in price list in output and errors.
const BuiltinPrices = "built-in price list"

// DefaultPrices is the built-in price list, which plan uses when the user gives no price
// file. Every price in it names its source and date; a tier without a sourced price is
// absent.
func DefaultPrices(c *Catalog) (*Prices, error) {
	return builtinPrices(c, pricesYAML)
}

// builtinPrices parses a built-in price list: a price file in which every price names its
// source and date.
func builtinPrices(c *Catalog, b []byte) (*Prices, error) {
	l, err := parsePriceList(c, BuiltinPrices, b)
	if err != nil {
		return nil, err
	}
	for i, p := range l.Prices {
		if p.Source == "" || p.Date == "" {
			return nil, fmt.Errorf("%s: %s/%s (entry %d) has no source or no date", BuiltinPrices, p.Service, p.Tier, i+1)
		}
	}
	ps := &Prices{ByTier: map[string]Price{}, Lists: []PriceList{*l}}
	for _, p := range l.Prices {
		p.From = BuiltinPrices
		ps.ByTier[p.Service+"/"+p.Tier] = p
	}
	return ps, nil
}

// LoadPrices reads price files in order; a later file's entry replaces an earlier one
// for the same tier. Errors name the file and line.
func LoadPrices(c *Catalog, paths ...string) (*Prices, error) {
	ps := &Prices{ByTier: map[string]Price{}}
	for _, path := range paths {
		b, err := hostfs.ReadFile(path, hostfs.MaxConfigSize)
		if err != nil {
			return nil, fmt.Errorf("reading price file: %w", err)
		}
		l, err := parsePriceList(c, path, b)
		if err != nil {
			return nil, err
		}
		if len(ps.Lists) > 0 && ps.Lists[0].Currency != l.Currency {
			return nil, fmt.Errorf("%s: currency %s differs from %s in %s", path, l.Currency, ps.Lists[0].Currency, paths[0])
		}
		ps.Lists = append(ps.Lists, *l)
		for _, p := range l.Prices {
			p.From = path
			ps.ByTier[p.Service+"/"+p.Tier] = p
		}
	}
	return ps, nil
}

// parsePriceList decodes one price file strictly and validates it. Service aliases are
// resolved to the service's name.
func parsePriceList(c *Catalog, path string, b []byte) (*PriceList, error) {
	var l PriceList
	if err := strictyaml.Decode(path, b, &l, strictyaml.YAML); err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	at := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	var errs []error
	if l.APIVersion != APIVersion {
		errs = append(errs, at(keyLine(&root, "apiVersion"), "apiVersion must be %s, got %q", APIVersion, l.APIVersion))
	}
	if l.Kind != "PriceList" {
		errs = append(errs, at(keyLine(&root, "kind"), "kind must be PriceList, got %q", l.Kind))
	}
	if l.Currency == "" {
		errs = append(errs, at(1, "currency is required (for example USD or EUR)"))
	}
	seen := map[string]int{}
	for i := range l.Prices {
		p := &l.Prices[i]
		line := itemLine(&root, "prices", i)
		svc, err := c.Service(p.Service)
		if err != nil {
			errs = append(errs, at(line, "%v", err))
			continue
		}
		p.Service = svc.Name
		if _, err := svc.Tier(p.Tier); err != nil {
			errs = append(errs, at(line, "%v", err))
			continue
		}
		key := p.Service + "/" + p.Tier
		if first, dup := seen[key]; dup {
			errs = append(errs, at(line, "%s is priced twice (first at line %d)", key, first))
		}
		seen[key] = line
		if p.PerGiBMonth == nil && p.PerIOPSMonth == nil && p.PerMiBpsMonth == nil {
			errs = append(errs, at(line, "%s: set at least one of perGiBMonth, perIOPSMonth, perMiBpsMonth", key))
		}
		for name, v := range map[string]float64{"perGiBMonth": deref(p.PerGiBMonth), "perIOPSMonth": deref(p.PerIOPSMonth),
			"perMiBpsMonth": deref(p.PerMiBpsMonth), "includedIOPS": p.IncludedIOPS, "includedMiBps": p.IncludedMiBps} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, at(line, "%s: %s must be a non-negative number", key, name))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &l, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func mappingValue(root *yaml.Node, key string) (k, v *yaml.Node) {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

func keyLine(root *yaml.Node, key string) int {
	if k, _ := mappingValue(root, key); k != nil {
		return k.Line
	}
	return 1
}

func itemLine(root *yaml.Node, key string, i int) int {
	if _, v := mappingValue(root, key); v != nil && v.Kind == yaml.SequenceNode && i < len(v.Content) {
		return v.Content[i].Line
	}
	return keyLine(root, key)
}

// monthly returns the monthly cost of p under price, counting only provisioned IOPS and
// throughput above what the price includes.
func (price Price) monthly(p Provision) float64 {
	cost := deref(price.PerGiBMonth) * p.CapacityGiB
	if p.IOPS > 0 {
		cost += deref(price.PerIOPSMonth) * math.Max(0, p.IOPS-price.IncludedIOPS)
	}
	if p.MiBps > 0 {
		cost += deref(price.PerMiBpsMonth) * math.Max(0, p.MiBps-price.IncludedMiBps)
	}
	return cost
}
