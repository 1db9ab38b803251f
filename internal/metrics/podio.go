package metrics

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nfstune/nfstune/internal/podio"
)

// The per-pod NFS I/O series (podio): one set per pod and superblock that had traffic
// since the collector was loaded, labelled pod_uid and device (join nfstune_mount_info on
// device for the mount's other labels); the node's own I/O (tasks in no pod) has an empty
// pod_uid. The default tier exports PodSeriesDefault series per pair, the full tier
// PodSeriesFull; pairs are exported busiest first (READ payload, then bytes read), within
// what the series cap leaves after the mounts, and at most MaxPodPairs.
const (
	PodSeriesDefault = 6
	PodSeriesFull    = PodSeriesDefault + 2*(podio.LatencyBuckets+2) // a histogram per operation: its buckets with +Inf, sum and count
	MaxPodPairs      = 2000
)

var (
	podIOLabels       = []string{"pod_uid", "device"}
	podIOSourceLabels = []string{"pod_uid", "device", "source"}
	podIOOpLabels     = []string{"pod_uid", "device", "operation"}
)

// podIODescs are the per-pod NFS I/O series' descriptions.
type podIODescs struct {
	readBytes, writeBytes, majorFaults, latency *prometheus.Desc
	part, dropped                               *prometheus.Desc
}

func newPodIODescs() podIODescs {
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "pod", name), help, labels, nil)
	}
	return podIODescs{
		readBytes:   d("read_bytes_total", "NFS bytes a pod read on the superblock, from the per-pod collector (agent --pod-io): application (read(2) and friends), server (READ payload of the READs started in the pod: its read-ahead and faults included) and fault (the part of server started by page faults: reads through mmap).", podIOSourceLabels),
		writeBytes:  d("write_bytes_total", "NFS bytes a pod wrote on the superblock: application (write(2) and friends) and server (WRITE payload of the WRITEs started in the pod; writeback by the kernel's flusher threads counts for the node, pod_uid empty).", podIOSourceLabels),
		majorFaults: d("major_faults_total", "Page faults on the superblock's files that had to read the page in, in the pod.", podIOLabels),
		latency:     d("rpc_duration_seconds", "Time from the start of a READ or WRITE in the pod to its reply (full tier).", podIOOpLabels),
		part: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "pod_io", "collector_part"),
			"1 when a part of the per-pod NFS I/O collector runs, 0 when it could not load on this kernel (file_io, faults, rpc; docs/kernels.md). Exported only with --pod-io.",
			[]string{"part"}, nil),
		dropped: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "pod_io", "dropped_events_total"),
			"Events the per-pod collector could not count because its table was full: the per-pod figures are low by that many events.",
			nil, nil),
	}
}

// collectPodIO sends the per-pod series within budget and returns the series it left out.
func (c *Collector) collectPodIO(ch chan<- prometheus.Metric, snap *podio.Snapshot, budget int) (dropped int) {
	if snap == nil {
		return 0
	}
	d := c.podIO
	for _, part := range podio.Parts {
		v := 0.0
		if snap.Loaded && snap.Missing[part] == "" {
			v = 1
		}
		ch <- constMetric(d.part, prometheus.GaugeValue, v, string(part))
	}
	if !snap.Loaded {
		return 0
	}
	ch <- constMetric(d.dropped, prometheus.CounterValue, float64(snap.Dropped))
	per := PodSeriesDefault
	if c.tier == TierFull {
		per = PodSeriesFull
	}
	pods := slices.SortedFunc(slices.Values(snap.Pods), func(a, b podio.PodIO) int {
		return cmp.Or(cmp.Compare(b.ServerReadBytes, a.ServerReadBytes), cmp.Compare(b.ReadBytes, a.ReadBytes),
			cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Device, b.Device))
	})
	for i, p := range pods {
		if i >= MaxPodPairs || budget < per {
			dropped += per
			continue
		}
		budget -= per
		ch <- constMetric(d.readBytes, prometheus.CounterValue, float64(p.ReadBytes), p.PodUID, p.Device, "application")
		ch <- constMetric(d.readBytes, prometheus.CounterValue, float64(p.ServerReadBytes), p.PodUID, p.Device, "server")
		ch <- constMetric(d.readBytes, prometheus.CounterValue, float64(p.FaultReadBytes), p.PodUID, p.Device, "fault")
		ch <- constMetric(d.writeBytes, prometheus.CounterValue, float64(p.WriteBytes), p.PodUID, p.Device, "application")
		ch <- constMetric(d.writeBytes, prometheus.CounterValue, float64(p.ServerWriteBytes), p.PodUID, p.Device, "server")
		ch <- constMetric(d.majorFaults, prometheus.CounterValue, float64(p.MajorFaults), p.PodUID, p.Device)
		if c.tier == TierFull {
			ch <- histogram(d.latency, p.ReadLatency, p.PodUID, p.Device, "read")
			ch <- histogram(d.latency, p.WriteLatency, p.PodUID, p.Device, "write")
		}
	}
	return dropped
}

// histogram turns the collector's buckets (counts per bucket) into a Prometheus histogram
// (cumulative counts per upper bound).
func histogram(d *prometheus.Desc, h podio.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(podio.LatencyBounds))
	var n uint64
	for i, le := range podio.LatencyBounds {
		n += h.Buckets[i]
		buckets[le] = n
	}
	m, err := prometheus.NewConstHistogram(d, h.Count(), h.SumSeconds, buckets, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}
