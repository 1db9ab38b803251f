package policy

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/backend"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// Config file identification.
const (
	APIVersion = "nfstune.io/v1alpha1"
	Kind       = "Policy"
)

// RuleBuiltIn is Resolved.Rule when no config rule matched a mount.
const RuleBuiltIn = "built-in"

// Policy is the desired state for every mount: the built-in catalog plus the user's rules.
type Policy struct {
	// File is the config file the policy was read from; empty for the built-in policy.
	File string
	// Workload is the workload of mounts no rule names one for ("general" unless the config's
	// defaults say otherwise).
	Workload string
	// Mode applies to mounts no rule gives a mode ("enforce" unless the config says otherwise).
	Mode Mode
	// Rules are tried in order; the first whose match fits a mount applies to it.
	Rules []Rule
	// Recovery says when the agent frees the superblock of a dead server (off by default).
	Recovery Recovery
	// Adaptive is the adaptive read-ahead of mounts whose rule sets no read-ahead of its
	// own (defaults.readAheadAdaptive): on by default, nil when the config turns it off,
	// and those mounts then get their profile's fixed value.
	Adaptive *AdaptiveReadAhead

	cat *catalog
}

// Rule maps the mounts its Match selects to a backend, a workload and overrides.
type Rule struct {
	// Index is the 1-based position in the config's rules list.
	Index int
	// Line is where the rule starts in the config file.
	Line     int
	Name     string
	Match    Match
	Backend  string // empty: the backend the inventory derived from the server name
	Workload string // empty: the policy's default workload
	Static   *bool  // nil: the workload decides (static-tools is static)
	Mode     Mode   // empty: the policy's default mode
	// Service is the provisioned service behind the mounts, when the config names it.
	Service *Service
	// Overrides replace values of the built-in profile.
	Overrides Overrides
	// Adaptive, when set, lets the agent move the read-ahead of the matched mounts within
	// bounds (readAheadAdaptive).
	Adaptive *AdaptiveReadAhead
}

// Match selects mounts. Every field that is set must match; a rule with an empty match
// applies to every mount. Globs use path.Match syntax ("*" does not cross "/").
type Match struct {
	// Server is a glob matched against the server name and against its address,
	// case-insensitively, e.g. "*.file.core.windows.net"; for a mount through a local
	// proxy also against the server the helper forwards to (Proxy.Upstream).
	Server string
	// CIDR is an address prefix the server's address must fall in, e.g. 10.0.0.0/24.
	CIDR netip.Prefix
	// Export is a glob matched against the export path.
	Export string
	// MountPoint is a glob matched against every mount point of the superblock.
	MountPoint string
}

// Resolved is the desired state of one mount and where it came from.
type Resolved struct {
	Profile
	Mode   Mode `json:"mode"`
	Static bool `json:"static"`
	// Rule is "built-in" or which config rule applied, e.g. "config.yaml rule 2".
	Rule string `json:"rule"`
	// Service is the rule's provisioned service and its throughput limits, if it names one.
	Service *Service `json:"service,omitempty"`
	// Adaptive is the rule's adaptive read-ahead with the mount's bounds, if it has one;
	// ReadAheadKB is then its MinKB, as a minimum.
	Adaptive *AdaptiveReadAhead `json:"read_ahead_adaptive,omitempty"`
}

// Default returns the built-in policy: profiles by backend, workload "general", mode enforce.
func Default() *Policy {
	cat, err := parseCatalog("profiles.yaml", profilesYAML)
	if err != nil {
		// The catalog is compiled in and checked by tests; failing here is a build defect.
		panic(fmt.Sprintf("built-in profiles: %v", err))
	}
	return &Policy{Workload: WorkloadGeneral, Mode: ModeEnforce, Recovery: DefaultRecovery(), Adaptive: &AdaptiveReadAhead{}, cat: cat}
}

