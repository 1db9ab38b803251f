package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func runs(job string, mibs ...float64) []Run {
	var rs []Run
	for i, v := range mibs {
		rs = append(rs, Run{Profile: "seq-read", Job: job, Repeat: i + 1, ReadMiBs: v, LatP99ms: 100 / v})
	}
	return rs
}

func TestNewSpread(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{5}, Spread{N: 1, Median: 5, Min: 5, Max: 5}},
		{[]float64{9, 1, 5}, Spread{N: 3, Median: 5, Min: 1, Max: 9}},
		{[]float64{4, 1, 3, 2}, Spread{N: 4, Median: 2.5, Min: 1, Max: 4}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, NewSpread(tt.in)); diff != "" {
			t.Errorf("NewSpread(%v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestCompareVerdicts(t *testing.T) {
	t.Parallel()
	a := &Result{Runs: append(append(runs("fast", 100, 110, 105), runs("noisy", 100, 140, 120)...), runs("single", 50)...)}
	b := &Result{Runs: append(append(runs("fast", 400, 420, 410), runs("noisy", 130, 90, 125)...), runs("single", 60)...)}
	b.Runs = append(b.Runs, runs("new-only", 1, 2)...)
	got := map[string]Comparison{}
	for _, c := range Compare(a, b) {
		got[c.Job+"/"+string(c.Metric)] = c
	}
	fast := got["fast/MiB/s"]
	if fast.Verdict != VerdictBetter || fast.ChangePct == nil || int(*fast.ChangePct) != 290 {
		t.Errorf("fast = %+v", fast)
	}
	// Latency fell (100/v): lower is better.
	if c := got["fast/p99 ms"]; c.Verdict != VerdictBetter || *c.ChangePct > -70 {
		t.Errorf("fast p99 = %+v", c)
	}
	// Medians 120 -> 125 but the ranges [100..140] and [90..130] overlap.
	noisy := got["noisy/MiB/s"]
	if noisy.Verdict != VerdictNoise || noisy.Change() != "within noise" {
		t.Errorf("noisy = %+v, change %q", noisy, noisy.Change())
	}
	if c := got["single/MiB/s"]; c.Verdict != VerdictTooFew || !strings.Contains(c.Change(), "+20.0%") {
		t.Errorf("single = %+v %q", c, c.Change())
	}
	if c := got["new-only/MiB/s"]; c.Verdict != VerdictMissingOne {
		t.Errorf("new-only = %+v", c)
	}
	var sb strings.Builder
	if err := WriteComparisonTable(&sb, Compare(a, b)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+290.5% (better)", "within noise", "120 [100..140]", "125 [90..130]"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, sb.String())
		}
	}
	if strings.Contains(sb.String(), "+4.2%") {
		t.Errorf("table shows a percentage for noise:\n%s", sb.String())
	}
}

func TestPrimaryMetricMetadata(t *testing.T) {
	t.Parallel()
	rs := []Run{{Job: "md-create", ReadIOPS: 4000}}
	if m := PrimaryMetric(rs); m != MetricIOPS {
		t.Errorf("metric = %s, want IOPS for a job without bytes", m)
	}
}

func TestTuningDescribe(t *testing.T) {
	t.Parallel()
	ra := 128
	tests := []struct {
		in   Tuning
		want string
	}{
		{Tuning{MountPoint: "/mnt/a", FSType: "nfs4", Server: "10.0.0.5", Export: "/tmp", ReadAheadKB: &ra, Version: "4.1", Connections: 1, RSize: 262144, WSize: 262144, Backend: "generic"},
			"/mnt/a (nfs4 10.0.0.5:/tmp) read_ahead_kb=128 vers=4.1 connections=1 rsize=262144 wsize=262144 backend=generic"},
		{Tuning{MountPoint: "/mnt/b", FSType: "nfs", Server: "s", Export: "/e", Version: "3", NConnect: 8, Connections: 8, RSize: 1 << 20, WSize: 1 << 20, Backend: "azure-netapp-files"},
			"/mnt/b (nfs s:/e) vers=3 nconnect=8 connections=8 rsize=1048576 wsize=1048576 backend=azure-netapp-files"},
		{Tuning{MountPoint: "/mnt/c", FSType: "nfs4", Server: "s", Export: "/e", Version: "4.2", Connections: 1, RSize: 1 << 20, WSize: 1 << 20, Backend: "generic", TransportSecurity: "tls"},
			"/mnt/c (nfs4 s:/e) vers=4.2 connections=1 rsize=1048576 wsize=1048576 backend=generic xprtsec=tls"},
		{Tuning{MountPoint: "/mnt/d", FSType: "nfs4", Server: "s", Export: "/e", Version: "4.2", Connections: 1, RSize: 1 << 20, WSize: 1 << 20, Backend: "generic", TransportSecurity: "none"},
			"/mnt/d (nfs4 s:/e) vers=4.2 connections=1 rsize=1048576 wsize=1048576 backend=generic"},
		{Tuning{MountPoint: "/", FSType: "ext4", ReadAheadKB: &ra}, "/ (ext4) read_ahead_kb=128"},
	}
	for _, tt := range tests {
		if got := tt.in.Describe(); got != tt.want {
			t.Errorf("Describe() = %q\nwant %q", got, tt.want)
		}
	}
}

// A result file is user input: job names, the mount point and provenance must not forge
// table lines or put control bytes on the terminal.
func TestTablesEscapeResultText(t *testing.T) {
	t.Parallel()
	evil := "x\nforged line\x1b[2J"
	a := &Result{Runs: runs(evil, 100, 110), Tuning: &Tuning{MountPoint: evil, FSType: "nfs4"}, Provenance: Provenance{Kernel: evil}}
	var sb strings.Builder
	if err := WriteRunTable(&sb, a); err != nil {
		t.Fatal(err)
	}
	if err := WriteComparisonTable(&sb, Compare(a, a)); err != nil {
		t.Fatal(err)
	}
	if out := sb.String(); strings.Contains(out, "\nforged line") || strings.Contains(out, "\x1b") {
		t.Errorf("result text printed raw:\n%q", out)
	}
}
