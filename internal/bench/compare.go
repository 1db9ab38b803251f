package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/nfstune/nfstune/internal/display"
	"github.com/nfstune/nfstune/internal/inventory"
)

// Metric names a figure of a run.
type Metric string

// Metrics compared and charted.
const (
	MetricMiBs  Metric = "MiB/s"  // read plus write throughput
	MetricIOPS  Metric = "IOPS"   // read plus write operations per second
	MetricP99ms Metric = "p99 ms" // 99th percentile latency
)

// Value returns the run's value of m.
func (r Run) Value(m Metric) float64 {
	switch m {
	case MetricMiBs:
		return r.ReadMiBs + r.WriteMiBs
	case MetricIOPS:
		return r.ReadIOPS + r.WriteIOPS
	case MetricP99ms:
		return r.LatP99ms
	}
	return math.NaN()
}

// HigherIsBetter reports whether a larger value of m is an improvement.
func (m Metric) HigherIsBetter() bool { return m != MetricP99ms }

// PrimaryMetric is the metric a job is judged by: throughput, or operations per second
// for jobs that move no data (the metadata engines).
func PrimaryMetric(runs []Run) Metric {
	for _, r := range runs {
		if r.ReadMiBs+r.WriteMiBs > 0 {
			return MetricMiBs
		}
	}
	return MetricIOPS
}

// Spread summarises repeated measurements.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// NewSpread computes the median and range of vs.
func NewSpread(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{N: len(s), Median: med, Min: s[0], Max: s[len(s)-1]}
}

// Overlaps reports whether the ranges of s and o overlap.
func (s Spread) Overlaps(o Spread) bool { return s.Min <= o.Max && o.Min <= s.Max }

// Verdicts of a comparison.
const (
	VerdictBetter     = "better"
	VerdictWorse      = "worse"
	VerdictNoise      = "within noise"
	VerdictTooFew     = "too few repeats"
	VerdictMissingOne = "missing"
)

// Comparison is one job and metric compared between two results.
type Comparison struct {
	Job    string `json:"job"`
	Metric Metric `json:"metric"`
	A      Spread `json:"a"`
	B      Spread `json:"b"`
	// ChangePct is the change of the median from A to B in percent; nil when A's median
	// is zero or a side is missing.
	ChangePct *float64 `json:"change_pct,omitempty"`
	// Verdict is "better" or "worse" only when the ranges do not overlap and each side
	// has at least two runs; otherwise "within noise" or "too few repeats".
	Verdict string `json:"verdict"`
}

// Key identifies a job within a result: the job and, for sweeps, the variant.
func (r Run) Key() string {
	if r.Variant == "" {
		return r.Job
	}
	return r.Job + " [" + r.Variant + "]"
}

// groupRuns groups runs by Key, keeping first-seen order.
func groupRuns(runs []Run) ([]string, map[string][]Run) {
	var order []string
	m := map[string][]Run{}
	for _, r := range runs {
		k := r.Key()
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = append(m[k], r)
	}
	return order, m
}

// Compare compares b against a, job by job, on the job's primary metric and on p99
// latency.
func Compare(a, b *Result) []Comparison {
	orderA, ga := groupRuns(a.Runs)
	orderB, gb := groupRuns(b.Runs)
	keys := orderA
	for _, k := range orderB {
		if _, ok := ga[k]; !ok {
			keys = append(keys, k)
		}
	}
	var out []Comparison
	for _, k := range keys {
		ra, rb := ga[k], gb[k]
		primary := PrimaryMetric(append(append([]Run(nil), ra...), rb...))
		for _, m := range []Metric{primary, MetricP99ms} {
			out = append(out, compareMetric(k, m, ra, rb))
		}
	}
	return out
}

func values(runs []Run, m Metric) []float64 {
	vs := make([]float64, 0, len(runs))
	for _, r := range runs {
		vs = append(vs, r.Value(m))
	}
	return vs
}

func compareMetric(job string, m Metric, ra, rb []Run) Comparison {
	c := Comparison{Job: job, Metric: m, A: NewSpread(values(ra, m)), B: NewSpread(values(rb, m))}
	switch {
	case c.A.N == 0 || c.B.N == 0:
		c.Verdict = VerdictMissingOne
		return c
	case c.A.Median != 0:
		pct := (c.B.Median - c.A.Median) / math.Abs(c.A.Median) * 100
		c.ChangePct = &pct
	}
	switch {
	case c.A.N < 2 || c.B.N < 2:
		c.Verdict = VerdictTooFew
	case c.A.Overlaps(c.B):
		c.Verdict = VerdictNoise
	case (c.B.Median > c.A.Median) == m.HigherIsBetter():
		c.Verdict = VerdictBetter
	default:
		c.Verdict = VerdictWorse
	}
	return c
}

