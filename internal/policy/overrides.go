package policy

import (
	"maps"
	"net/netip"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// Limits the kernel puts on mount options (nfs(5); fs/nfs/fs_context.c).
const (
	// MaxNConnect is NFS_MAX_CONNECTIONS: nconnect is accepted in 1..16.
	MaxNConnect = 16
	// MaxIOSize is the largest rsize/wsize the Linux client uses (1 MiB); larger values are
	// lowered to it, and others are rounded down to a multiple of the page size.
	MaxIOSize = 1 << 20
	// ioSizeUnit is the page size rsize/wsize must be a multiple of in a config file, so that
	// what is written is what the kernel will use.
	ioSizeUnit = 4096
	// MaxTimeo is the cap on timeo for TCP in tenths of a second: the kernel limits the
	// initial timeout to NFS_MAX_TCP_TIMEOUT, 600 s.
	MaxTimeo = 6000
	// maxReadAheadRSizes bounds readAheadRSizes: 64 rsizes of 1 MiB is 64 MiB, already
	// four times what any service documents.
	maxReadAheadRSizes = 64
)

// Overrides are profile values that a built-in catalog entry or a config rule sets. A nil
// pointer (or nil map) means "not set here": the value comes from the layer below.
type Overrides struct {
	ReadAheadKB *int
	Vers        *string
	Proto       *string
	NConnect    *int
	RSize       *int
	WSize       *int
	Hard        *bool
	Timeo       *int
	Retrans     *int
	ACTimeo     *int
	NoCTO       *bool
	NoLock      *bool
	Extra       []string // nil: not set; empty: clear
	Sysctls     map[string]int64
	SysctlsMax  map[string]int64

	ReadAheadRSizes *int
	ReadAheadExact  *bool

	TransportSecurity *string
}

// setsReadAhead reports whether o sets the read-ahead, fixed or derived from rsize.
func (o *Overrides) setsReadAhead() bool {
	return o.ReadAheadKB != nil || o.ReadAheadRSizes != nil
}

// pinsReadAhead reports whether o fixes the read-ahead: sets it, or makes it exact. Such a
// rule's mounts get no default adaptive read-ahead (Policy.adaptiveFor).
func (o *Overrides) pinsReadAhead() bool {
	return o.setsReadAhead() || o.ReadAheadExact != nil
}

// apply layers o over p. Sysctl maps are merged key by key.
func (o *Overrides) apply(p *Profile) {
	// A fixed read-ahead and one derived from rsize replace each other.
	if o.ReadAheadKB != nil {
		p.ReadAheadKB, p.ReadAheadRSizes = *o.ReadAheadKB, 0
	}
	if o.ReadAheadRSizes != nil {
		p.ReadAheadRSizes, p.ReadAheadKB = *o.ReadAheadRSizes, 0
	}
	if o.ReadAheadExact != nil {
		p.ReadAheadExact = *o.ReadAheadExact
	}
	setStr(&p.TransportSecurity, o.TransportSecurity)
	setStr(&p.Mount.Vers, o.Vers)
	setStr(&p.Mount.Proto, o.Proto)
	setInt(&p.Mount.NConnect, o.NConnect)
	setInt(&p.Mount.RSize, o.RSize)
	setInt(&p.Mount.WSize, o.WSize)
	if o.Hard != nil {
		h := *o.Hard
		p.Mount.Hard = &h
	}
	setInt(&p.Mount.Timeo, o.Timeo)
	setInt(&p.Mount.Retrans, o.Retrans)
	setInt(&p.Mount.ACTimeo, o.ACTimeo)
	if o.NoCTO != nil {
		p.Mount.NoCTO = *o.NoCTO
	}
	if o.NoLock != nil {
		p.Mount.NoLock = *o.NoLock
	}
	if o.Extra != nil {
		p.Mount.Extra = append([]string(nil), o.Extra...)
	}
	if len(o.Sysctls) > 0 {
		if p.Sysctls == nil {
			p.Sysctls = make(map[string]int64, len(o.Sysctls))
		}
		maps.Copy(p.Sysctls, o.Sysctls)
	}
	if len(o.SysctlsMax) > 0 {
		if p.SysctlsMax == nil {
			p.SysctlsMax = make(map[string]int64, len(o.SysctlsMax))
		}
		maps.Copy(p.SysctlsMax, o.SysctlsMax)
	}
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func setStr(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

// Values accepted for vers= and proto=.
var (
	knownVers   = []string{"3", "4", "4.0", "4.1", "4.2"}
	knownProtos = []string{"tcp", "tcp6", "rdma", "rdma6", "udp", "udp6"}
	// knownTransportSecurity are the xprtsec= policies a rule may require (nfs(5),
	// fs/nfs/fs_context.c nfs_xprtsec_policies); "none" requires nothing, so a rule leaves
	// transportSecurity out instead.
	knownTransportSecurity = []string{inventory.XprtSecTLS, inventory.XprtSecMTLS}
	// noEffect are options nfs(5) says have no effect on NFS; they are never recommended.
	noEffect = []string{"atime", "noatime", "diratime", "nodiratime", "relatime", "norelatime", "strictatime", "nostrictatime"}
)

// profileFields returns the handlers for the profile value keys (readAheadKB,
// readAheadRSizes, readAheadExact, mountOptions, transportSecurity, sysctls, sysctlsMax),
// decoding into o.
func (d *decoder) profileFields(o *Overrides) map[string]func(*yaml.Node, string) {
	return map[string]func(*yaml.Node, string){
		"readAheadKB": func(v *yaml.Node, key string) {
			if n, ok := d.size(v, key); ok {
				switch {
				case n > MaxReadAheadKB:
					d.errorf(v, key, "%d is out of range 0..%d", n, MaxReadAheadKB)
					return
				case n > 0 && n < hostfs.MinReadAheadKB:
					d.errorf(v, key, "%d is below one page (%d KiB), which the kernel stores as 0, read-ahead off (0 leaves read-ahead alone)", n, hostfs.MinReadAheadKB)
					return
				}
				o.ReadAheadKB = &n
			}
		},
		"readAheadRSizes": func(v *yaml.Node, key string) {
			if n, ok := d.size(v, key); ok {
				if n < 1 || n > maxReadAheadRSizes {
					d.errorf(v, key, "%d is out of range (want 1 to %d rsizes)", n, maxReadAheadRSizes)
					return
				}
				o.ReadAheadRSizes = &n
			}
		},
		"readAheadExact": func(v *yaml.Node, key string) {
			if b, ok := d.boolean(v, key); ok {
				o.ReadAheadExact = &b
			}
		},
		"mountOptions": func(v *yaml.Node, key string) { d.mountOptions(v, key, o) },
		"transportSecurity": func(v *yaml.Node, key string) {
			if s, ok := d.str(v, key); ok {
				if !slices.Contains(knownTransportSecurity, s) {
					d.errorf(v, key, "unknown transport security %q (want one of %s)", s, strings.Join(knownTransportSecurity, ", "))
					return
				}
				o.TransportSecurity = &s
			}
		},
		"sysctls":    func(v *yaml.Node, key string) { o.Sysctls = d.sysctls(v, key) },
		"sysctlsMax": func(v *yaml.Node, key string) { o.SysctlsMax = d.sysctls(v, key) },
	}
}

func (d *decoder) mountOptions(n *yaml.Node, path string, o *Overrides) {
	d.fields(n, path, map[string]func(*yaml.Node, string){
		"vers": func(v *yaml.Node, key string) {
			if s, ok := d.str(v, key); ok {
				if !slices.Contains(knownVers, s) {
					d.errorf(v, key, "unknown NFS version %q (want one of %s)", s, strings.Join(knownVers, ", "))
					return
				}
				o.Vers = &s
			}
		},
		"proto": func(v *yaml.Node, key string) {
			if s, ok := d.str(v, key); ok {
				if !slices.Contains(knownProtos, s) {
					d.errorf(v, key, "unknown transport %q (want one of %s)", s, strings.Join(knownProtos, ", "))
					return
				}
				o.Proto = &s
			}
		},
		"nconnect": func(v *yaml.Node, key string) {
			if n, ok := d.integer(v, key); ok {
				if n < 1 || n > MaxNConnect {
					d.errorf(v, key, "%d is out of range 1..%d", n, MaxNConnect)
					return
				}
				i := int(n)
				o.NConnect = &i
			}
		},
		"rsize": func(v *yaml.Node, key string) { o.RSize = d.ioSize(v, key) },
		"wsize": func(v *yaml.Node, key string) { o.WSize = d.ioSize(v, key) },
		"hard": func(v *yaml.Node, key string) {
			if b, ok := d.boolean(v, key); ok {
				o.Hard = &b
			}
		},
		"timeo": func(v *yaml.Node, key string) {
			if n, ok := d.size(v, key); ok {
				if n == 0 || n > MaxTimeo {
					d.errorf(v, key, "%d is out of range 1..%d (tenths of a second)", n, MaxTimeo)
					return
				}
				o.Timeo = &n
			}
		},
		"retrans": func(v *yaml.Node, key string) {
			if n, ok := d.size(v, key); ok {
				o.Retrans = &n
			}
		},
		"actimeo": func(v *yaml.Node, key string) {
			if n, ok := d.size(v, key); ok {
				o.ACTimeo = &n
			}
		},
		"nocto": func(v *yaml.Node, key string) {
			if b, ok := d.boolean(v, key); ok {
				o.NoCTO = &b
			}
		},
		"nolock": func(v *yaml.Node, key string) {
			if b, ok := d.boolean(v, key); ok {
				o.NoLock = &b
			}
		},
		"extra": func(v *yaml.Node, key string) {
			list, ok := d.strings(v, key)
			if !ok {
				return
			}
			good := true
			for i, s := range list {
				name, _, _ := strings.Cut(s, "=")
				switch {
				case !ValidOption(s):
					d.errorf(v.Content[i], key, "%q is not a single mount option", s)
					good = false
				case slices.Contains(noEffect, name):
					d.errorf(v.Content[i], key, "%q has no effect on NFS mounts (nfs(5))", s)
					good = false
				}
			}
			if good {
				o.Extra = list
			}
		},
	})
}

// ValidOption reports whether s is one mount option that fstab and mount -o carry as is:
// "name" or "name=value", both non-empty, of printable ASCII other than white space, the
// option separator ',', fstab's comment '#', quotes and the backslash that fstab and
// mountinfo use for octal escapes.
func ValidOption(s string) bool {
	name, value, hasValue := strings.Cut(s, "=")
	if name == "" || (hasValue && value == "") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || strings.IndexByte(",#'\"\\", c) >= 0 {
			return false
		}
	}
	return true
}

// ValidServer reports whether s is an NFS server as an fstab line, a mount source and an
// nfsmount.conf [ Server "..." ] section carry it: a host name (letters, digits, '-' and
// '_' in dot-separated labels of at most 63 bytes, 253 in all) or an IPv4 or IPv6 address,
// the latter bare or in brackets, with a zone of the same characters as a host name label.
// Nothing else, so that no server name can add a field, an option or a line.
func ValidServer(s string) bool {
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		bracketed := strings.HasPrefix(s, "[")
		return bracketed == strings.HasSuffix(s, "]") && (!bracketed || a.Is6()) && validLabel(a.Zone(), true)
	}
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !validLabel(l, false) {
			return false
		}
	}
	return true
}

