package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// curveFio answers bench curve's fio commands with the recorded steps in
// testdata/curve, in order. They were recorded with fio 3.33 on a local ext4 directory
// from curveStepArgs' command lines at 400, 1600, 6400 and 400000 ops/s offered with
// --runtime=2 (testdata/curve/README.md).
type curveFio struct {
	mu     sync.Mutex
	layout [][]string
	steps  [][]string
}

func (f *curveFio) exec(ctx context.Context, _ string, args ...string) ([]byte, error) {
	if len(args) == 1 && args[0] == "--version" {
		return []byte("fio-3.33\n"), nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if contains(args, "--create_only=1") {
		f.layout = append(f.layout, args)
		return nil, ctx.Err()
	}
	f.steps = append(f.steps, args)
	return os.ReadFile(filepath.Join("testdata", "curve", fmt.Sprintf("step%d.json", len(f.steps))))
}

// newCurveRunner is a runner on a fake NFS host whose fio is a curveFio.
func newCurveRunner(t *testing.T) (*fakeHost, *curveFio, *Runner) {
	t.Helper()
	h := newFakeHost(t, "nfs4")
	f := &curveFio{}
	r := h.runner()
	r.Exec = f.exec
	return h, f, r
}

// sections splits a step's command line into its job sections by --name.
func sections(args []string) []map[string]string {
	var out []map[string]string
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if k == "name" {
			out = append(out, map[string]string{})
		}
		if len(out) > 0 {
			out[len(out)-1][k] = v
		}
	}
	return out
}

func TestCurveRecordsStepsUntilKnee(t *testing.T) {
	t.Parallel()
	h, f, r := newCurveRunner(t)
	res, err := r.Curve(context.Background(), CurveOptions{Mount: h.mount, Rates: []int{400, 1600, 6400, 400000, 800000},
		Runtime: 2 * time.Second, LatencyBound: DefaultLatencyBound})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Curve
	// Step 4 achieved about 110000 of the 400000 ops/s offered: past the knee, so the
	// fifth load is never offered.
	if len(f.steps) != 4 || len(c.Steps) != 4 || len(res.Runs) != 4 {
		t.Fatalf("fio steps %d, curve steps %d, runs %d; want 4", len(f.steps), len(c.Steps), len(res.Runs))
	}
	if c.Knee == nil || c.Knee.Step != 3 || c.Knee.Rule != KneeFellBehind {
		t.Fatalf("knee = %+v, want step index 3 by %q", c.Knee, KneeFellBehind)
	}
	if len(f.layout) != 1 {
		t.Errorf("files laid out %d times, want once before the steps", len(f.layout))
	}
	// Step 1: 202 creates, stats, reads and writes each in about 2 s, ~404 ops/s; the p99
	// over every operation is the reads' 798720 ns, though the write direction (creates
	// and writes) does as many operations.
	s1 := c.Steps[0]
	if s1.OfferedIOPS != 400 || s1.IOPS < 400 || s1.IOPS > 408 || s1.P99ms != 0.7987 {
		t.Errorf("step 1 = %+v, want 400 offered, about 404 achieved, p99 0.7987 ms", s1)
	}
	if res.Runs[0].LatP99ms != s1.P99ms || res.Runs[0].Variant != "offered=400/s" || res.Runs[0].Job != CurveProfile {
		t.Errorf("run 1 = %+v", res.Runs[0])
	}
	// Step 3: the write direction (creates and writes) did the most operations, with a p99
	// of 70144 ns; the step's p99 is the reads' 460800 ns.
	if c.Steps[2].P99ms != 0.4608 {
		t.Errorf("step 3 p99 = %v ms, want 0.4608 over every operation", c.Steps[2].P99ms)
	}
	if k := c.Steps[3]; k.IOPS > 0.9*k.OfferedIOPS || k.IOPS < 100000 {
		t.Errorf("step 4 = %+v, want about 110000 achieved of 400000", k)
	}
	createNames := map[string]bool{}
	for i, args := range f.steps {
		secs := sections(args)
		if len(secs) != 4 {
			t.Fatalf("step %d: %d sections, want 4", i+1, len(secs))
		}
		want := strconv.Itoa([]int{400, 1600, 6400, 400000}[i] / 8)
		for _, s := range secs {
			if s["rate_iops"] != want || s["numjobs"] != "2" {
				t.Errorf("step %d section %s: rate_iops %s numjobs %s, want %s and 2", i+1, s["name"], s["rate_iops"], s["numjobs"], want)
			}
			if _, ok := s["new_group"]; !ok {
				t.Errorf("step %d section %s: no --new_group", i+1, s["name"])
			}
			if s["ioengine"] == "filecreate" {
				createNames[s["filename_format"]] = true
			}
		}
	}
	if len(createNames) != 4 {
		t.Errorf("create file names %v, want new ones at each step", createNames)
	}
	if entries, _ := os.ReadDir(h.mount); len(entries) != 0 {
		t.Errorf("left behind %v", entries)
	}
	var table bytes.Buffer
	if err := WriteCurveTable(&table, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "knee at step 4") {
		t.Errorf("table:\n%s", table.String())
	}
}