// WriteComparisonTable prints comparisons as an aligned table. A percentage is shown
// only for a real difference; overlapping spreads print "within noise" instead.
func WriteComparisonTable(w io.Writer, cs []Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tMETRIC\tA MEDIAN [MIN..MAX]\tB MEDIAN [MIN..MAX]\tCHANGE")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", display.Args([]any{c.Job, c.Metric, c.A.String(), c.B.String(), c.Change()})...)
	}
	return tw.Flush()
}

// Change is the human form of the verdict.
func (c Comparison) Change() string {
	switch c.Verdict {
	case VerdictBetter, VerdictWorse:
		if c.ChangePct == nil {
			return c.Verdict
		}
		return fmt.Sprintf("%+.1f%% (%s)", *c.ChangePct, c.Verdict)
	case VerdictTooFew:
		if c.ChangePct != nil {
			return fmt.Sprintf("%+.1f%% (one run, spread unknown)", *c.ChangePct)
		}
	}
	return c.Verdict
}

func (s Spread) String() string {
	if s.N == 0 {
		return "-"
	}
	if s.N == 1 || s.Min == s.Max {
		return formatNum(s.Median)
	}
	return fmt.Sprintf("%s [%s..%s]", formatNum(s.Median), formatNum(s.Min), formatNum(s.Max))
}

func formatNum(v float64) string {
	if math.Abs(v) >= 100 || v == 0 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	// Three significant digits, without trailing zeros.
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	return strconv.FormatFloat(round(v, digits), 'f', -1, 64)
}

// JobSummary is the spread of each metric for one job (and variant) of a result.
type JobSummary struct {
	Key       string `json:"job"`
	Runs      int    `json:"runs"`
	ReadMiBs  Spread `json:"read_mib_s"`
	WriteMiBs Spread `json:"write_mib_s"`
	IOPS      Spread `json:"iops"`
	P50ms     Spread `json:"lat_p50_ms"`
	P99ms     Spread `json:"lat_p99_ms"`
}

// Summarize groups a result's runs by job and variant, in run order.
func Summarize(res *Result) []JobSummary {
	order, g := groupRuns(res.Runs)
	out := make([]JobSummary, 0, len(order))
	for _, k := range order {
		rs := g[k]
		var rd, wr, iops, p50, p99 []float64
		for _, r := range rs {
			rd = append(rd, r.ReadMiBs)
			wr = append(wr, r.WriteMiBs)
			iops = append(iops, r.ReadIOPS+r.WriteIOPS)
			p50 = append(p50, r.LatP50ms)
			p99 = append(p99, r.LatP99ms)
		}
		out = append(out, JobSummary{Key: k, Runs: len(rs), ReadMiBs: NewSpread(rd), WriteMiBs: NewSpread(wr),
			IOPS: NewSpread(iops), P50ms: NewSpread(p50), P99ms: NewSpread(p99)})
	}
	return out
}

// WriteRunTable prints the tuning line and one row per job with medians and ranges.
func WriteRunTable(w io.Writer, res *Result) error {
	if t := res.Tuning; t != nil {
		fmt.Fprintf(w, "%s\n\n", display.Text(t.Describe()))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tRUNS\tREAD MiB/s\tWRITE MiB/s\tIOPS\tP50 ms\tP99 ms")
	for _, s := range Summarize(res) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", display.Args([]any{s.Key, s.Runs, s.ReadMiBs, s.WriteMiBs, s.IOPS, s.P50ms, s.P99ms})...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	p := res.Provenance
	_, err := fmt.Fprintf(w, "\nprofile %s, %s, kernel %s; medians with [min..max] over the repeats\n", display.Args([]any{p.Profile, p.FioVersion, p.Kernel})...)
	return err
}

// Describe is a one-line account of the tuning state.
func (t *Tuning) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s", t.MountPoint, t.FSType)
	if t.Server != "" {
		fmt.Fprintf(&b, " %s:%s", t.Server, t.Export)
	}
	b.WriteString(")")
	if t.ReadAheadKB != nil {
		fmt.Fprintf(&b, " read_ahead_kb=%d", *t.ReadAheadKB)
	}
	if IsNFS(t.FSType) {
		fmt.Fprintf(&b, " vers=%s", t.Version)
		if t.NConnect > 0 {
			fmt.Fprintf(&b, " nconnect=%d", t.NConnect)
		}
		fmt.Fprintf(&b, " connections=%d rsize=%d wsize=%d backend=%s", t.Connections, t.RSize, t.WSize, t.Backend)
		if t.TransportSecurity != "" && t.TransportSecurity != inventory.XprtSecNone {
			fmt.Fprintf(&b, " xprtsec=%s", t.TransportSecurity)
		}
	}
	return b.String()
}