// validLabel reports whether l is one host name label: 1 to 63 letters, digits, '-' or
// '_', not starting or ending with '-'; empty is allowed only when empty is true.
func validLabel(l string, empty bool) bool {
	if l == "" {
		return empty
	}
	if len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ioSize decodes rsize or wsize: positive, at most 1 MiB, a multiple of 4096.
func (d *decoder) ioSize(v *yaml.Node, key string) *int {
	n, ok := d.size(v, key)
	if !ok {
		return nil
	}
	switch {
	case n == 0:
		d.errorf(v, key, "must be positive")
		return nil
	case n > MaxIOSize:
		d.errorf(v, key, "%d is above the Linux client's maximum of %d (1 MiB)", n, MaxIOSize)
		return nil
	case n%ioSizeUnit != 0:
		d.errorf(v, key, "%d is not a multiple of %d", n, ioSizeUnit)
		return nil
	}
	return &n
}

func (d *decoder) sysctls(n *yaml.Node, path string) map[string]int64 {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping of sysctl names to integers, got %s", kindName(n))
		return nil
	}
	out := make(map[string]int64, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		limit, known := SysctlLimit(k.Value)
		if !known {
			d.errorf(k, key, "not a sysctl nfstune sets (want one of %s)", strings.Join(KnownSysctls(), ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.errorf(k, key, "duplicate key")
			continue
		}
		val, ok := d.integer(v, key)
		if !ok {
			continue
		}
		if val < limit.Min || val > limit.Max {
			d.errorf(v, key, "%d is out of range %d..%d", val, limit.Min, limit.Max)
			continue
		}
		out[k.Value] = val
	}
	return out
}