// Load reads and strictly decodes a config file (see Parse); with no file it returns the
// built-in policy. Every command that takes --config loads it here.
func Load(file string) (*Policy, error) {
	if file == "" {
		return Default(), nil
	}
	b, err := hostfs.ReadFile(file, MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return Parse(file, b)
}

// Parse strictly decodes config file contents; name is used in error messages and in
// Resolved.Rule. Every problem (unknown key, bad glob or CIDR, impossible value, unknown
// backend or workload) is reported with name:line and the key, joined in one error. The
// config is one YAML document of at most MaxConfigSize bytes.
func Parse(name string, b []byte) (*Policy, error) {
	if len(b) > MaxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, MaxConfigSize)
	}
	p := Default()
	p.File = name
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&root); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty policy: want apiVersion: %s and kind: %s", name, APIVersion, Kind)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		// A second document would be ignored: refuse it rather than apply half a policy.
		return nil, fmt.Errorf("%s:%d: more than one YAML document (want one policy per file)", name, extra.Line)
	}
	doc := root.Content[0]
	d := &decoder{file: name}
	var apiVersion, kind string
	ok := d.fields(doc, "", map[string]func(*yaml.Node, string){
		"apiVersion": func(v *yaml.Node, key string) {
			if s, ok := d.str(v, key); ok {
				apiVersion = s
				if s != APIVersion {
					d.errorf(v, key, "unsupported version %q (want %s)", s, APIVersion)
				}
			}
		},
		"kind": func(v *yaml.Node, key string) {
			if s, ok := d.str(v, key); ok {
				kind = s
				if s != Kind {
					d.errorf(v, key, "unsupported kind %q (want %s)", s, Kind)
				}
			}
		},
		"defaults": func(v *yaml.Node, key string) {
			d.fields(v, key, map[string]func(*yaml.Node, string){
				"workload": func(v *yaml.Node, key string) {
					if s, ok := d.workloadName(v, key); ok {
						p.Workload = s
					}
				},
				"mode": func(v *yaml.Node, key string) {
					if m, ok := d.mode(v, key); ok {
						p.Mode = m
					}
				},
				"readAheadAdaptive": func(v *yaml.Node, key string) { p.Adaptive = d.defaultAdaptive(v, key) },
			})
		},
		"recovery": func(v *yaml.Node, key string) { p.Recovery = d.recovery(v, key) },
		"rules": func(v *yaml.Node, key string) {
			if v.Kind != yaml.SequenceNode {
				d.errorf(v, key, "want a list, got %s", kindName(v))
				return
			}
			for i, n := range v.Content {
				p.Rules = append(p.Rules, d.rule(n, i+1))
			}
		},
	})
	if ok && apiVersion == "" {
		d.errorf(doc, "apiVersion", "missing (want %s)", APIVersion)
	}
	if ok && kind == "" {
		d.errorf(doc, "kind", "missing (want %s)", Kind)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return p, nil
}

func (d *decoder) rule(n *yaml.Node, index int) Rule {
	r := Rule{Index: index, Line: n.Line}
	prefix := fmt.Sprintf("rules[%d]", index)
	handlers := d.profileFields(&r.Overrides)
	handlers["name"] = func(v *yaml.Node, key string) { r.Name, _ = d.str(v, key) }
	handlers["match"] = func(v *yaml.Node, key string) { r.Match = d.match(v, key) }
	handlers["backend"] = func(v *yaml.Node, key string) {
		if s, ok := d.str(v, key); ok {
			canonical, ok := backend.Canonical(s)
			if !ok {
				d.errorf(v, key, "unknown backend %q (want one of %s)", s, strings.Join(Backends(), ", "))
				return
			}
			r.Backend = canonical
		}
	}
	handlers["workload"] = func(v *yaml.Node, key string) { r.Workload, _ = d.workloadName(v, key) }
	handlers["static"] = func(v *yaml.Node, key string) {
		if b, ok := d.boolean(v, key); ok {
			r.Static = &b
		}
	}
	handlers["mode"] = func(v *yaml.Node, key string) { r.Mode, _ = d.mode(v, key) }
	handlers["service"] = func(v *yaml.Node, key string) { r.Service = d.service(v, key) }
	handlers["readAheadAdaptive"] = func(v *yaml.Node, key string) { r.Adaptive = d.adaptive(v, key) }
	d.fields(n, prefix, handlers)
	return r
}

