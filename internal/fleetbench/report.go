package fleetbench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/display"
)

// Report is one fleet load curve.
type Report struct {
	Job       string   `json:"job"`
	Namespace string   `json:"namespace"`
	Image     string   `json:"image"`
	Pods      int      `json:"pods"`
	Volumes   []string `json:"volumes"`
	Dir       string   `json:"dir"`
	// Profile is the curve's operation mix.
	Profile string `json:"profile"`
	// RatesPerPod are the offered loads of each pod, step by step.
	RatesPerPod    []int     `json:"rates_per_pod"`
	LatencyBoundms float64   `json:"latency_bound_ms"`
	Start          time.Time `json:"start,omitzero"`
	Steps          []Step    `json:"steps"`
	// Knee is judged on the steps' totals, with the slowest pod's p99.
	Knee *bench.Knee `json:"knee,omitempty"`
	// Tuning is each pod's mount at its first step, as the pod read it itself: mount
	// options and mountstats from its mount namespace, read_ahead_kb from
	// /sys/class/bdi/<major:minor>/read_ahead_kb.
	Tuning      []PodTuning `json:"tuning"`
	Interrupted bool        `json:"interrupted,omitempty"`
}

// Step is one step's figures over every pod.
type Step struct {
	Step int `json:"step"`
	// OfferedOpsS and OpsS are the sums of the pods' offered and achieved ops/s.
	OfferedOpsS float64 `json:"offered_ops_s"`
	OpsS        float64 `json:"ops_s"`
	// P50ms is the pods' median p50; P99ms the slowest pod's p99 (percentiles of
	// different pods cannot be added up).
	P50ms   float64  `json:"lat_p50_ms"`
	P99ms   float64  `json:"lat_p99_ms"`
	Spread  Spread   `json:"pod_spread"`
	Volumes []Group  `json:"volumes"`
	Nodes   []Group  `json:"nodes"`
	Pods    []PodRun `json:"pods"`
}

// Spread is the pods' achieved ops/s.
type Spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// Group is the pods of one volume or one node in a step.
type Group struct {
	Name string  `json:"name"`
	Pods int     `json:"pods"`
	OpsS float64 `json:"ops_s"`
}

// PodRun is one pod's step.
type PodRun struct {
	Index  int    `json:"index"`
	Pod    string `json:"pod"`
	Node   string `json:"node"`
	Volume string `json:"volume"`
	bench.CurveStep
}

// PodTuning is one pod's mount.
type PodTuning struct {
	Index  int           `json:"index"`
	Pod    string        `json:"pod"`
	Node   string        `json:"node"`
	Volume string        `json:"volume"`
	Dir    string        `json:"dir"`
	Tuning *bench.Tuning `json:"tuning"`
}

func newReport(o *Options) *Report {
	return &Report{Job: o.Name, Namespace: o.Namespace, Image: o.Image, Pods: o.Pods, Volumes: o.PVCs, Dir: o.Dir, Profile: o.Profile,
		RatesPerPod: o.Rates, LatencyBoundms: float64(o.LatencyBound) / float64(time.Millisecond), Steps: []Step{}, Tuning: []PodTuning{}}
}

// add appends a step, takes the pods' tuning from the first, and judges the knee on the
// totals.
func (r *Report) add(s Step) {
	r.Steps = append(r.Steps, s)
	if len(r.Steps) == 1 {
		for _, p := range s.Pods {
			r.Tuning = append(r.Tuning, PodTuning{Index: p.Index, Pod: p.Pod, Node: p.Node, Volume: p.Volume})
		}
	}
	curve := make([]bench.CurveStep, len(r.Steps))
	for i, st := range r.Steps {
		curve[i] = bench.CurveStep{OfferedIOPS: st.OfferedOpsS, IOPS: st.OpsS, P50ms: st.P50ms, P99ms: st.P99ms}
	}
	r.Knee = bench.FindKnee(curve, r.LatencyBoundms)
}

