package policy

import (
	"cmp"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// Bounds of a rule's adaptive read-ahead (readAheadAdaptive).
const (
	// DefaultAdaptiveRSizes is the default cap in rsizes: 15, the generic target.
	DefaultAdaptiveRSizes = 15
	// DefaultAdaptiveInterval is how often the agent steps by default: four doublings from
	// one rsize reach 15 rsizes, two intervals each (the change and its settling), in 40 s,
	// within a minute of a change of workload, and five seconds hold 100 MiB of reads at
	// the slowest reader measured in the field.
	DefaultAdaptiveInterval = 5 * time.Second
	// MinAdaptiveInterval and MaxAdaptiveInterval bound the interval: each step reads
	// every mount's statistics, and a step per ten minutes would follow nothing.
	MinAdaptiveInterval = time.Second
	MaxAdaptiveInterval = 10 * time.Minute
)

// AdaptiveReadAhead is a rule's adaptive read-ahead: the agent moves the read-ahead of the
// rule's mounts within [MinKB, MaxKB] from their own traffic (readahead.Controller;
// docs/agent.md, Adaptive read-ahead). In a Rule, MinKB and MaxKB are what the config
// says (0: the default); in Resolved, the bounds for that mount.
type AdaptiveReadAhead struct {
	// MinKB is the lowest read-ahead: never below one rsize (nor a mount helper's own
	// value); a larger value raises that floor.
	MinKB int `json:"min_kb"`
	// MaxKB is the highest read-ahead; by default DefaultAdaptiveRSizes rsizes.
	MaxKB int `json:"max_kb"`
	// Interval is the time between two steps: at most one change per interval.
	Interval time.Duration `json:"interval_ns"`
	// Observe reports the steps without making them, as the observe mode does.
	Observe bool `json:"observe,omitempty"`
}

// ForMount returns the adaptive read-ahead of a mount with an effective rsize of rsize
// bytes (0: unknown, taken as MaxIOSize), a mount helper that writes helperKB itself (0:
// none) and a profile whose fixed read-ahead for the mount is profileKB (0: none): MinKB at
// least one rsize, helperKB and one page (hostfs.MinReadAheadKB: an rsize of 1 or 2 KiB is
// less), MaxKB the rule's, else profileKB, else DefaultAdaptiveRSizes rsizes, never below
// MinKB. The profile's value is the cap because it is what the seeds measured best for a
// streaming reader of that backend: the controller climbs to it only when the traffic shows
// it reads faster there.
func (a AdaptiveReadAhead) ForMount(rsize, helperKB, profileKB int) AdaptiveReadAhead {
	if rsize <= 0 {
		rsize = MaxIOSize
	}
	rsizeKB := rsize / 1024
	out := a
	out.MinKB = max(a.MinKB, rsizeKB, helperKB, hostfs.MinReadAheadKB)
	if out.MaxKB == 0 {
		out.MaxKB = cmp.Or(profileKB, DefaultAdaptiveRSizes*rsizeKB)
	}
	out.MaxKB = max(out.MaxKB, out.MinKB)
	if out.Interval == 0 {
		out.Interval = DefaultAdaptiveInterval
	}
	return out
}

// adaptiveFor returns the adaptive read-ahead of a mount of backend that rule matches
// (nil: none). Rows, in order:
//
//	the rule has readAheadAdaptive                       the rule's
//	the rule sets readAheadKB, readAheadRSizes or readAheadExact  none: a fixed value wins
//	the backend is EFS                                   none: efs-utils writes 15 x rsize
//	                                                     after each mount, and where its
//	                                                     state is not visible nfstune cannot
//	                                                     tell whether it runs
//	anything else                                        the policy's default (nil when off)
func (p *Policy) adaptiveFor(rule *Rule, backend string) *AdaptiveReadAhead {
	switch {
	case rule != nil && rule.Adaptive != nil:
		return rule.Adaptive
	case rule != nil && rule.Overrides.pinsReadAhead():
		return nil
	case backend == BackendAWSEFS:
		return nil
	}
	return p.Adaptive
}

// defaultAdaptive decodes defaults.readAheadAdaptive: false turns the default adaptive
// read-ahead off (every mount then gets its profile's fixed value, as before it was the
// default), true keeps it, and a mapping sets its bounds and interval as a rule's does.
func (d *decoder) defaultAdaptive(n *yaml.Node, key string) *AdaptiveReadAhead {
	if n.Kind == yaml.ScalarNode {
		on, ok := d.boolean(n, key)
		if !ok || !on {
			return nil
		}
		return &AdaptiveReadAhead{}
	}
	return d.adaptive(n, key)
}

// adaptive decodes a rule's readAheadAdaptive: minKB and maxKB multiples of one page
// (4 KiB) up to MaxReadAheadKB, minKB not above maxKB, an interval from 1 s to 10 min.
func (d *decoder) adaptive(n *yaml.Node, prefix string) *AdaptiveReadAhead {
	a := &AdaptiveReadAhead{}
	good := true
	kb := func(dst *int) func(*yaml.Node, string) {
		return func(v *yaml.Node, key string) {
			k, ok := d.size(v, key)
			switch {
			case !ok:
				good = false
			case k < hostfs.MinReadAheadKB || k > MaxReadAheadKB:
				d.errorf(v, key, "%d is out of range %d..%d (one page to 1 GiB)", k, hostfs.MinReadAheadKB, MaxReadAheadKB)
				good = false
			case k%hostfs.MinReadAheadKB != 0:
				d.errorf(v, key, "%d is not a multiple of %d (the kernel keeps whole pages)", k, hostfs.MinReadAheadKB)
				good = false
			default:
				*dst = k
			}
		}
	}
	if !d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"minKB": kb(&a.MinKB),
		"maxKB": kb(&a.MaxKB),
		"interval": func(v *yaml.Node, key string) {
			s, ok := d.str(v, key)
			if !ok {
				good = false
				return
			}
			iv, err := time.ParseDuration(s)
			if err != nil || iv < MinAdaptiveInterval || iv > MaxAdaptiveInterval {
				d.errorf(v, key, "%q is not a duration from %s to %s", s, MinAdaptiveInterval, MaxAdaptiveInterval)
				good = false
				return
			}
			a.Interval = iv
		},
		"observe": func(v *yaml.Node, key string) {
			if b, ok := d.boolean(v, key); ok {
				a.Observe = b
			} else {
				good = false
			}
		},
	}) {
		return nil
	}
	if a.MinKB > 0 && a.MaxKB > 0 && a.MinKB > a.MaxKB {
		d.errorf(n, join(prefix, "minKB"), "%d is above maxKB %d", a.MinKB, a.MaxKB)
		good = false
	}
	if !good {
		return nil
	}
	return a
}

