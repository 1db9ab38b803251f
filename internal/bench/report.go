package bench

import (
	"bytes"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ReportInput is one result file shown in a report.
type ReportInput struct {
	Label  string
	Result *Result
}

// ReportOptions shape a report.
type ReportOptions struct {
	// Format is "md" or "html".
	Format string
	// LimitMiBs is the throughput limit each result is set against (the NIC's speed or
	// the service's provisioned throughput), in MiB/s; 0 when unknown.
	LimitMiBs  float64
	LimitLabel string
}

// reportRow is one job and series with its figures.
type reportRow struct {
	Job, Series string
	MiBs, IOPS  Spread
	P50, P99    Spread
	Share       string // median throughput as a share of the limit, "" when no limit
}

type reportInputView struct {
	Label, Profile, Tuning, Fio, Kernel, Started string
	Runs                                         int
	Interrupted                                  bool
}

type reportData struct {
	Inputs     []reportInputView
	Rows       []reportRow
	LimitLabel string
	Commands   []string
	// CurveRows are the steps of the load curves, CurveKnees a sentence per curve; both
	// empty when no result is a curve.
	CurveRows  []curveRow
	CurveKnees []string
}

// curveRow is one step of one result's load curve.
type curveRow struct {
	Series                      string
	Step                        int
	Offered, IOPS, P50ms, P99ms string
	Knee                        string
}

// Chart files written next to the report.
const (
	ChartThroughput = "throughput.svg"
	ChartIOPS       = "iops.svg"
	ChartLatency    = "latency.svg"
	// ChartCurve is written only when a result is a load curve (bench curve).
	ChartCurve = "loadcurve.svg"
)

// WriteReport writes the report and its three charts into dir and returns the paths.
func WriteReport(dir string, inputs []ReportInput, opts ReportOptions) ([]string, error) {
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no results to report")
	}
	if opts.Format != "md" && opts.Format != "html" {
		return nil, fmt.Errorf("unknown report format %q (want md or html)", opts.Format)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating report directory: %w", err)
	}
	data, bars := buildReport(inputs, opts)
	charts := map[string][]byte{}
	for name, c := range bars {
		charts[name] = c.SVG()
	}
	if curves, ok := buildCurves(inputs, &data); ok {
		charts[ChartCurve] = curves.SVG()
	}
	var written []string
	for _, name := range slices.Sorted(maps.Keys(charts)) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, charts[name], 0o644); err != nil {
			return written, fmt.Errorf("writing chart: %w", err)
		}
		written = append(written, p)
	}
	var doc []byte
	var err error
	name := "report.md"
	if opts.Format == "html" {
		name = "report.html"
		doc, err = renderHTML(data)
	} else {
		doc = renderMarkdown(data)
	}
	if err != nil {
		return written, err
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, doc, 0o644); err != nil {
		return written, fmt.Errorf("writing report: %w", err)
	}
	return append(written, p), nil
}