// aggregate adds up one step's pod lines: the totals are the sums of the pods' own
// figures, nothing else.
func aggregate(step int, lines []bench.FleetLine) Step {
	slices.SortFunc(lines, func(a, b bench.FleetLine) int { return cmp.Compare(a.Index, b.Index) })
	s := Step{Step: step, Pods: []PodRun{}}
	var ops, p50s []float64
	vols, nodes := map[string]*Group{}, map[string]*Group{}
	for _, l := range lines {
		if l.Result == nil {
			continue
		}
		res := *l.Result
		s.Pods = append(s.Pods, PodRun{Index: l.Index, Pod: l.Pod, Node: l.Node, Volume: l.Volume, CurveStep: res})
		s.OfferedOpsS += res.OfferedIOPS
		s.OpsS += res.IOPS
		s.P99ms = math.Max(s.P99ms, res.P99ms)
		ops = append(ops, res.IOPS)
		p50s = append(p50s, res.P50ms)
		for _, g := range []struct {
			m    map[string]*Group
			name string
		}{{vols, l.Volume}, {nodes, l.Node}} {
			if g.m[g.name] == nil {
				g.m[g.name] = &Group{Name: g.name}
			}
			g.m[g.name].Pods++
			g.m[g.name].OpsS += res.IOPS
		}
	}
	s.OpsS = round1(s.OpsS)
	s.P50ms = median(p50s)
	if len(ops) > 0 {
		s.Spread = Spread{Min: slices.Min(ops), Median: median(ops), Max: slices.Max(ops)}
	}
	s.Volumes, s.Nodes = groups(vols), groups(nodes)
	return s
}

// withTuning records each pod's tuning from its first step's line.
func (r *Report) withTuning(lines map[int][]bench.FleetLine) {
	for i, t := range r.Tuning {
		for _, l := range lines[t.Index] {
			if l.Event == bench.FleetStep && l.Tuning != nil {
				r.Tuning[i].Tuning, r.Tuning[i].Dir = l.Tuning, l.Dir
				break
			}
		}
	}
}

func groups(m map[string]*Group) []Group {
	out := make([]Group, 0, len(m))
	for _, g := range m {
		g.OpsS = round1(g.OpsS)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return round1((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// WriteTable prints the curve's totals and spread per step, the ops/s per volume and per
// node, each pod's read-ahead and the knee.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "Job %s/%s: %d pods on %s, each in %s/%s-<index>, profile %s\n\n", r.Namespace, r.Job, r.Pods, strings.Join(r.Volumes, ", "), r.Dir, r.Job, display.Text(r.Profile))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tOFFERED OPS/S\tACHIEVED OPS/S\tPOD MIN\tPOD MEDIAN\tPOD MAX\tP50 ms (median)\tP99 ms (max)\t")
	for i, s := range r.Steps {
		mark := ""
		if r.Knee != nil && r.Knee.Step == i {
			mark = "knee: " + string(r.Knee.Rule)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Step, num(s.OfferedOpsS), num(s.OpsS),
			num(s.Spread.Min), num(s.Spread.Median), num(s.Spread.Max), num(s.P50ms), num(s.P99ms), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tBY\tNAME\tPODS\tOPS/S\tOPS/S PER POD")
	for _, s := range r.Steps {
		for _, g := range []struct {
			by string
			gs []Group
		}{{"volume", s.Volumes}, {"node", s.Nodes}} {
			for _, x := range g.gs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", s.Step, g.by, display.Text(x.Name), x.Pods, num(x.OpsS), num(round1(x.OpsS/float64(x.Pods))))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tPOD\tNODE\tVOLUME\tREAD-AHEAD\tMOUNT")
	for _, t := range r.Tuning {
		ra, mount := "-", "-"
		if t.Tuning != nil {
			if t.Tuning.ReadAheadKB != nil {
				ra = strconv.Itoa(*t.Tuning.ReadAheadKB) + " KiB"
			}
			mount = t.Tuning.Describe()
		}
		// The mount options and names come from the pods' logs: escaped for the terminal.
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.Index, display.Text(t.Pod), display.Text(t.Node), display.Text(t.Volume), ra, display.Text(mount))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nread-ahead as each pod read it from /sys/class/bdi of its mount\n%s\n", kneeSentence(r))
	return err
}

func kneeSentence(r *Report) string {
	switch {
	case len(r.Steps) == 0:
		return "no steps"
	case r.Knee != nil:
		k := r.Knee
		return fmt.Sprintf("knee at step %d: %s ops/s in all at a slowest p99 of %s ms (%s)", k.Step+1, num(k.IOPS), num(k.P99ms), k.Rule)
	}
	last := r.Steps[len(r.Steps)-1]
	s := fmt.Sprintf("no knee up to %s ops/s in all at a slowest p99 of %s ms", num(last.OpsS), num(last.P99ms))
	if r.Interrupted {
		s += " (interrupted)"
	}
	return s
}