var kneeTests = []struct {
	name   string
	steps  []CurveStep
	bound  float64
	want   int
	wantBy KneeRule
}{
	{name: "keeps up", want: -1, bound: 50, steps: []CurveStep{
		{OfferedIOPS: 100, IOPS: 100, P99ms: 1}, {OfferedIOPS: 200, IOPS: 195, P99ms: 1.2}, {OfferedIOPS: 400, IOPS: 380, P99ms: 2}}},
	{name: "p99 above the bound", want: 1, wantBy: KneeLatencyBound, bound: 5, steps: []CurveStep{
		{OfferedIOPS: 100, IOPS: 100, P99ms: 1}, {OfferedIOPS: 200, IOPS: 200, P99ms: 6}, {OfferedIOPS: 400, IOPS: 400, P99ms: 9}}},
	{name: "no bound", want: -1, steps: []CurveStep{
		{OfferedIOPS: 100, IOPS: 100, P99ms: 1}, {OfferedIOPS: 200, IOPS: 200, P99ms: 600}}},
	{name: "falls behind", want: 2, wantBy: KneeFellBehind, bound: 50, steps: []CurveStep{
		{OfferedIOPS: 100, IOPS: 100, P99ms: 1}, {OfferedIOPS: 200, IOPS: 200, P99ms: 1}, {OfferedIOPS: 400, IOPS: 350, P99ms: 3}}},
	{name: "90% of the offered load keeps up", want: -1, bound: 50, steps: []CurveStep{
		{OfferedIOPS: 100, IOPS: 100, P99ms: 1}, {OfferedIOPS: 1000, IOPS: 900, P99ms: 1}}},
	// The previous step achieved more than it was offered (fio's rate is not exact), so
	// this one keeps up with its own offered load but does no more work.
	{name: "stops rising", want: 1, wantBy: KneeFlat, bound: 50, steps: []CurveStep{
		{OfferedIOPS: 1000, IOPS: 1040, P99ms: 1}, {OfferedIOPS: 1100, IOPS: 1000, P99ms: 1}}},
	{name: "the bound is checked first", want: 1, wantBy: KneeLatencyBound, bound: 5, steps: []CurveStep{
		{OfferedIOPS: 100, IOPS: 100, P99ms: 1}, {OfferedIOPS: 200, IOPS: 50, P99ms: 8}}},
}

func TestFindKnee(t *testing.T) {
	t.Parallel()
	for _, tt := range kneeTests {
		t.Run(tt.name, func(t *testing.T) {
			k := FindKnee(tt.steps, tt.bound)
			switch {
			case tt.want < 0 && k != nil:
				t.Errorf("knee %+v, want none", k)
			case tt.want >= 0 && (k == nil || k.Step != tt.want || k.Rule != tt.wantBy):
				t.Errorf("knee %+v, want step %d by %q", k, tt.want, tt.wantBy)
			case k != nil && k.CurveStep != tt.steps[k.Step]:
				t.Errorf("knee figures %+v, want %+v", k.CurveStep, tt.steps[k.Step])
			}
		})
	}
}