func buildReport(inputs []ReportInput, opts ReportOptions) (reportData, map[string]barChart) {
	var data reportData
	data.LimitLabel = opts.LimitLabel
	var series []string
	seriesIdx := map[string]int{}
	var jobs []string
	jobIdx := map[string]int{}
	cells := map[[2]int][]Run{}
	seenCmd := map[string]bool{}
	for _, in := range inputs {
		r := in.Result
		v := reportInputView{Label: in.Label, Profile: r.Provenance.Profile, Fio: r.Provenance.FioVersion,
			Kernel: r.Provenance.Kernel, Runs: len(r.Runs), Interrupted: r.Provenance.Interrupted}
		if !r.Provenance.Started.IsZero() {
			v.Started = r.Provenance.Started.UTC().Format("2006-01-02 15:04 MST")
		}
		if r.Tuning != nil {
			v.Tuning = r.Tuning.Describe()
		}
		data.Inputs = append(data.Inputs, v)
		for _, run := range r.Runs {
			s := in.Label
			if run.Variant != "" {
				s += " " + run.Variant
			}
			si, ok := seriesIdx[s]
			if !ok {
				si = len(series)
				series = append(series, s)
				seriesIdx[s] = si
			}
			ji, ok := jobIdx[run.Job]
			if !ok {
				ji = len(jobs)
				jobs = append(jobs, run.Job)
				jobIdx[run.Job] = ji
			}
			cells[[2]int{ji, si}] = append(cells[[2]int{ji, si}], run)
			if len(run.Command) > 0 && !seenCmd[in.Label+run.Job] {
				seenCmd[in.Label+run.Job] = true
				data.Commands = append(data.Commands, fmt.Sprintf("%s: %s", in.Label, strings.Join(run.Command, " ")))
			}
		}
	}
	mk := func(title, ylabel string) barChart {
		c := barChart{Title: title, YLabel: ylabel, Groups: jobs, Series: series, Values: make([][]Spread, len(jobs))}
		for i := range c.Values {
			c.Values[i] = make([]Spread, len(series))
		}
		return c
	}
	tput := mk("Throughput per job (median, min..max)", "MiB/s")
	tput.Limit, tput.LimitLabel = opts.LimitMiBs, opts.LimitLabel
	iops := mk("Operations per second per job (median, min..max)", "IOPS (files/s for metadata jobs)")
	lat := mk("99th percentile latency per job (median, min..max)", "ms")
	for ji, job := range jobs {
		for si, s := range series {
			rs := cells[[2]int{ji, si}]
			if len(rs) == 0 {
				continue
			}
			row := reportRow{Job: job, Series: s, MiBs: NewSpread(values(rs, MetricMiBs)), IOPS: NewSpread(values(rs, MetricIOPS)),
				P50: NewSpread(latP50(rs)), P99: NewSpread(values(rs, MetricP99ms))}
			if opts.LimitMiBs > 0 && row.MiBs.Median > 0 {
				row.Share = fmt.Sprintf("%.0f%%", row.MiBs.Median/opts.LimitMiBs*100)
			}
			data.Rows = append(data.Rows, row)
			tput.Values[ji][si], iops.Values[ji][si], lat.Values[ji][si] = row.MiBs, row.IOPS, row.P99
		}
	}
	return data, map[string]barChart{ChartThroughput: tput, ChartIOPS: iops, ChartLatency: lat}
}

// buildCurves draws the load curve of every result that has one, one line each, and adds
// their steps and knees to d; false when no result is a curve.
func buildCurves(inputs []ReportInput, d *reportData) (curveChart, bool) {
	c := curveChart{Title: "Load curve: response time against operations per second",
		XLabel: "achieved ops/s", YLabel: "ms (p99 solid, p50 dashed)"}
	for _, in := range inputs {
		cv := in.Result.Curve
		if cv == nil {
			continue
		}
		if c.Bound == 0 {
			c.Bound = cv.LatencyBoundms
		}
		line := curveLine{Label: in.Label, Steps: cv.Steps, Knee: -1}
		if cv.Knee != nil {
			line.Knee = cv.Knee.Step
		}
		c.Lines = append(c.Lines, line)
		for i, st := range cv.Steps {
			row := curveRow{Series: in.Label, Step: i + 1, Offered: formatNum(st.OfferedIOPS), IOPS: formatNum(st.IOPS),
				P50ms: formatNum(st.P50ms), P99ms: formatNum(st.P99ms)}
			if i == line.Knee {
				row.Knee = string(cv.Knee.Rule)
			}
			d.CurveRows = append(d.CurveRows, row)
		}
		d.CurveKnees = append(d.CurveKnees, in.Label+": "+kneeSentence(cv))
	}
	return c, len(c.Lines) > 0
}