func (d *decoder) match(n *yaml.Node, prefix string) Match {
	var m Match
	glob := func(dst *string) func(*yaml.Node, string) {
		return func(v *yaml.Node, key string) {
			s, ok := d.str(v, key)
			if !ok {
				return
			}
			if _, err := path.Match(s, ""); err != nil || s == "" {
				d.errorf(v, key, "bad glob %q", s)
				return
			}
			*dst = s
		}
	}
	d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"server":     glob(&m.Server),
		"export":     glob(&m.Export),
		"mountpoint": glob(&m.MountPoint),
		"cidr": func(v *yaml.Node, key string) {
			s, ok := d.str(v, key)
			if !ok {
				return
			}
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				d.errorf(v, key, "bad CIDR %q (want an address prefix such as 10.0.0.0/24)", s)
				return
			}
			m.CIDR = pfx.Masked()
		},
	})
	return m
}

func (d *decoder) workloadName(v *yaml.Node, key string) (string, bool) {
	s, ok := d.str(v, key)
	if !ok {
		return "", false
	}
	if !slices.Contains(Workloads(), s) {
		d.errorf(v, key, "unknown workload %q (want one of %s)", s, strings.Join(Workloads(), ", "))
		return "", false
	}
	return s, true
}

func (d *decoder) mode(v *yaml.Node, key string) (Mode, bool) {
	s, ok := d.str(v, key)
	if !ok {
		return "", false
	}
	if m := Mode(s); m == ModeEnforce || m == ModeObserve {
		return m, true
	}
	d.errorf(v, key, "unknown mode %q (want enforce or observe)", s)
	return "", false
}

// Matches reports whether the rule's match selects m.
func (r *Rule) Matches(m *inventory.Mount) bool { return r.Match.matches(m) }

func (mt *Match) matches(m *inventory.Mount) bool {
	if mt.Server != "" {
		pat := strings.ToLower(mt.Server)
		if !globOK(pat, strings.ToLower(m.Server)) && !globOK(pat, strings.ToLower(m.ServerAddr)) &&
			(m.Proxy == nil || !globOK(pat, strings.ToLower(m.Proxy.Upstream))) {
			return false
		}
	}
	if mt.CIDR.IsValid() {
		a, err := netip.ParseAddr(strings.Trim(m.ServerAddr, "[]"))
		if err != nil {
			a, err = netip.ParseAddr(strings.Trim(m.Server, "[]"))
		}
		if err != nil || !mt.CIDR.Contains(a.Unmap()) {
			return false
		}
	}
	if mt.Export != "" && !globOK(mt.Export, m.Export) {
		return false
	}
	if mt.MountPoint != "" && !slices.ContainsFunc(m.MountPoints, func(mp string) bool { return globOK(mt.MountPoint, mp) }) {
		return false
	}
	return true
}

func globOK(pattern, name string) bool {
	if name == "" {
		return false
	}
	ok, _ := path.Match(pattern, name)
	return ok
}

// Resolve returns the desired state of m: the first matching rule's backend (else the one
// the inventory derived from the server name, else generic), its workload (else the
// policy's default), the built-in profile for them, and the rule's overrides on top.
func (p *Policy) Resolve(m *inventory.Mount) Resolved {
	return p.ResolveAs(m, "", "")
}

