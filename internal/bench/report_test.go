package bench

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nfstune/nfstune/internal/golden"
)

func loadInputs(t *testing.T) []ReportInput {
	t.Helper()
	var in []ReportInput
	// Both results were recorded with nfstune bench run on a local directory.
	for _, f := range []string{"rand-local", "seqread-local"} {
		r, err := ReadResult(filepath.Join("testdata", "results", f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, ReportInput{Label: f, Result: r})
	}
	return in
}

func TestReportGolden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := WriteReport(dir, loadInputs(t), ReportOptions{Format: "md", LimitMiBs: 1192.09, LimitLabel: "the NIC (10Gbps = 1192 MiB/s)"})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Errorf("files = %v", files)
	}
	for _, name := range []string{"report.md", ChartThroughput, ChartIOPS, ChartLatency} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "report", name), b)
		if strings.HasSuffix(name, ".svg") {
			if err := xml.Unmarshal(b, new(struct{})); err != nil {
				t.Errorf("%s is not well-formed XML: %v", name, err)
			}
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	// randwrite-64k: median of 1891 and 1927 MiB/s against 1192 MiB/s -> 160%.
	for _, want := range []string{"| randwrite-64k | rand-local | 1909 [1891..1927] | 160% |", "![Throughput per job](throughput.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestReportHTMLEscapes(t *testing.T) {
	t.Parallel()
	in := loadInputs(t)[:1]
	in[0].Label = `<script>alert(1)</script>`
	dir := t.TempDir()
	if _, err := WriteReport(dir, in, ReportOptions{Format: "html"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"report.html", ChartThroughput} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("<script>")) || !bytes.Contains(b, []byte("&lt;script&gt;")) {
			t.Errorf("%s does not escape the label", name)
		}
	}
	if _, err := WriteReport(dir, in, ReportOptions{Format: "pdf"}); err == nil {
		t.Error("pdf format accepted")
	}
}

func TestNiceScale(t *testing.T) {
	t.Parallel()
	tests := []struct{ top, step, max float64 }{
		{2140, 500, 2500},
		{0.3, 0.1, 0.3},
		{100, 20, 100},
		{0, 1, 5},
		{7, 2, 8},
	}
	for _, tt := range tests {
		step, m := niceScale(tt.top)
		if step != tt.step || m != tt.max {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", tt.top, step, m, tt.step, tt.max)
		}
	}
}
