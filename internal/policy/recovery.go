package policy

import (
	"fmt"
	"net/netip"
	"path"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/inventory"
)

// Recovery actions: what the agent does with a superblock its recovery rules select.
const (
	// RecoveryShutdown shuts the superblock down (/sys/fs/nfs/<dev>/shutdown, Linux 6.6 and
	// later), so that every request on it fails with EIO and kubelet's unmount returns.
	// On an older kernel the agent reports instead: the kernel offers nothing for one
	// superblock.
	RecoveryShutdown = "shutdown"
	// RecoveryReport only logs and counts what the agent would shut down.
	RecoveryReport = "report"
)

// Recovery defaults, for a recovery section that leaves them out.
const (
	DefaultRecoveryWindow = 5 * time.Minute
	// MinRecoveryWindow is the shortest window accepted: a server restarting or failing
	// over stalls its clients for tens of seconds, and that is not a dead server.
	MinRecoveryWindow = 30 * time.Second
)

// Recovery is the policy's recovery section: when the agent frees a superblock whose
// server stopped answering and that nobody still needs (docs/agent.md, Recovery). It is
// off unless Enabled; Mode observe (the default) only reports.
type Recovery struct {
	Enabled bool `json:"enabled"`
	// Window is how long the server must be seen stalled, without a break, first.
	Window time.Duration `json:"window"`
	// Action is RecoveryShutdown or RecoveryReport.
	Action string `json:"action"`
	// Mode is enforce (act) or observe (log and count what would be done).
	Mode Mode `json:"mode"`
	// Servers limit recovery to the servers they match: globs over the server's name and
	// address, or address prefixes ("10.0.0.0/24"). Empty matches every server.
	Servers []ServerPattern `json:"servers,omitempty"`
}

// ServerPattern is one entry of Recovery.Servers.
type ServerPattern struct {
	// Glob is matched, case-insensitively, against the server name and its address.
	Glob string `json:"glob,omitempty"`
	// CIDR is an address prefix the server's address must fall in.
	CIDR netip.Prefix `json:"cidr,omitzero"`
}

// DefaultRecovery is the recovery section of a policy that has none: off.
func DefaultRecovery() Recovery {
	return Recovery{Window: DefaultRecoveryWindow, Action: RecoveryShutdown, Mode: ModeObserve}
}

// Selects reports whether the recovery rules may act on the superblock m: recovery is on
// and a server pattern matches m's server (any server when there are none).
func (r *Recovery) Selects(m *inventory.Mount) bool {
	if !r.Enabled {
		return false
	}
	if len(r.Servers) == 0 {
		return true
	}
	for _, s := range r.Servers {
		if s.matches(m) {
			return true
		}
	}
	return false
}

func (s ServerPattern) matches(m *inventory.Mount) bool {
	if s.CIDR.IsValid() {
		for _, a := range []string{m.ServerAddr, m.Server} {
			if addr, err := netip.ParseAddr(strings.Trim(a, "[]")); err == nil && s.CIDR.Contains(addr.Unmap()) {
				return true
			}
		}
		return false
	}
	pat := strings.ToLower(s.Glob)
	return globOK(pat, strings.ToLower(m.Server)) || globOK(pat, strings.ToLower(m.ServerAddr))
}

// serverChars are the characters of a host name, an IPv4 or IPv6 address (with its
// brackets) and of path.Match's wildcards: a pattern with any other can match no server.
const serverChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]*?^!\\"

// recovery decodes the recovery section. Every bad value is reported: a window that is not
// a duration of at least MinRecoveryWindow, an unknown action or mode, a server pattern
// that is neither an address prefix nor a glob that can match a server name or address.
func (d *decoder) recovery(n *yaml.Node, prefix string) Recovery {
	r := DefaultRecovery()
	d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"enabled": func(v *yaml.Node, key string) { r.Enabled, _ = d.boolean(v, key) },
		"window": func(v *yaml.Node, key string) {
			s, ok := d.str(v, key)
			if !ok {
				return
			}
			w, err := time.ParseDuration(s)
			switch {
			case err != nil:
				d.errorf(v, key, "want a duration such as 5m, got %q", s)
			case w <= 0:
				d.errorf(v, key, "must be positive, got %s", s)
			case w < MinRecoveryWindow:
				d.errorf(v, key, "%s is shorter than %s: a server restarting or failing over stalls that long", s, MinRecoveryWindow)
			default:
				r.Window = w
			}
		},
		"action": func(v *yaml.Node, key string) {
			s, ok := d.str(v, key)
			if !ok {
				return
			}
			if s != RecoveryShutdown && s != RecoveryReport {
				d.errorf(v, key, "unknown action %q (want %s or %s)", s, RecoveryShutdown, RecoveryReport)
				return
			}
			r.Action = s
		},
		"mode": func(v *yaml.Node, key string) {
			if m, ok := d.mode(v, key); ok {
				r.Mode = m
			}
		},
		"servers": func(v *yaml.Node, key string) {
			if v.Kind != yaml.SequenceNode {
				d.errorf(v, key, "want a list, got %s", kindName(v))
				return
			}
			for i, c := range v.Content {
				k := fmt.Sprintf("%s[%d]", key, i)
				if s, ok := d.str(c, k); ok {
					if p, ok := d.serverPattern(c, k, s); ok {
						r.Servers = append(r.Servers, p)
					}
				}
			}
		},
	})
	return r
}

// serverPattern parses one entry of recovery.servers.
func (d *decoder) serverPattern(v *yaml.Node, key, s string) (ServerPattern, bool) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			d.errorf(v, key, "bad CIDR %q (want an address prefix such as 10.0.0.0/24, or a glob over server names)", s)
			return ServerPattern{}, false
		}
		return ServerPattern{CIDR: pfx.Masked()}, true
	}
	if _, err := path.Match(s, ""); err != nil || s == "" {
		d.errorf(v, key, "bad glob %q", s)
		return ServerPattern{}, false
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(serverChars, r) }); i >= 0 {
		d.errorf(v, key, "%q matches no server: %q is in no host name or address", s, s[i:i+1])
		return ServerPattern{}, false
	}
	return ServerPattern{Glob: s}, true
}