// AdaptiveInterval returns the shortest interval of the adaptive read-aheads the policy
// has (its default and its rules'), 0 when it has none: how often the agent must look.
func (p *Policy) AdaptiveInterval() time.Duration {
	var out time.Duration
	for _, a := range p.adaptives() {
		iv := a.ForMount(0, 0, 0).Interval
		if out == 0 || iv < out {
			out = iv
		}
	}
	return out
}

// adaptives returns the policy's adaptive read-aheads: the rules' and, unless every rule
// pins read-ahead, the default.
func (p *Policy) adaptives() []AdaptiveReadAhead {
	var out []AdaptiveReadAhead
	for _, r := range p.Rules {
		if r.Adaptive != nil {
			out = append(out, *r.Adaptive)
		}
	}
	if p.Adaptive != nil {
		out = append(out, *p.Adaptive)
	}
	return out
}

// AdaptiveWrites reports whether some adaptive read-ahead may change a mount: the
// default's or a rule's, not in its own observe, under a mode that is not observe (the
// rule's, else the policy's; for the default, the policy's or any rule's that sets no
// read-ahead of its own). Each such change is journaled first, so the agent needs the
// journal's directory.
func (p *Policy) AdaptiveWrites() bool {
	modeOf := func(r Rule) Mode { return cmp.Or(r.Mode, p.Mode) }
	for _, r := range p.Rules {
		if r.Adaptive != nil && !r.Adaptive.Observe && modeOf(r) != ModeObserve {
			return true
		}
	}
	if p.Adaptive == nil || p.Adaptive.Observe {
		return false
	}
	if p.Mode != ModeObserve {
		return true
	}
	for _, r := range p.Rules {
		if r.Adaptive == nil && !r.Overrides.pinsReadAhead() && modeOf(r) != ModeObserve {
			return true
		}
	}
	return false
}
