package metrics

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/nfstune/nfstune/internal/podio"
)

const (
	podA = "7b1c2d3e-0000-4000-8000-00000000000a"
	podB = "7b1c2d3e-0000-4000-8000-00000000000b"
)

func podIOSnapshot(t *testing.T) Snapshot {
	snap := twoMounts(t)
	snap.PodIO = &podio.Snapshot{Loaded: true, Missing: map[podio.Part]string{podio.PartFaults: "no trampolines"}, Dropped: 3, Pods: []podio.PodIO{
		{PodUID: podA, Device: "0:52", Counters: podio.Counters{ReadBytes: 64 << 20, ServerReadBytes: 64 << 20,
			ReadLatency: podio.Histogram{Buckets: [podio.LatencyBuckets]uint64{1, 2, 0, 0, 0, 0, 4}, SumSeconds: 1.5}}},
		{PodUID: podB, Device: "0:52", Counters: podio.Counters{ServerReadBytes: 128 << 20, FaultReadBytes: 128 << 20, MajorFaults: 1920}},
		{PodUID: "", Device: "0:53", Counters: podio.Counters{WriteBytes: 5, ServerWriteBytes: 4096}},
	}}
	return snap
}

// TestPodIOSeries checks the per-pod series of both tiers: values, the node's series
// without a pod_uid, the histogram's cumulative buckets, and the parts' gauges.
func TestPodIOSeries(t *testing.T) {
	t.Parallel()
	snap := podIOSnapshot(t)
	def, err := exposition(t, newTestCollector(snap, nil, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`nfstune_pod_read_bytes_total{device="0:52",pod_uid="` + podA + `",source="application"} 6.7108864e+07`,
		`nfstune_pod_read_bytes_total{device="0:52",pod_uid="` + podB + `",source="fault"} 1.34217728e+08`,
		`nfstune_pod_major_faults_total{device="0:52",pod_uid="` + podB + `"} 1920`,
		`nfstune_pod_write_bytes_total{device="0:53",pod_uid="",source="server"} 4096`,
		`nfstune_pod_io_collector_part{part="faults"} 0`,
		`nfstune_pod_io_collector_part{part="rpc"} 1`,
		`nfstune_pod_io_dropped_events_total 3`,
	} {
		if !strings.Contains(string(def), want+"\n") {
			t.Errorf("default tier: no %s", want)
		}
	}
	if n := strings.Count(string(def), "\nnfstune_pod_") - strings.Count(string(def), "\nnfstune_pod_io_"); n != 3*PodSeriesDefault {
		t.Errorf("default tier: %d nfstune_pod_ series, want %d", n, 3*PodSeriesDefault)
	}
	if strings.Contains(string(def), "rpc_duration") {
		t.Error("default tier exports the latency histograms")
	}
	full, err := exposition(t, newTestCollector(snap, nil, Options{Tier: TierFull}))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`nfstune_pod_rpc_duration_seconds_bucket{device="0:52",operation="read",pod_uid="` + podA + `",le="0.001"} 1`,
		`nfstune_pod_rpc_duration_seconds_bucket{device="0:52",operation="read",pod_uid="` + podA + `",le="0.0025"} 3`,
		`nfstune_pod_rpc_duration_seconds_bucket{device="0:52",operation="read",pod_uid="` + podA + `",le="0.1"} 3`,
		`nfstune_pod_rpc_duration_seconds_bucket{device="0:52",operation="read",pod_uid="` + podA + `",le="+Inf"} 7`,
		`nfstune_pod_rpc_duration_seconds_sum{device="0:52",operation="read",pod_uid="` + podA + `"} 1.5`,
	} {
		if !strings.Contains(string(full), want+"\n") {
			t.Errorf("full tier: no %s", want)
		}
	}
	if n := strings.Count(string(full), "\nnfstune_pod_") - strings.Count(string(full), "\nnfstune_pod_io_"); n != 3*PodSeriesFull {
		t.Errorf("full tier: %d nfstune_pod_ series, want %d", n, 3*PodSeriesFull)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(full)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, b)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newTestCollector(snap, nil, Options{Tier: TierFull}))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestPodIOSeriesCap gives the cap room for the mounts and one pod pair: the busiest pair
// (by READ payload) is exported, the others are counted in nfstune_scrape_series_dropped.
func TestPodIOSeriesCap(t *testing.T) {
	t.Parallel()
	snap := podIOSnapshot(t)
	mounts, err := exposition(t, newTestCollector(twoMounts(t), nil, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	mountSeries := strings.Count(string(mounts), "\nnfstune_mount_") + strings.Count(string(mounts), "\nnfstune_client_group_") + strings.Count(string(mounts), "\nnfstune_server_")
	out, err := exposition(t, newTestCollector(snap, nil, Options{MaxSeries: mountSeries + PodSeriesDefault}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `pod_uid="`+podB+`"`) {
		t.Error("the busiest pod pair was left out")
	}
	if strings.Contains(string(out), `pod_uid="`+podA+`"`) {
		t.Error("a pair past the cap was exported")
	}
	if want := "nfstune_scrape_series_dropped 12\n"; !strings.Contains(string(out), want) {
		t.Errorf("no %q in:\n%s", want, grepLines(string(out), "series_dropped"))
	}
}

// TestPodIOOff: without --pod-io no per-pod series at all; loaded nowhere, the parts' gauges say 0.
func TestPodIOOff(t *testing.T) {
	t.Parallel()
	out, err := exposition(t, newTestCollector(twoMounts(t), nil, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "nfstune_pod_") {
		t.Error("per-pod series without the collector")
	}
	snap := twoMounts(t)
	snap.PodIO = &podio.Snapshot{Why: "the kernel has no BTF"}
	out, err = exposition(t, newTestCollector(snap, nil, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(out), "nfstune_pod_io_collector_part{"); got != len(podio.Parts) || !strings.Contains(string(out), `nfstune_pod_io_collector_part{part="file_io"} 0`) {
		t.Errorf("collector not loaded: %d part gauges:\n%s", got, grepLines(string(out), "nfstune_pod"))
	}
}

// exposition is the whole text exposition of c. (testutil.CollectAndFormat without metric
// names returns nothing since client_golang 1.23.)
func exposition(t *testing.T, c prometheus.Collector) ([]byte, error) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	if b.Len() == 0 {
		t.Fatal("empty exposition")
	}
	return b.Bytes(), nil
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