// ResolveAs is Resolve with the backend and workload forced when not empty (as `nfstune
// options --backend --workload` does); the matching rule's mode, static flag and
// overrides still apply.
func (p *Policy) ResolveAs(m *inventory.Mount, forceBackend, forceWorkload string) Resolved {
	backend := m.Backend
	if _, ok := p.cat.backends[backend]; !ok {
		backend = BackendGeneric
	}
	workload, mode := p.Workload, p.Mode
	var static *bool
	var service *Service
	rule := p.ruleFor(m)
	src := RuleBuiltIn
	if rule != nil {
		src = fmt.Sprintf("%s rule %d", filepath.Base(p.File), rule.Index)
		if rule.Name != "" {
			src += " (" + rule.Name + ")"
		}
		if rule.Backend != "" {
			backend = rule.Backend
		}
		if rule.Workload != "" {
			workload = rule.Workload
		}
		if rule.Mode != "" {
			mode = rule.Mode
		}
		static = rule.Static
		service = rule.Service
	}
	if forceBackend != "" {
		backend = forceBackend
	}
	if forceWorkload != "" {
		workload = forceWorkload
	}
	prof, err := p.cat.profile(backend, workload)
	if err != nil {
		// Names are validated when the policy is built; fall back rather than fail.
		prof, _ = p.cat.profile(BackendGeneric, WorkloadGeneral)
	}
	if rule != nil {
		rule.Overrides.apply(&prof)
	}
	prof.ReadAheadKB = prof.ReadAheadFor(m.RSize)
	if m.Proxy != nil && m.Proxy.ReadAheadKB > 0 && (rule == nil || !rule.Overrides.setsReadAhead()) {
		// The mount helper writes read-ahead itself after every mount (efs-utils'
		// optimize_readahead, 15 x rsize; its watchdog rewrites it on Ubuntu 24): its value
		// is the target, as a minimum, so that nfstune and the helper never rewrite each
		// other. A config rule that sets read-ahead still wins.
		prof.ReadAheadKB, prof.ReadAheadRSizes, prof.ReadAheadExact = m.Proxy.ReadAheadKB, 0, false
		prof.ReadAheadBy = helperOf(m.Proxy.Kind)
	}
	var adaptive *AdaptiveReadAhead
	if a := p.adaptiveFor(rule, prof.Backend); a != nil {
		// The agent moves the read-ahead from the floor up to the profile's value; what
		// apply, the udev helper and the audit ask is that floor, as a minimum.
		helperKB := 0
		if prof.ReadAheadBy != "" {
			helperKB = prof.ReadAheadKB
		}
		b := a.ForMount(m.RSize, helperKB, prof.ReadAheadKB)
		adaptive = &b
		prof.ReadAheadKB, prof.ReadAheadRSizes, prof.ReadAheadExact = b.MinKB, 0, false
	}
	st := p.cat.workloads[prof.Workload].Static
	if static != nil {
		st = *static
	}
	return Resolved{Profile: prof, Mode: mode, Static: st, Rule: src, Service: service, Adaptive: adaptive}
}

// RuleFor returns the config rule that applies to a mount: the first whose match fits it.
func (p *Policy) RuleFor(m *inventory.Mount) (Rule, bool) {
	if r := p.ruleFor(m); r != nil {
		return *r, true
	}
	return Rule{}, false
}

func (p *Policy) ruleFor(m *inventory.Mount) *Rule {
	for i := range p.Rules {
		if p.Rules[i].Match.matches(m) {
			return &p.Rules[i]
		}
	}
	return nil
}

// helperOf names the tool behind a proxy kind, as the user installed it.
func helperOf(kind string) string {
	switch kind {
	case inventory.ProxyEFS, inventory.ProxyEFSStunnel:
		return "efs-utils"
	case inventory.ProxyAZNFS:
		return "aznfs"
	}
	return kind
}

// KernelReadAheadKB is the read-ahead of a new NFS superblock since Linux 5.4
// (VM_READAHEAD_PAGES, commit c128e575514c).
const KernelReadAheadKB = 128

// ReadAheadFor returns the read-ahead in KiB the profile wants for a mount whose effective
// rsize is rsize bytes. A profile with ReadAheadRSizes derives it from rsize; when rsize is
// unknown (0) it uses the profile's rsize, else 1 MiB (MaxIOSize, what Linux servers and
// most filers negotiate). A derived value is at least one page (hostfs.MinReadAheadKB):
// one rsize of 1 KiB would be stored as 0, read-ahead off.
func (p Profile) ReadAheadFor(rsize int) int {
	if p.ReadAheadRSizes <= 0 {
		return p.ReadAheadKB
	}
	if rsize <= 0 {
		rsize = p.Mount.RSize
	}
	if rsize <= 0 {
		rsize = MaxIOSize
	}
	return max(p.ReadAheadRSizes*(rsize/1024), hostfs.MinReadAheadKB)
}