func TestCurveRefusesBadRates(t *testing.T) {
	t.Parallel()
	h, f, r := newCurveRunner(t)
	for _, rates := range [][]int{{1000}, {1000, 500}, {1000, 1000}, {4, 1000}} {
		_, err := r.Curve(context.Background(), CurveOptions{Mount: h.mount, Rates: rates, Runtime: time.Second})
		if err == nil || !strings.Contains(err.Error(), "--rates") {
			t.Errorf("rates %v: err = %v, want a --rates error", rates, err)
		}
	}
	if len(f.steps)+len(f.layout) != 0 {
		t.Errorf("fio ran on refused rates")
	}
}

func curveResult(bound float64, steps ...CurveStep) *Result {
	c := &Curve{LatencyBoundms: bound, Steps: steps, Knee: FindKnee(steps, bound)}
	return &Result{Curve: c}
}

func TestCompareCurves(t *testing.T) {
	t.Parallel()
	// A saturates at 2000 ops/s offered (1500 achieved, p99 9 ms); p99 stays within 5 ms
	// up to 1000 ops/s.
	a := curveResult(50,
		CurveStep{OfferedIOPS: 500, IOPS: 500, P99ms: 2}, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P99ms: 4},
		CurveStep{OfferedIOPS: 2000, IOPS: 1500, P99ms: 9})
	tests := []struct {
		name                   string
		b                      *Result
		bound                  float64
		knee, atBound, summary string
	}{
		{name: "B saturates later and is faster", bound: 5, knee: VerdictBetter, atBound: VerdictBetter, summary: "B is better",
			b: curveResult(50, CurveStep{OfferedIOPS: 500, IOPS: 500, P99ms: 1}, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P99ms: 1.5},
				CurveStep{OfferedIOPS: 2000, IOPS: 2000, P99ms: 3}, CurveStep{OfferedIOPS: 4000, IOPS: 2500, P99ms: 20})},
		{name: "the same curve", bound: 5, knee: VerdictNoise, atBound: VerdictNoise, summary: "no difference beyond the margin", b: a},
		{name: "B is slower", bound: 5, knee: VerdictWorse, atBound: VerdictWorse, summary: "A is better",
			b: curveResult(50, CurveStep{OfferedIOPS: 500, IOPS: 500, P99ms: 6}, CurveStep{OfferedIOPS: 1000, IOPS: 700, P99ms: 12})},
		// At a 10 ms bound A's 1500 ops/s count; B's knee is higher but its p99 passes
		// 10 ms earlier.
		{name: "mixed", bound: 10, knee: VerdictBetter, atBound: VerdictWorse, summary: "mixed: each is better on one figure",
			b: curveResult(50, CurveStep{OfferedIOPS: 500, IOPS: 500, P99ms: 8}, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P99ms: 12},
				CurveStep{OfferedIOPS: 2000, IOPS: 1990, P99ms: 14}, CurveStep{OfferedIOPS: 4000, IOPS: 2000, P99ms: 40})},
		// B never reached its knee, and already achieved more than A's knee.
		{name: "B has no knee beyond A's", bound: 5, knee: VerdictBetter, atBound: VerdictBetter, summary: "B is better",
			b: curveResult(50, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P99ms: 1}, CurveStep{OfferedIOPS: 2000, IOPS: 2000, P99ms: 2})},
		// B never reached its knee, but was never offered more than A's knee: unknown.
		{name: "B has no knee below A's", bound: 5, knee: VerdictNoKnee, atBound: VerdictNoise, summary: "no difference beyond the margin",
			b: curveResult(50, CurveStep{OfferedIOPS: 500, IOPS: 500, P99ms: 1}, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P99ms: 1})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, err := CompareCurves(a, tt.b, tt.bound)
			if err != nil {
				t.Fatal(err)
			}
			if cc.Knee.Verdict != tt.knee || cc.AtBound.Verdict != tt.atBound || cc.Summary != tt.summary {
				t.Errorf("knee %q, at bound %q, summary %q; want %q, %q, %q", cc.Knee.Verdict, cc.AtBound.Verdict, cc.Summary, tt.knee, tt.atBound, tt.summary)
			}
		})
	}
	if _, err := CompareCurves(a, &Result{}, 5); err == nil {
		t.Error("a result without a curve compared")
	}
}

