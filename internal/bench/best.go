package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nfstune/nfstune/internal/display"
)

// BestPerJob finds, for each job, the variant with the best median on the job's primary
// metric, and judges it against the baseline: the variant matching the tuning found at
// the start (read-ahead origRA, the original nconnect and rsize), or the first variant.
func BestPerJob(res *Result, variants []Variant, origRA int, orig *Tuning) []Best {
	base := variants[0]
	for _, v := range variants {
		if matchesOrig(v, origRA, orig) {
			base = v
			break
		}
	}
	byJob := map[string]map[string][]Run{}
	var jobs []string
	for _, r := range res.Runs {
		if byJob[r.Job] == nil {
			byJob[r.Job] = map[string][]Run{}
			jobs = append(jobs, r.Job)
		}
		byJob[r.Job][r.Variant] = append(byJob[r.Job][r.Variant], r)
	}
	var out []Best
	for _, job := range jobs {
		var all []Run
		for _, rs := range byJob[job] {
			all = append(all, rs...)
		}
		m := PrimaryMetric(all)
		var best *Variant
		var bestSpread Spread
		for i, v := range variants {
			rs := byJob[job][v.Name]
			if len(rs) == 0 {
				continue
			}
			sp := NewSpread(values(rs, m))
			if best == nil || sp.Median > bestSpread.Median {
				best, bestSpread = &variants[i], sp
			}
		}
		if best == nil {
			continue
		}
		c := compareMetric(job, m, byJob[job][base.Name], byJob[job][best.Name])
		b := Best{Job: job, Metric: m, Variant: best.Name, Spread: bestSpread, Baseline: base.Name,
			BaselineSpread: c.A, ChangePct: c.ChangePct, Verdict: c.Verdict}
		if best.Name == base.Name {
			b.ChangePct, b.Verdict = nil, "baseline is best"
		}
		out = append(out, b)
	}
	return out
}

func matchesOrig(v Variant, origRA int, orig *Tuning) bool {
	if v.ReadAheadKB > 0 && v.ReadAheadKB != origRA {
		return false
	}
	if orig == nil {
		return v.NConnect == 0 && v.RSize == 0
	}
	nc := max(orig.NConnect, 1)
	if v.NConnect > 0 && v.NConnect != nc {
		return false
	}
	return v.RSize == 0 || v.RSize == orig.RSize
}

// PolicySnippet returns a policy rule applying the variant that is best for the most
// jobs, for the mount point swept. It says so when no variant beat the baseline beyond
// the run-to-run spread.
func PolicySnippet(profile, mountPoint string, best []Best, variants []Variant) string {
	if len(best) == 0 {
		return ""
	}
	wins := map[string]int{}
	winner := ""
	for _, b := range best {
		wins[b.Variant]++
		if winner == "" || wins[b.Variant] > wins[winner] {
			winner = b.Variant
		}
	}
	var v Variant
	for _, x := range variants {
		if x.Name == winner {
			v = x
		}
	}
	real := 0
	for _, b := range best {
		if b.Variant == winner && b.Verdict == VerdictBetter {
			real++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# nfstune bench sweep, profile %s: %s is best for %d of %d jobs", profile, winner, wins[winner], len(best))
	if real == 0 {
		sb.WriteString(";\n# none of them beats the starting setting beyond the run-to-run spread, so this rule is optional")
	}
	sb.WriteString(".\napiVersion: nfstune.io/v1alpha1\nkind: Policy\nrules:\n")
	fmt.Fprintf(&sb, "  - name: %s\n", strconv.Quote("bench sweep "+profile))
	fmt.Fprintf(&sb, "    match:\n      mountpoint: %s\n", strconv.Quote(escapeGlob(mountPoint)))
	if v.ReadAheadKB > 0 {
		// A measured optimum: exact, so that a larger value is lowered to it too.
		fmt.Fprintf(&sb, "    readAheadKB: %d\n    readAheadExact: true\n", v.ReadAheadKB)
	}
	if v.NConnect > 0 || v.RSize > 0 {
		sb.WriteString("    mountOptions:\n")
		if v.NConnect > 0 {
			fmt.Fprintf(&sb, "      nconnect: %d\n", v.NConnect)
		}
		if v.RSize > 0 {
			fmt.Fprintf(&sb, "      rsize: %d\n", v.RSize)
		}
	}
	return sb.String()
}

// escapeGlob escapes path.Match's special characters so the mount point matches itself.
func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// WriteSweepTable prints the runs per variant, the best variant per job and the policy
// snippet.
func WriteSweepTable(w io.Writer, res *SweepResult) error {
	if err := WriteRunTable(w, &res.Result); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tMETRIC\tBEST\tMEDIAN [MIN..MAX]\tBASELINE\tMEDIAN [MIN..MAX]\tCHANGE")
	for _, b := range res.Best {
		c := Comparison{Metric: b.Metric, ChangePct: b.ChangePct, Verdict: b.Verdict}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", display.Args([]any{b.Job, b.Metric, b.Variant, b.Spread, b.Baseline, b.BaselineSpread, c.Change()})...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if res.Policy != "" {
		fmt.Fprintf(w, "\n%s", res.Policy)
	}
	return nil
}