// ReadAheadChange reports whether a mount whose read_ahead_kb is cur, with an effective
// rsize of rsize bytes (0 if unknown), should be set to p.ReadAheadKB. The profile value is
// a minimum: a larger value stays unless exact (--exact) or p.ReadAheadExact. A value
// derived from rsize (ReadAheadRSizes) is a minimum only for read-ahead that nobody chose:
// the kernel default, or less than one rsize. Any other value was set on purpose (an
// optimum measured below 15 x rsize is common) and stays unless exact. A mount helper's own
// value (ReadAheadBy) is only ever a minimum: exact never lowers what the helper would
// write back. See docs/policy.md.
func (p Profile) ReadAheadChange(cur, rsize int, exact bool) bool {
	want := p.ReadAheadKB
	switch {
	case want <= 0 || cur == want:
		return false
	case (exact || p.ReadAheadExact) && p.ReadAheadBy == "":
		return true
	case cur > want:
		return false
	case p.ReadAheadRSizes > 0:
		return cur == KernelReadAheadKB || cur < rsize/1024
	}
	return true
}

// Profile returns the built-in profile for a backend and workload.
func (p *Policy) Profile(backend, workload string) (Profile, error) {
	return p.cat.profile(backend, workload)
}

// Backend returns the facts about a backend.
func (p *Policy) Backend(name string) (Backend, bool) {
	canonical, _ := backend.Canonical(name)
	b, ok := p.cat.backends[canonical]
	if !ok {
		return Backend{}, false
	}
	return *b, true
}

// WorkloadInfo returns the description of a workload.
func (p *Policy) WorkloadInfo(name string) (Workload, bool) {
	w, ok := p.cat.workloads[name]
	if !ok {
		return Workload{}, false
	}
	return *w, true
}

// Sysctls returns the sysctl minimums the inventory's mounts need: for each name, the
// largest value any mount's profile asks for.
func (p *Policy) Sysctls(inv *inventory.Inventory) map[string]int64 {
	out := map[string]int64{}
	for i := range inv.Mounts {
		for k, v := range p.Resolve(&inv.Mounts[i]).Sysctls {
			if cur, ok := out[k]; !ok || v > cur {
				out[k] = v
			}
		}
	}
	return out
}

// SysctlsMax returns the sysctl upper bounds the inventory's mounts need: for each name,
// the smallest bound any mount's profile sets.
func (p *Policy) SysctlsMax(inv *inventory.Inventory) map[string]int64 {
	out := map[string]int64{}
	for i := range inv.Mounts {
		for k, v := range p.Resolve(&inv.Mounts[i]).SysctlsMax {
			if cur, ok := out[k]; !ok || v < cur {
				out[k] = v
			}
		}
	}
	return out
}

// List returns the options as mount -o words in a stable order: vers, proto, nconnect,
// rsize, wsize, hard/soft, timeo, retrans, actimeo, nocto, nolock, then Extra.
func (o MountOptions) List() []string {
	var out []string
	add := func(name string, v int) {
		if v > 0 {
			out = append(out, name+"="+strconv.Itoa(v))
		}
	}
	if o.Vers != "" {
		out = append(out, "vers="+o.Vers)
	}
	if o.Proto != "" {
		out = append(out, "proto="+o.Proto)
	}
	add("nconnect", o.NConnect)
	add("rsize", o.RSize)
	add("wsize", o.WSize)
	if o.Hard != nil {
		if *o.Hard {
			out = append(out, "hard")
		} else {
			out = append(out, "soft")
		}
	}
	add("timeo", o.Timeo)
	add("retrans", o.Retrans)
	add("actimeo", o.ACTimeo)
	if o.NoCTO {
		out = append(out, "nocto")
	}
	if o.NoLock {
		out = append(out, "nolock")
	}
	return append(out, o.Extra...)
}

// SysctlNames returns the sorted names of a sysctl map, for stable output.
func SysctlNames(m map[string]int64) []string {
	return slices.Sorted(maps.Keys(m))
}