// svgCurve is what TestCurveChart reads of loadcurve.svg.
type svgCurve struct {
	Polylines []struct {
		Class  string `xml:"class,attr"`
		Points string `xml:"points,attr"`
		Title  string `xml:"title"`
	} `xml:"polyline"`
	Circles []struct {
		Class string `xml:"class,attr"`
	} `xml:"circle"`
}

func TestCurveChart(t *testing.T) {
	t.Parallel()
	a := curveResult(50,
		CurveStep{OfferedIOPS: 500, IOPS: 500, P50ms: 1, P99ms: 2}, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P50ms: 1, P99ms: 4},
		CurveStep{OfferedIOPS: 2000, IOPS: 1500, P50ms: 3, P99ms: 9})
	b := curveResult(50, CurveStep{OfferedIOPS: 500, IOPS: 500, P50ms: 0.5, P99ms: 1}, CurveStep{OfferedIOPS: 1000, IOPS: 1000, P50ms: 0.5, P99ms: 1.5})
	for _, r := range []*Result{a, b} {
		r.Runs = []Run{{Job: CurveProfile, Variant: "offered=500/s", ReadIOPS: 500}}
	}
	dir := t.TempDir()
	if _, err := WriteReport(dir, []ReportInput{{Label: "nconnect1", Result: a}, {Label: "nconnect4", Result: b}}, ReportOptions{Format: "md"}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ChartCurve))
	if err != nil {
		t.Fatal(err)
	}
	var svg svgCurve
	if err := xml.Unmarshal(raw, &svg); err != nil {
		t.Fatalf("%s is not well-formed XML: %v", ChartCurve, err)
	}
	var p99 []string
	for _, p := range svg.Polylines {
		if p.Class == "p99" {
			p99 = append(p99, p.Title+":"+strconv.Itoa(len(strings.Fields(p.Points))))
		}
	}
	if want := []string{"nconnect1:3", "nconnect4:2"}; strings.Join(p99, " ") != strings.Join(want, " ") {
		t.Errorf("p99 lines (label:points) = %v, want %v", p99, want)
	}
	knees := 0
	for _, c := range svg.Circles {
		if c.Class == "knee" {
			knees++
		}
	}
	if knees != 1 {
		t.Errorf("%d knees ringed, want 1 (only A has a knee)", knees)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"![Load curve](loadcurve.svg)", "| nconnect1 | 3 | 2000 | 1500 | 3 | 9 | " + string(KneeFellBehind) + " |",
		"- nconnect4: no knee"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestCurveChartAxes: a point's place follows its figures: the highest ops/s at the right
// end of the x axis, the highest p99 at the top of the y axis.
func TestCurveChartAxes(t *testing.T) {
	t.Parallel()
	c := curveChart{Lines: []curveLine{{Label: "a", Knee: -1, Steps: []CurveStep{{IOPS: 0, P99ms: 0}, {IOPS: 1000, P99ms: 10}}}}}
	var svg svgCurve
	if err := xml.Unmarshal(c.SVG(), &svg); err != nil {
		t.Fatal(err)
	}
	for _, p := range svg.Polylines {
		if p.Class != "p99" {
			continue
		}
		want := fmt.Sprintf("%d.0,%d.0 %d.0,%d.0", chartLeft, chartTop+chartHeight, chartLeft+curvePlotWidth, chartTop)
		if p.Points != want {
			t.Errorf("points %q, want %q", p.Points, want)
		}
	}
}

// TestCurvePacedAllSteps: a fleet pod's curve: the directory it names, Pace called after
// the layout and before every step, OnStep with each step, and every rate run although the
// first step is already past the knee.
func TestCurvePacedAllSteps(t *testing.T) {
	t.Parallel()
	h, f, r := newCurveRunner(t)
	var paced []int
	var got []CurveStep
	r.Exec = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if contains(args, "--create_only=1") && len(paced) > 0 {
			t.Error("files laid out after the first Pace")
		}
		if !contains(args, "--version") {
			if _, err := os.Stat(filepath.Join(h.mount, "bench-job-3")); err != nil {
				t.Errorf("fio runs without the named directory: %v", err)
			}
		}
		return f.exec(ctx, name, args...)
	}
	opts := CurveOptions{Mount: h.mount, Rates: []int{400, 1600, 6400, 400000}, Runtime: 2 * time.Second,
		LatencyBound: 100 * time.Microsecond, DirName: "bench-job-3", AllSteps: true,
		Pace: func(_ context.Context, step int) error {
			if len(paced) != len(got) {
				t.Errorf("Pace(%d) before OnStep of the step before", step)
			}
			paced = append(paced, step)
			return nil
		},
		OnStep: func(step int, run Run, s CurveStep) {
			if step != len(got) || run.LatP99ms != s.P99ms {
				t.Errorf("OnStep(%d, %+v, %+v)", step, run, s)
			}
			got = append(got, s)
		},
	}
	res, err := r.Curve(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(paced) != 4 || paced[3] != 3 || len(got) != 4 || len(res.Curve.Steps) != 4 {
		t.Fatalf("paced %v, steps reported %d, curve %d; want all 4 rates", paced, len(got), len(res.Curve.Steps))
	}
	if k := res.Curve.Knee; k == nil || k.Step != 0 || k.Rule != KneeLatencyBound {
		t.Errorf("knee = %+v, want step 0 by the latency bound", k)
	}
	if res.Provenance.Directory != filepath.Join(h.mount, "bench-job-3") {
		t.Errorf("directory %q", res.Provenance.Directory)
	}
	if _, err := os.Stat(res.Provenance.Directory); !os.IsNotExist(err) {
		t.Errorf("directory left behind: %v", err)
	}
	for _, bad := range []string{"..", "a/b", "."} {
		opts.DirName = bad
		if _, err := r.Curve(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "one path element") {
			t.Errorf("DirName %q: err %v, want refused", bad, err)
		}
	}
}

func TestCurveToolsProfileReadsOnly(t *testing.T) {
	t.Parallel()
	h, f, r := newCurveRunner(t)
	res, err := r.Curve(context.Background(), CurveOptions{Mount: h.mount, Profile: CurveToolsProfile,
		Rates: []int{400, 1600}, Runtime: 2 * time.Second, LatencyBound: DefaultLatencyBound})
	if err != nil {
		t.Fatal(err)
	}
	if res.Provenance.Profile != CurveToolsProfile || res.Runs[0].Job != CurveToolsProfile {
		t.Errorf("profile %q, run job %q; want %q", res.Provenance.Profile, res.Runs[0].Job, CurveToolsProfile)
	}
	if len(f.layout) != 1 || len(sections(f.layout[0])) != 2 {
		t.Fatalf("layout %v, want one command laying out both sections' files", f.layout)
	}
	for i, args := range f.steps {
		secs := sections(args)
		if len(secs) != 2 {
			t.Fatalf("step %d: %d sections, want stats and reads", i+1, len(secs))
		}
		// Four processes share the offered load; nothing is created or written, and the
		// reads keep the files' cached pages (fio's default drops them at every open).
		want := strconv.Itoa([]int{400, 1600}[i] / 4)
		for _, s := range secs {
			if s["rate_iops"] != want || s["rw"] != "read" || s["ioengine"] == "filecreate" {
				t.Errorf("step %d section %s: rate_iops %s rw %s engine %s, want %s reads", i+1, s["name"], s["rate_iops"], s["rw"], s["ioengine"], want)
			}
			if s["ioengine"] == "psync" && s["invalidate"] != "0" {
				t.Errorf("step %d section %s: invalidate %q, want 0", i+1, s["name"], s["invalidate"])
			}
		}
	}
}

func TestCurveRefusesUnknownProfile(t *testing.T) {
	t.Parallel()
	h, f, r := newCurveRunner(t)
	_, err := r.Curve(context.Background(), CurveOptions{Mount: h.mount, Profile: "seq-read", Rates: []int{400, 1600},
		Runtime: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "--profile") || len(f.steps) != 0 || len(f.layout) != 0 {
		t.Errorf("err %v, %d steps, %d layouts; want a --profile error before any fio run", err, len(f.steps), len(f.layout))
	}
}
