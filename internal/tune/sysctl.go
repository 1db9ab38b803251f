package tune

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/policy"
)

// validSysctl accepts dotted sysctl names such as "sunrpc.tcp_slot_table_entries" or
// "net.ipv4.tcp_rmem": at least two non-empty parts of lower-case letters, digits, '_' and '-'.
func validSysctl(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}

// checkSysctl refuses a sysctl the policy does not allow, or a value outside its range.
func checkSysctl(name string, v int64) error {
	r, ok := policy.SysctlLimit(name)
	switch {
	case !ok || !validSysctl(name):
		return fmt.Errorf("%q skipped: not a sysctl nfstune sets", name)
	case v < r.Min || v > r.Max:
		return fmt.Errorf("%s skipped: %d is out of range %d..%d", name, v, r.Min, r.Max)
	}
	return nil
}

// sysctlPath maps a dotted name to its file below /proc/sys (see sysctl.d(5)).
func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// raiseSysctl returns the value to write for a sysctl whose current value is cur, or false
// when it is already right. Single numbers are raised to want (set to want with exact).
// Triples such as net.ipv4.tcp_rmem ("min default max") have their maximum raised and the
// other fields kept.
func raiseSysctl(cur string, want int64, exact bool) (string, bool, error) {
	f := strings.Fields(cur)
	switch len(f) {
	case 1:
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return "", false, fmt.Errorf("not a number: %q", cur)
		}
		if n == want || (n > want && !exact) {
			return "", false, nil
		}
		return strconv.FormatInt(want, 10), true, nil
	case 3:
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return "", false, fmt.Errorf("not a number triple: %q", cur)
		}
		if n == want || (n > want && !exact) {
			return "", false, nil
		}
		return f[0] + " " + f[1] + " " + strconv.FormatInt(want, 10), true, nil
	}
	return "", false, fmt.Errorf("unexpected value %q", cur)
}

// planSysctls adds live sysctl writes and the /etc/sysctl.d drop-in that keeps them across
// reboots. The drop-in lists every sysctl whose live value is not above the target, so that a
// second run writes the same file and an administrator's higher value is left to its own file.
func planSysctls(root hostfs.Root, p *Plan, want, max map[string]int64, opts Options) {
	if len(want) == 0 && len(max) == 0 {
		return
	}
	var lines []string
	names := sortedKeys(want)
	for _, name := range sortedKeys(max) {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if bound, ok := max[name]; ok {
			if line, ok := planSysctlMax(root, p, name, bound, opts); ok {
				lines = append(lines, line)
			}
			continue
		}
		target := want[name]
		if err := checkSysctl(name, target); err != nil {
			p.note("sysctl %s", err)
			continue
		}
		sp := sysctlPath(name)
		cur, err := readLive(root, sp)
		if err != nil {
			p.note("sysctl %s skipped: %v (is its module loaded?)", name, err)
			continue
		}
		val, change, err := raiseSysctl(cur, target, opts.Exact)
		if err != nil {
			p.note("sysctl %s skipped: %v", name, err)
			continue
		}
		if change {
			p.Actions = append(p.Actions, Action{
				Kind:   KindSysctl,
				Path:   sp,
				Old:    strings.Join(strings.Fields(cur), " "),
				New:    val,
				Reason: fmt.Sprintf("profile wants %s >= %d", name, target),
			})
			lines = append(lines, name+" = "+val)
			continue
		}
		if v, _, _ := raiseSysctl(cur, target, true); v == "" {
			// Live value equals the target: keep it in the drop-in (written by an earlier run).
			lines = append(lines, name+" = "+strings.Join(strings.Fields(cur), " "))
		}
	}
	if len(lines) == 0 {
		return
	}
	content := "# Written by nfstune apply; removed by nfstune revert.\n" + strings.Join(lines, "\n") + "\n"
	a, ok, err := fileAction(root, KindSysctlFile, SysctlFilePath, content, "keep the NFS sysctls across reboots")
	if err != nil {
		p.note("sysctl drop-in skipped: %v", err)
		return
	}
	if ok {
		p.Actions = append(p.Actions, a)
	}
}

// planSysctlMax handles a sysctl with an upper bound: a single number above it is reported,
// and lowered with opts.Exact. It returns the drop-in line to keep, if any.
func planSysctlMax(root hostfs.Root, p *Plan, name string, bound int64, opts Options) (string, bool) {
	if err := checkSysctl(name, bound); err != nil {
		p.note("sysctl %s", err)
		return "", false
	}
	sp := sysctlPath(name)
	cur, err := readLive(root, sp)
	if err != nil {
		p.note("sysctl %s skipped: %v (is its module loaded?)", name, err)
		return "", false
	}
	n, err := strconv.ParseInt(cur, 10, 64)
	if err != nil {
		p.note("sysctl %s skipped: not a number: %q", name, cur)
		return "", false
	}
	val := strconv.FormatInt(bound, 10)
	switch {
	case n == bound:
		return name + " = " + val, true
	case n < bound:
		return "", false
	case !opts.Exact:
		p.note("sysctl %s is %d, above the profile's bound %d; lowered only with --exact", name, n, bound)
		return "", false
	}
	p.Actions = append(p.Actions, Action{Kind: KindSysctl, Path: sp, Old: cur, New: val, Reason: fmt.Sprintf("profile wants %s <= %d", name, bound)})
	return name + " = " + val, true
}
