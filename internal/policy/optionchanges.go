package policy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/inventory"
)

// OptionChange is one mount option that differs from the profile: what nfstune apply plans
// for the mount and what the audit reports (one place, so that they cannot disagree).
type OptionChange struct {
	Name string `json:"name"`
	Have string `json:"have"`
	Want string `json:"want"`
}

// acDefault is the kernel default of an attribute cache timer, in seconds (nfs(5));
// mountinfo omits the timers that are at their default.
func acDefault(name string) string {
	switch name {
	case "acregmin":
		return "3"
	case "acdirmin":
		return "30"
	}
	return "60"
}

// OptionChanges compares the effective options of a mount with the profile. Numbers with
// "at least" semantics (nconnect, rsize, wsize) change only when below the profile. Want is
// the option as it must be written in fstab.
func OptionChanges(m *inventory.Mount, want MountOptions) []OptionChange {
	have := m.Options
	var out []OptionChange
	add := func(name, h, w string) { out = append(out, OptionChange{Name: name, Have: h, Want: w}) }
	if want.Vers != "" && normVers(have["vers"]) != normVers(want.Vers) {
		add("vers", have["vers"], "vers="+want.Vers)
	}
	if want.Proto != "" && strings.TrimSuffix(have["proto"], "6") != want.Proto {
		add("proto", have["proto"], "proto="+want.Proto)
	}
	atLeast := func(name string, cur, w int) {
		if w > 0 && cur < w {
			add(name, strconv.Itoa(cur), fmt.Sprintf("%s=%d", name, w))
		}
	}
	nconnect := m.NConnect
	if nconnect == 0 {
		nconnect = intOpt(have, "nconnect", 1)
	}
	atLeast("nconnect", nconnect, want.NConnect)
	atLeast("rsize", firstNonZero(m.RSize, intOpt(have, "rsize", 0)), want.RSize)
	atLeast("wsize", firstNonZero(m.WSize, intOpt(have, "wsize", 0)), want.WSize)
	if want.Hard != nil {
		_, hard := have["hard"]
		cur := "hard"
		if !hard {
			cur = "soft"
			if _, ok := have["softerr"]; ok {
				cur = "softerr"
			}
		}
		if *want.Hard != hard {
			w := "soft"
			if *want.Hard {
				w = "hard"
			}
			add("hard", cur, w)
		}
	}
	exact := func(name string, w int) {
		if w > 0 && have[name] != strconv.Itoa(w) {
			add(name, have[name], fmt.Sprintf("%s=%d", name, w))
		}
	}
	exact("timeo", want.Timeo)
	exact("retrans", want.Retrans)
	if want.ACTimeo > 0 {
		w := strconv.Itoa(want.ACTimeo)
		var cur []string
		differs := false
		for _, k := range []string{"acregmin", "acregmax", "acdirmin", "acdirmax"} {
			v, ok := have[k]
			if !ok {
				v = acDefault(k)
			}
			cur = append(cur, k+"="+v)
			differs = differs || v != w
		}
		if differs {
			add("actimeo", strings.Join(cur, ","), "actimeo="+w)
		}
	}
	flag := func(name string, on bool) {
		if _, ok := have[name]; on && !ok {
			add(name, "", name)
		}
	}
	flag("nocto", want.NoCTO)
	flag("nolock", want.NoLock)
	for _, e := range want.Extra {
		k, v, kv := strings.Cut(e, "=")
		if cur, ok := have[k]; !ok || (kv && cur != v) {
			add(k, cur, e)
		}
	}
	return out
}

func normVers(v string) string {
	if v == "4" {
		return "4.0"
	}
	return v
}

func intOpt(opts map[string]string, k string, def int) int {
	if n, err := strconv.Atoi(opts[k]); err == nil {
		return n
	}
	return def
}

func firstNonZero(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}