func latP50(rs []Run) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = r.LatP50ms
	}
	return out
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func renderMarkdown(d reportData) []byte {
	var b bytes.Buffer
	b.WriteString("# nfstune bench report\n\nFigures are medians over the repeats, with [min..max].")
	if d.LimitLabel != "" {
		fmt.Fprintf(&b, " Throughput is also shown as a share of %s.", d.LimitLabel)
	}
	b.WriteString("\n\n## Results\n\n| Result | Profile | Tuning | fio | Kernel | Started | Runs |\n|---|---|---|---|---|---|---|\n")
	for _, in := range d.Inputs {
		runs := fmt.Sprint(in.Runs)
		if in.Interrupted {
			runs += " (interrupted)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", mdCell(in.Label), mdCell(in.Profile), mdCell(in.Tuning), mdCell(in.Fio), mdCell(in.Kernel), in.Started, runs)
	}
	b.WriteString("\n## Throughput\n\n![Throughput per job](" + ChartThroughput + ")\n\n")
	share := ""
	if d.LimitLabel != "" {
		share = " Share of limit |"
	}
	fmt.Fprintf(&b, "| Job | Result | MiB/s |%s\n|---|---|---|%s\n", share, strings.Repeat("---|", boolInt(share != "")))
	for _, r := range d.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s |", mdCell(r.Job), mdCell(r.Series), r.MiBs)
		if share != "" {
			fmt.Fprintf(&b, " %s |", orDash(r.Share))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Operations per second\n\n![IOPS per job](" + ChartIOPS + ")\n\n| Job | Result | IOPS |\n|---|---|---|\n")
	for _, r := range d.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(r.Job), mdCell(r.Series), r.IOPS)
	}
	b.WriteString("\n## Latency\n\n![p99 latency per job](" + ChartLatency + ")\n\n| Job | Result | p50 ms | p99 ms |\n|---|---|---|---|\n")
	for _, r := range d.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(r.Job), mdCell(r.Series), r.P50, r.P99)
	}
	if len(d.CurveRows) > 0 {
		b.WriteString("\n## Load curve\n\n![Load curve](" + ChartCurve + ")\n\n")
		for _, k := range d.CurveKnees {
			b.WriteString("- " + mdCell(k) + "\n")
		}
		b.WriteString("\n| Result | Step | Offered ops/s | Achieved ops/s | p50 ms | p99 ms | Knee |\n|---|---|---|---|---|---|---|\n")
		for _, r := range d.CurveRows {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", mdCell(r.Series), r.Step, r.Offered, r.IOPS, r.P50ms, r.P99ms, orDash(r.Knee))
		}
	}
	b.WriteString("\n## fio commands\n\n```\n")
	for _, c := range d.Commands {
		b.WriteString(c + "\n")
	}
	b.WriteString("```\n")
	return b.Bytes()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

var htmlReport = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>nfstune bench report</title>
<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style>
</head><body>
<h1>nfstune bench report</h1>
<p>Figures are medians over the repeats, with [min..max].{{if .LimitLabel}} Throughput is also shown as a share of {{.LimitLabel}}.{{end}}</p>
<h2>Results</h2>
<table><tr><th>Result</th><th>Profile</th><th>Tuning</th><th>fio</th><th>Kernel</th><th>Started</th><th>Runs</th></tr>
{{range .Inputs}}<tr><td>{{.Label}}</td><td>{{.Profile}}</td><td>{{.Tuning}}</td><td>{{.Fio}}</td><td>{{.Kernel}}</td><td>{{.Started}}</td><td>{{.Runs}}{{if .Interrupted}} (interrupted){{end}}</td></tr>
{{end}}</table>
<h2>Throughput</h2>
<img src="throughput.svg" alt="Throughput per job">
<table><tr><th>Job</th><th>Result</th><th>MiB/s</th>{{if .LimitLabel}}<th>Share of limit</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Job}}</td><td>{{.Series}}</td><td>{{.MiBs}}</td>{{if $.LimitLabel}}<td>{{if .Share}}{{.Share}}{{else}}-{{end}}</td>{{end}}</tr>
{{end}}</table>
<h2>Operations per second</h2>
<img src="iops.svg" alt="IOPS per job">
<table><tr><th>Job</th><th>Result</th><th>IOPS</th></tr>
{{range .Rows}}<tr><td>{{.Job}}</td><td>{{.Series}}</td><td>{{.IOPS}}</td></tr>
{{end}}</table>
<h2>Latency</h2>
<img src="latency.svg" alt="p99 latency per job">
<table><tr><th>Job</th><th>Result</th><th>p50 ms</th><th>p99 ms</th></tr>
{{range .Rows}}<tr><td>{{.Job}}</td><td>{{.Series}}</td><td>{{.P50}}</td><td>{{.P99}}</td></tr>
{{end}}</table>
{{if .CurveRows}}<h2>Load curve</h2>
<img src="loadcurve.svg" alt="Load curve">
<ul>{{range .CurveKnees}}<li>{{.}}</li>{{end}}</ul>
<table><tr><th>Result</th><th>Step</th><th>Offered ops/s</th><th>Achieved ops/s</th><th>p50 ms</th><th>p99 ms</th><th>Knee</th></tr>
{{range .CurveRows}}<tr><td>{{.Series}}</td><td>{{.Step}}</td><td>{{.Offered}}</td><td>{{.IOPS}}</td><td>{{.P50ms}}</td><td>{{.P99ms}}</td><td>{{if .Knee}}{{.Knee}}{{else}}-{{end}}</td></tr>
{{end}}</table>
{{end}}<h2>fio commands</h2>
<pre>{{range .Commands}}{{.}}
{{end}}</pre>
</body></html>
`))

func renderHTML(d reportData) ([]byte, error) {
	var b bytes.Buffer
	if err := htmlReport.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("rendering HTML report: %w", err)
	}
	return b.Bytes(), nil
}
