package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// barChart is a grouped bar chart: one group per job, one bar per series (result file and
// variant), each bar the median with a whisker from min to max.
type barChart struct {
	Title  string
	YLabel string
	Groups []string
	Series []string
	// Values[g][s] is series s of group g; N == 0 when the series lacks that job.
	Values [][]Spread
	// Limit draws a dashed line (e.g. the NIC's throughput); 0 for none.
	Limit      float64
	LimitLabel string
}

// palette is colour-blind safe (Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

const (
	chartLeft   = 70
	chartRight  = 20
	chartTop    = 40
	chartHeight = 260
	barWidth    = 18
	groupGap    = 28
)

// SVG renders the chart as a standalone SVG document.
func (c barChart) SVG() []byte {
	nSeries := max(len(c.Series), 1)
	groupWidth := nSeries*barWidth + groupGap
	plotWidth := max(len(c.Groups)*groupWidth, 360)
	if n := len(c.Groups); n > 0 {
		groupWidth = plotWidth / n // spread few groups over the whole width
	}
	longestSeries := 0
	for _, s := range c.Series {
		longestSeries = max(longestSeries, len(s))
	}
	legendCols := max(1, min(3, plotWidth/(longestSeries*7+28)))
	legendRows := (len(c.Series) + legendCols - 1) / legendCols
	longest := 0
	for _, g := range c.Groups {
		longest = max(longest, len(g))
	}
	// Group labels are turned 30 degrees: their drop is half their length.
	labelDrop := 24 + longest*3
	width := chartLeft + plotWidth + chartRight
	height := chartTop + chartHeight + labelDrop + 24 + legendRows*18

	top := c.Limit
	for _, g := range c.Values {
		for _, v := range g {
			if v.N > 0 {
				top = math.Max(top, v.Max)
			}
		}
	}
	step, yMax := niceScale(top)
	y := func(v float64) float64 { return chartTop + chartHeight - v/yMax*chartHeight }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", chartLeft, esc(c.Title))
	// Grid and y axis labels.
	for v := 0.0; v <= yMax*1.0001; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", chartLeft, chartLeft+plotWidth, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", chartLeft-6, y(v)+4, formatNum(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", chartTop+chartHeight/2, esc(c.YLabel))
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333333"/>`+"\n", chartLeft, chartLeft+plotWidth, chartTop+chartHeight, chartTop+chartHeight)
	// Bars.
	for gi, g := range c.Groups {
		x0 := chartLeft + gi*groupWidth + (groupWidth-nSeries*barWidth)/2
		for si := range c.Series {
			if gi >= len(c.Values) || si >= len(c.Values[gi]) || c.Values[gi][si].N == 0 {
				continue
			}
			v := c.Values[gi][si]
			x := x0 + si*barWidth
			col := palette[si%len(palette)]
			fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
				x+1, y(v.Median), barWidth-2, y(0)-y(v.Median), col, esc(c.Series[si]), esc(v.String()))
			if v.N > 1 && v.Max > v.Min {
				cx := float64(x) + barWidth/2
				fmt.Fprintf(&b, `<path d="M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f" stroke="#222222" fill="none"/>`+"\n",
					cx, y(v.Min), y(v.Max), cx-4, y(v.Min), cx+4, cx-4, y(v.Max), cx+4)
			}
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" transform="rotate(-30 %d %d)">%s</text>`+"\n",
			x0+nSeries*barWidth/2, chartTop+chartHeight+16, x0+nSeries*barWidth/2, chartTop+chartHeight+16, esc(g))
	}
	if c.Limit > 0 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#D55E00" stroke-dasharray="6 4"/>`+"\n", chartLeft, chartLeft+plotWidth, y(c.Limit), y(c.Limit))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#D55E00">%s</text>`+"\n", chartLeft+4, y(c.Limit)-4, esc(c.LimitLabel))
	}
	// Legend.
	ly := chartTop + chartHeight + labelDrop + 12
	for si, s := range c.Series {
		lx := chartLeft + (si%legendCols)*(plotWidth/legendCols)
		yy := ly + (si/legendCols)*18
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, yy-10, palette[si%len(palette)], lx+16, yy, esc(s))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceScale picks a tick step of 1, 2 or 5 times a power of ten giving about five ticks,
// and the axis maximum as a whole number of steps at or above top.
func niceScale(top float64) (step, yMax float64) {
	if top <= 0 || math.IsNaN(top) || math.IsInf(top, 0) {
		return 1, 5
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch r := raw / mag; {
	case r <= 1:
		step = mag
	case r <= 2:
		step = 2 * mag
	case r <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	yMax = math.Ceil(top/step-1e-9) * step
	// Round away float noise such as 0.30000000000000004.
	yMax, _ = strconv.ParseFloat(strconv.FormatFloat(yMax, 'g', 12, 64), 64)
	return step, yMax
}

func esc(s string) string { return html.EscapeString(s) }

// curveLine is one tuning's load curve: its steps in order, and which is the knee (-1 for
// none).
type curveLine struct {
	Label string
	Steps []CurveStep
	Knee  int
}

// curveChart draws response time (y) against achieved operations per second (x), one line
// per result: the p99 as a solid line with a point per step, the p50 dashed in the same
// colour, and the knee ringed.
type curveChart struct {
	Title  string
	Lines  []curveLine
	XLabel string
	YLabel string
	// Bound draws the latency bound as a dashed line when it lies within the plotted
	// range; 0 for none.
	Bound float64
}

const curvePlotWidth = 560

// SVG renders the chart as a standalone SVG document.
func (c curveChart) SVG() []byte {
	var xTop, yTop float64
	for _, l := range c.Lines {
		for _, s := range l.Steps {
			xTop = math.Max(xTop, s.IOPS)
			yTop = math.Max(yTop, s.P99ms)
		}
	}
	// The bound is drawn only when it is near the data; far above it would flatten
	// every line against the axis.
	showBound := c.Bound > 0 && c.Bound <= 2*yTop
	if showBound {
		yTop = math.Max(yTop, c.Bound)
	}
	xStep, xMax := niceScale(xTop)
	yStep, yMax := niceScale(yTop)
	x := func(v float64) float64 { return chartLeft + v/xMax*curvePlotWidth }
	y := func(v float64) float64 { return chartTop + chartHeight - v/yMax*chartHeight }
	width := chartLeft + curvePlotWidth + chartRight
	height := chartTop + chartHeight + 44 + len(c.Lines)*18

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", chartLeft, esc(c.Title))
	for v := 0.0; v <= yMax*1.0001; v += yStep {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", chartLeft, chartLeft+curvePlotWidth, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", chartLeft-6, y(v)+4, formatNum(v))
	}
	for v := 0.0; v <= xMax*1.0001; v += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#dddddd"/>`+"\n", x(v), x(v), chartTop, chartTop+chartHeight)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), chartTop+chartHeight+14, formatNum(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", chartTop+chartHeight/2, esc(c.YLabel))
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", chartLeft+curvePlotWidth/2, chartTop+chartHeight+30, esc(c.XLabel))
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333333"/>`+"\n", chartLeft, chartLeft+curvePlotWidth, chartTop+chartHeight, chartTop+chartHeight)
	if showBound {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#D55E00" stroke-dasharray="6 4"/>`+"\n", chartLeft, chartLeft+curvePlotWidth, y(c.Bound), y(c.Bound))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#D55E00">p99 bound %s ms</text>`+"\n", chartLeft+4, y(c.Bound)-4, formatNum(c.Bound))
	}
	for li, l := range c.Lines {
		col := palette[li%len(palette)]
		var p50, p99 bytes.Buffer
		for si, s := range l.Steps {
			sep := " "
			if si == 0 {
				sep = ""
			}
			fmt.Fprintf(&p50, "%s%.1f,%.1f", sep, x(s.IOPS), y(s.P50ms))
			fmt.Fprintf(&p99, "%s%.1f,%.1f", sep, x(s.IOPS), y(s.P99ms))
		}
		fmt.Fprintf(&b, `<polyline class="p50" points="%s" fill="none" stroke="%s" stroke-dasharray="4 3"/>`+"\n", p50.String(), col)
		fmt.Fprintf(&b, `<polyline class="p99" points="%s" fill="none" stroke="%s" stroke-width="2"><title>%s</title></polyline>`+"\n", p99.String(), col, esc(l.Label))
		for si, s := range l.Steps {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s ops/s offered, %s achieved, p50 %s ms, p99 %s ms</title></circle>`+"\n",
				x(s.IOPS), y(s.P99ms), col, esc(l.Label), formatNum(s.OfferedIOPS), formatNum(s.IOPS), formatNum(s.P50ms), formatNum(s.P99ms))
			if si == l.Knee {
				fmt.Fprintf(&b, `<circle class="knee" cx="%.1f" cy="%.1f" r="7" fill="none" stroke="%s" stroke-width="2"/>`+"\n", x(s.IOPS), y(s.P99ms), col)
			}
		}
	}
	ly := chartTop + chartHeight + 50
	for li, l := range c.Lines {
		yy := ly + li*18
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", chartLeft, yy-10, palette[li%len(palette)], chartLeft+16, yy, esc(l.Label))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
