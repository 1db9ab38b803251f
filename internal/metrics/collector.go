// Package metrics exports the NFS client state nfstune knows as Prometheus metrics. Its
// Collector turns the latest inventory (mountinfo, mountstats, bdi; see package inventory)
// and audit findings into constant metrics at scrape time, so mounts that come and go never
// register or unregister anything.
//
// Per-superblock series carry the bounded labels device, mountpoint (the first one), server,
// export, version and backend; Options.Tier chooses how many (a bounded set, or every
// counter of every NFS operation in use), and nfstune_mount_pod_info names the pods using
// a superblock from kubelet's mount paths (package kubelet). Transport (xprt) counters
// belong to a kernel NFS client that every mount of the same server and version shares, so
// they are exported once per client group and never summed over mounts; see
// https://www.kernel.org/doc/html/latest/filesystems/nfs/index.html and
// net/sunrpc/stats.c:rpc_clnt_show_stats.
//
// The same counters give nfsiostat-style rates between two inventories (Rates), which
// WatchStats reports once per interval and WriteStatsTable prints for nfstune stats.
package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/readahead"
)

// Namespace prefixes every nfstune metric.
const Namespace = "nfstune"

// ErrNoData is returned by a Source when the host has nothing to report (no NFS client
// support loaded); the scrape still succeeds with no per-mount series.
var ErrNoData = errors.New("no NFS data")

// Finding is one audit finding, reduced to what the compliance metric needs.
type Finding struct {
	Device   string
	Rule     string
	Severity string
}

// ServiceLimit is the throughput limit of the provisioned service behind a server's export,
// as the policy names it and the planner's model gives it, for one direction.
type ServiceLimit struct {
	Server, Export string
	Service, Tier  string
	// Access is "read" or "write".
	Access         string
	BytesPerSecond float64
}

// Snapshot is what one scrape exports.
type Snapshot struct {
	Inventory *inventory.Inventory
	Findings  []Finding
	// Limits are exported once per label set, however many mounts reach the export.
	Limits []ServiceLimit
	// ReadAheadVerdicts are the last verdicts on the agent's read-ahead changes, by device
	// (readahead.Judge).
	ReadAheadVerdicts map[string]readahead.Verdict
	// ReadAheadTargets are the adaptive read-ahead controllers' targets in KiB, by device
	// (the value in force, or in observe mode the one it would set).
	ReadAheadTargets map[string]int
	// TrafficClasses are the classes of each mount's read traffic, and its pods', over the
	// agent's last interval, by device (readahead.Classify).
	TrafficClasses map[string]readahead.Classification
	// PodIO is the per-pod NFS I/O collector's reading (agent --pod-io); nil when it is off.
	PodIO *podio.Snapshot
}

// Source returns the state to export. It must read only /proc and /sys (never a mount
// point) so that a scrape cannot block on a dead server.
type Source func(ctx context.Context) (Snapshot, error)

// mountLabels are the labels of every per-superblock series, in this order.
var mountLabels = []string{"device", "mountpoint", "server", "export", "version", "backend"}

// The labels some mount series add to mountLabels.
var (
	infoLabels     = []string{"fstype", "client_group", "mountpoints", "proxy", "upstream", "xprtsec"}
	podLabels      = []string{"pod_uid", "volume", "pv", "driver"}
	findingLabels  = []string{"rule", "severity"}
	verdictLabel   = []string{"verdict"}
	classLabel     = []string{"class"}
	podClassLabels = []string{"pod_uid", "class"}
	sourceLabel    = []string{"source"}
	operationLabel = []string{"operation"}
	eventLabel     = []string{"event"}
)

// Events are the event label's values: the 27 counters of mountstats' events: line
// (fs/nfs/iostat.h, enum nfs_stat_eventcounters), named as node_exporter names its
// node_nfs_event_*_total series, sorted by name (the exposition's order). A fixed set, so
// the label is bounded.
var Events = []struct {
	Name  string
	Value func(procfs.NFSEventsStats) uint64
}{
	{"attribute_invalidate", func(e procfs.NFSEventsStats) uint64 { return e.AttributeInvalidate }},
	{"congestion_wait", func(e procfs.NFSEventsStats) uint64 { return e.CongestionWait }},
	{"data_invalidate", func(e procfs.NFSEventsStats) uint64 { return e.DataInvalidate }},
	{"dnode_revalidate", func(e procfs.NFSEventsStats) uint64 { return e.DnodeRevalidate }},
	{"inode_revalidate", func(e procfs.NFSEventsStats) uint64 { return e.InodeRevalidate }},
	{"jukebox_delay", func(e procfs.NFSEventsStats) uint64 { return e.JukeboxDelay }},
	{"pnfs_read", func(e procfs.NFSEventsStats) uint64 { return e.PNFSRead }},
	{"pnfs_write", func(e procfs.NFSEventsStats) uint64 { return e.PNFSWrite }},
	{"short_read", func(e procfs.NFSEventsStats) uint64 { return e.ShortRead }},
	{"short_write", func(e procfs.NFSEventsStats) uint64 { return e.ShortWrite }},
	{"silly_rename", func(e procfs.NFSEventsStats) uint64 { return e.SillyRename }},
	{"truncation", func(e procfs.NFSEventsStats) uint64 { return e.Truncation }},
	{"vfs_access", func(e procfs.NFSEventsStats) uint64 { return e.VFSAccess }},
	{"vfs_file_release", func(e procfs.NFSEventsStats) uint64 { return e.VFSFileRelease }},
	{"vfs_flush", func(e procfs.NFSEventsStats) uint64 { return e.VFSFlush }},
	{"vfs_fsync", func(e procfs.NFSEventsStats) uint64 { return e.VFSFsync }},
	{"vfs_getdents", func(e procfs.NFSEventsStats) uint64 { return e.VFSGetdents }},
	{"vfs_lock", func(e procfs.NFSEventsStats) uint64 { return e.VFSLock }},
	{"vfs_lookup", func(e procfs.NFSEventsStats) uint64 { return e.VFSLookup }},
	{"vfs_open", func(e procfs.NFSEventsStats) uint64 { return e.VFSOpen }},
	{"vfs_read_page", func(e procfs.NFSEventsStats) uint64 { return e.VFSReadPage }},
	{"vfs_read_pages", func(e procfs.NFSEventsStats) uint64 { return e.VFSReadPages }},
	{"vfs_setattr", func(e procfs.NFSEventsStats) uint64 { return e.VFSSetattr }},
	{"vfs_update_page", func(e procfs.NFSEventsStats) uint64 { return e.VFSUpdatePage }},
	{"vfs_write_page", func(e procfs.NFSEventsStats) uint64 { return e.VFSWritePage }},
	{"vfs_write_pages", func(e procfs.NFSEventsStats) uint64 { return e.VFSWritePages }},
	{"write_extension", func(e procfs.NFSEventsStats) uint64 { return e.WriteExtension }},
}

// groupLabels are the labels of every per-client-group series.
var groupLabels = []string{"client_group", "server_addr", "version", "proto"}

// Collector is a prometheus.Collector over a Source. It holds no per-mount state.
type Collector struct {
	source    Source
	logger    *slog.Logger
	tier      Tier
	maxSeries int
	timeout   time.Duration

	info, podInfo, age, readAhead, connections, nconnect   *prometheus.Desc
	readBytes, writeBytes, events                          *prometheus.Desc
	ops, retrans, majorTimeouts, opErrors                  *prometheus.Desc
	sentBytes, recvBytes, rttSeconds, exeSeconds, queueSec *prometheus.Desc
	findings, compliant, blocked, readAheadVerdict         *prometheus.Desc
	readAheadTarget, trafficClass, podTrafficClass         *prometheus.Desc

	groupSends, groupRecvs, groupBadXIDs, groupBacklog *prometheus.Desc
	groupConnects, groupConnections, groupMounts       *prometheus.Desc

	serverTransports, serverStuck, uninspected *prometheus.Desc
	serverBlockedMounts                        *prometheus.Desc

	scrapeDuration, scrapeSuccess, seriesDropped, mountsDropped *prometheus.Desc

	serviceLimit *prometheus.Desc
	// clientIdentity is the node's NFSv4 client identity source and fingerprint.
	clientIdentity *prometheus.Desc
	// tlshdRunning is whether the TLS handshake daemon runs, while a mount uses TLS.
	tlshdRunning *prometheus.Desc

	// podIO are the per-pod NFS I/O series (podio.go).
	podIO podIODescs

	// capHits counts scrapes in which the series cap left mounts out.
	capHits prometheus.Counter
}

// Tier selects how much of each mount a Collector exports.
type Tier string

const (
	// TierDefault is a bounded set per mount (see DefaultOperations): at most 36 series,
	// plus one per failing audit rule, one per pod using the superblock, the blocked
	// processes while its server is not answering, the last read-ahead verdict and the adaptive
	// read-ahead target; and two per server address (its
	// transports, and the stuck ones). It is what dashboards and alerts need on hosts with
	// many mounts.
	TierDefault Tier = "default"
	// TierFull is every counter of every NFS operation in use.
	TierFull Tier = "full"
)

// ParseTier returns the tier named s.
func ParseTier(s string) (Tier, error) {
	switch t := Tier(s); t {
	case TierDefault, TierFull:
		return t, nil
	}
	return "", fmt.Errorf("unknown metrics tier %q (want %s or %s)", s, TierDefault, TierFull)
}

// DefaultOperations are the NFS operations the default tier exports one by one; it sums
// every other operation into operation="other". The five exist in NFSv3 and NFSv4 and
// carry most of the traffic of a data mount.
var DefaultOperations = []string{"ACCESS", "GETATTR", "LOOKUP", "READ", "WRITE"}

// The operation label values the default tier adds: the sum of operations outside
// DefaultOperations, and the sum of all operations for the counters it exports per
// mount only (retransmissions and major timeouts).
const (
	OtherOperations = "other"
	AllOperations   = "all"
)

// Options configure a Collector.
type Options struct {
	// Tier is the set of per-mount series to export; empty means TierDefault.
	Tier Tier
	// MaxSeries caps the per-mount and per-group series one scrape exports; mounts beyond
	// the cap are left out whole and counted. 0 means no cap.
	MaxSeries int
	// Timeout bounds one call of the Source; 0 means 5 s.
	Timeout time.Duration
}

// NewCollector returns a Collector reading src at every scrape.
func NewCollector(src Source, logger *slog.Logger, opts Options) *Collector {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Tier == "" {
		opts.Tier = TierDefault
	}
	m := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "mount", name), help,
			append(append([]string{}, mountLabels...), labels...), nil)
	}
	g := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "client_group", name), help, groupLabels, nil)
	}
	s := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "scrape", name), help, nil, nil)
	}
	return &Collector{
		source:    src,
		logger:    logger,
		tier:      opts.Tier,
		maxSeries: opts.MaxSeries,
		timeout:   opts.Timeout,

		info:        m("info", "NFS superblock known to nfstune (value 1), with its filesystem type, mount point count, kernel client group, for a mount through a local proxy the helper (efs-proxy, efs-stunnel, aznfs-stunnel, loopback) and the server behind it, and the RPC transport security (xprtsec: none, tls or mtls).", infoLabels...),
		podInfo:     m("pod_info", "Pod using the superblock (value 1), one per pod, from kubelet's mount paths: pod UID, and the volume, PersistentVolume and driver where the paths name them.", podLabels...),
		age:         m("age_seconds", "Time since the superblock was mounted (mountstats age:)."),
		readAhead:   m("read_ahead_bytes", "Current read-ahead of the superblock's backing device (/sys/class/bdi/<device>/read_ahead_kb times 1024)."),
		connections: m("connections", "Effective transports of the mount's client group: the xprt: lines in mountstats."),
		nconnect:    m("nconnect", "nconnect= option the kernel shows for the mount (0 when absent)."),
		readBytes:   m("read_bytes_total", "Bytes read: normal (page cache reads by applications), direct (O_DIRECT) and server (READ payload from the server).", sourceLabel...),
		writeBytes:  m("write_bytes_total", "Bytes written: normal (by applications), direct (O_DIRECT) and server (WRITE payload to the server).", sourceLabel...),
		events:      m("events_total", "NFS client events of mountstats' events: line, per event (the counters behind nfsiostat -a, -d and -p: opens, attribute and dentry revalidations, cache invalidations, page reads and writes, ...).", eventLabel...),

		ops:           m("operations_total", "RPC operations completed, per NFS operation.", operationLabel...),
		retrans:       m("operation_retransmissions_total", "RPC retransmissions (transmissions minus operations), per NFS operation.", operationLabel...),
		majorTimeouts: m("operation_major_timeouts_total", "RPC major timeouts, per NFS operation.", operationLabel...),
		opErrors:      m("operation_errors_total", "RPCs that completed with an error status, per NFS operation (RPC iostats 1.1 and later).", operationLabel...),
		sentBytes:     m("operation_sent_bytes_total", "Bytes sent including RPC headers, per NFS operation.", operationLabel...),
		recvBytes:     m("operation_received_bytes_total", "Bytes received including RPC headers, per NFS operation.", operationLabel...),
		rttSeconds:    m("operation_rtt_seconds_total", "Cumulative round trip time from sending an RPC to receiving its reply, per NFS operation.", operationLabel...),
		exeSeconds:    m("operation_execute_seconds_total", "Cumulative time from creating an RPC to its completion, RTT included, per NFS operation.", operationLabel...),
		queueSec:      m("operation_queue_seconds_total", "Cumulative time RPCs waited before transmission, per NFS operation.", operationLabel...),

		findings:         m("findings", "Audit findings for the mount, per rule and severity.", findingLabels...),
		compliant:        m("compliant", "1 when the audit found nothing for the mount, else 0."),
		readAheadVerdict: m("readahead_verdict", "The last verdict on a read-ahead change the agent made (value 1): helped, no_change, hurt or too_little_traffic, from the mount's application read rate and over-read before and after the change (docs/policy.md, Read-ahead verdicts).", verdictLabel...),
		readAheadTarget:  m("readahead_adaptive_target_bytes", "The read-ahead the adaptive controller wants for the mount (its rule's readAheadAdaptive), in bytes: the value in force, or in observe mode the one it would set. Exported only for mounts under an adaptive rule, once the agent has stepped on them."),
		trafficClass:     m("readahead_traffic_class", "The class of the mount's read traffic over the agent's last interval (value 1): streaming_read, random_read, mapped_random, thrashing, mixed (its pods differ) or unknown (docs/agent.md, Read traffic classes).", classLabel...),
		podTrafficClass:  m("pod_readahead_traffic_class", "The class of a pod's read traffic on the mount over the agent's last interval (value 1), from the mount's statistics, the pod's cgroup counters and, with the per-pod collector, the pod's own READs, read(2) bytes and faults (docs/agent.md, Read traffic classes).", podClassLabels...),
		blocked:          m("blocked_processes", "Processes with an open file, working directory or root on the superblock, while its server is not answering (nfstune_server_stuck_transports > 0); exported only then. They block (hard mount) or get errors (soft)."),

		groupSends:       g("sends_total", "RPC requests sent over all transports of the kernel NFS client."),
		groupRecvs:       g("receives_total", "RPC replies received over all transports of the kernel NFS client."),
		groupBadXIDs:     g("bad_xids_total", "Replies with an unknown transaction ID over all transports of the kernel NFS client."),
		groupBacklog:     g("backlog_queue_total", "Cumulative backlog queue length sampled at each send, over all transports of the kernel NFS client."),
		groupConnects:    g("connects_total", "Transport (re)connections over all transports of the kernel NFS client."),
		groupConnections: g("connections", "Transports (xprt: lines) of the kernel NFS client."),
		groupMounts:      g("mounts", "NFS superblocks using the kernel NFS client."),

		serverTransports: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "server", "transports"),
			"RPC transports to the server address (/sys/kernel/sunrpc/xprt-switches, Linux 5.14 and later; absent before).",
			[]string{"server_addr"}, nil),
		uninspected: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "blocked", "uninspected_processes"),
			"Processes that could not be inspected (permission denied: reading other processes' fdinfo takes CAP_SYS_PTRACE) or were over the scan limit when the processes using a stalled server's superblocks were last looked for: nfstune_mount_blocked_processes may miss that many. Exported only while a server is stalled.",
			nil, nil),
		serverStuck: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "server", "stuck_transports"),
			"Transports to the server address that held requests with no reply and no progress since the previous scrape (at least 1 s apart): one of nconnect's connections stuck, or all of them when the server is gone.",
			[]string{"server_addr"}, nil),

		serverBlockedMounts: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "server", "blocked_mounts"),
			"NFS mounts in progress (mount.nfs, mount.nfs4) stuck on the server, as their command line names it: in state D, or running for more than 10 s. Such a mount has no superblock yet, and later mounts of the server from the node queue behind it. Exported only while a server is stalled, for at most 64 servers.",
			[]string{"server_addr"}, nil),

		scrapeDuration: s("duration_seconds", "Time the last scrape of NFS state took."),
		scrapeSuccess:  s("success", "1 when the last scrape read the NFS state, else 0."),
		seriesDropped:  s("series_dropped", "Series left out of the last scrape by the series cap."),
		mountsDropped:  s("mounts_dropped", "Mounts left out of the last scrape by the series cap."),
		clientIdentity: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "node", "nfs_client_identity_info"),
			"Where the node's NFSv4 client identity comes from (source: identifier, nfs4_unique_id or hostname) and its fingerprint, the first 8 hex digits of the SHA-256 of the uniquifier and host name (value 1). Nodes with the same fingerprint are one client to the server: count by (fingerprint) (nfstune_node_nfs_client_identity_info) > 1.",
			[]string{"source", "fingerprint"}, nil),
		tlshdRunning: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "node", "tlshd_running"),
			"1 when a tlshd process runs, 0 when none does (ktls-utils' TLS handshake daemon, which every new connection of an xprtsec=tls or mtls mount needs). Exported only while a mount uses TLS and the process scan was complete.",
			nil, nil),
		serviceLimit: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "service", "limit_bytes_per_second"),
			"Throughput limit of the provisioned service behind server:export (the policy's service, tier and capacity in nfstune plan's model), per access direction.",
			[]string{"server", "export", "service", "tier", "access"}, nil),
		podIO: newPodIODescs(),
		capHits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "scrape", Name: "series_cap_hits_total",
			Help: "Scrapes in which the series cap left mounts out.",
		}),
	}
}

// Describe implements prometheus.Collector. The collector is unchecked on purpose: its
// series are known only at scrape time.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.scrapeDuration
	ch <- c.scrapeSuccess
	ch <- c.seriesDropped
	ch <- c.mountsDropped
	ch <- c.serviceLimit
	ch <- c.clientIdentity
	ch <- c.tlshdRunning
	c.capHits.Describe(ch)
	for _, d := range []*prometheus.Desc{
		c.info, c.podInfo, c.age, c.readAhead, c.connections, c.nconnect, c.readBytes, c.writeBytes, c.events,
		c.ops, c.retrans, c.majorTimeouts, c.opErrors, c.sentBytes, c.recvBytes,
		c.rttSeconds, c.exeSeconds, c.queueSec, c.findings, c.compliant, c.readAheadVerdict, c.readAheadTarget, c.trafficClass, c.podTrafficClass,
		c.podIO.readBytes, c.podIO.writeBytes, c.podIO.majorFaults, c.podIO.latency, c.podIO.part, c.podIO.dropped,
		c.groupSends, c.groupRecvs, c.groupBadXIDs, c.groupBacklog, c.groupConnects,
		c.groupConnections, c.groupMounts, c.blocked, c.serverTransports, c.serverStuck, c.uninspected, c.serverBlockedMounts,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A failing Source never fails the scrape: it
// shows as nfstune_scrape_success 0. The scrape's health series go first, before any
// series built from host data.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	snap, err := c.source(ctx)
	success := 1.0
	switch {
	case errors.Is(err, ErrNoData):
		c.logger.Debug("no NFS state to export", "err", err)
	case err != nil:
		success = 0
		c.logger.Error("reading NFS state for scrape", "err", err)
	}
	ch <- constMetric(c.scrapeSuccess, prometheus.GaugeValue, success)
	ch <- constMetric(c.scrapeDuration, prometheus.GaugeValue, time.Since(start).Seconds())
	var droppedSeries, droppedMounts int
	budget := c.maxSeries
	if budget <= 0 {
		budget = int(^uint(0) >> 1)
	}
	if snap.Inventory != nil {
		droppedSeries, droppedMounts, budget = c.collectInventory(ch, snap)
		if id := snap.Inventory.ClientIdentity; id != nil {
			ch <- prometheus.MustNewConstMetric(c.clientIdentity, prometheus.GaugeValue, 1, id.Source, id.Fingerprint)
		}
		if hs := snap.Inventory.TLSHandshake; hs != nil && (hs.Running || hs.Complete) {
			running := 0.0
			if hs.Running {
				running = 1
			}
			ch <- constMetric(c.tlshdRunning, prometheus.GaugeValue, running)
		}
	}
	c.collectLimits(ch, snap.Limits)
	droppedSeries += c.collectPodIO(ch, snap.PodIO, budget)
	if droppedMounts > 0 {
		c.capHits.Inc()
	}
	ch <- constMetric(c.seriesDropped, prometheus.GaugeValue, float64(droppedSeries))
	ch <- constMetric(c.mountsDropped, prometheus.GaugeValue, float64(droppedMounts))
	c.capHits.Collect(ch)
}

// constMetric is prometheus.MustNewConstMetric for label values that come from the host:
// it escapes what is not UTF-8 (labelValue) and never panics.
func constMetric(d *prometheus.Desc, typ prometheus.ValueType, v float64, values ...string) prometheus.Metric {
	escaped := values // the caller's slice, copied before the first change
	for i, lv := range values {
		if e := labelValue(lv); e != lv {
			if len(escaped) > 0 && &escaped[0] == &values[0] {
				escaped = slices.Clone(values)
			}
			escaped[i] = e
		}
	}
	m, err := prometheus.NewConstMetric(d, typ, v, escaped...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// labelValue returns s with every byte that is not part of valid UTF-8 escaped as \xNN,
// as display.Text does: Prometheus refuses such a label value, and mount points, exports,
// mountstats and the proxy helpers' state files are bytes, not text.
func labelValue(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// collectInventory sends group series first, then mounts in exportOrder until the series
// cap is reached. It returns the series and mounts it left out, and the budget left.
func (c *Collector) collectInventory(ch chan<- prometheus.Metric, snap Snapshot) (droppedSeries, droppedMounts, left int) {
	inv := snap.Inventory
	budget := c.maxSeries
	if budget <= 0 {
		budget = int(^uint(0) >> 1)
	}

	groups := append(c.serverMetrics(inv), c.groupMetrics(inv)...)
	if len(groups) > budget {
		droppedSeries += len(groups) - budget
		groups = groups[:budget]
	}
	for _, m := range groups {
		ch <- m
	}
	budget -= len(groups)

	byDevice := make(map[string][]Finding)
	for _, f := range snap.Findings {
		byDevice[f.Device] = append(byDevice[f.Device], f)
	}
	blocked := make(map[string]int, len(inv.Blocked))
	for _, b := range inv.Blocked {
		blocked[b.Device] = len(b.Holders)
	}
	buf := make([]prometheus.Metric, 0, 128)
	for _, i := range exportOrder(inv.Mounts) {
		dev := inv.Mounts[i].Device
		var holders *int
		if n, ok := blocked[dev]; ok {
			holders = &n
		}
		buf = c.mountMetrics(buf[:0], &inv.Mounts[i], byDevice[dev], holders, snap.ReadAheadVerdicts[dev], snap.ReadAheadTargets[dev], snap.TrafficClasses[dev])
		if len(buf) > budget {
			droppedSeries += len(buf)
			droppedMounts++
			continue
		}
		budget -= len(buf)
		for _, m := range buf {
			ch <- m
		}
	}
	return droppedSeries, droppedMounts, budget
}

// collectLimits sends one series per distinct service limit. Their number is bounded by the
// policy's rules, not by the mounts, so the series cap does not apply.
func (c *Collector) collectLimits(ch chan<- prometheus.Metric, limits []ServiceLimit) {
	seen := make(map[ServiceLimit]bool, len(limits))
	for _, l := range limits {
		if seen[l] {
			continue
		}
		seen[l] = true
		ch <- constMetric(c.serviceLimit, prometheus.GaugeValue, l.BytesPerSecond,
			l.Server, l.Export, l.Service, l.Tier, l.Access)
	}
}

// exportOrder returns the indexes of mounts in the order the exposition lists them: by
// backend, then device, the first labels of a mount series by name. The registry sorts
// every family before encoding; handed in that order, the sort is one pass instead of
// the largest cost of a scrape with many mounts.
func exportOrder(mounts []inventory.Mount) []int {
	order := make([]int, len(mounts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ma, mb := &mounts[order[a]], &mounts[order[b]]
		if ma.Backend != mb.Backend {
			return ma.Backend < mb.Backend
		}
		return ma.Device < mb.Device
	})
	return order
}

// sample is a constant metric whose label pairs are shared with other series: every
// series of a mount carries the same six, and the nine series of one NFS operation the
// same seven. prometheus.MustNewConstMetric builds and sorts the pairs for each series,
// which on a host with 1,000 mounts is a large part of a scrape's allocations.
type sample struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair // sorted by name, never modified
	typ    prometheus.ValueType
	value  float64
}

func (s *sample) Desc() *prometheus.Desc { return s.desc }

func (s *sample) Write(out *dto.Metric) error {
	out.Label = s.labels
	if s.typ == prometheus.CounterValue {
		out.Counter = &dto.Counter{Value: &s.value}
	} else {
		out.Gauge = &dto.Gauge{Value: &s.value}
	}
	return nil
}

// labelPairs returns names and values as label pairs sorted by name, as the exposition
// lists them. It escapes the values in place (labelValue); the pairs point into the two
// slices, which the caller must not change afterwards.
func labelPairs(names, values []string) []*dto.LabelPair {
	pairs := make([]*dto.LabelPair, len(names))
	for i := range names {
		values[i] = labelValue(values[i])
		pairs[i] = &dto.LabelPair{Name: &names[i], Value: &values[i]}
	}
	slices.SortFunc(pairs, func(a, b *dto.LabelPair) int { return strings.Compare(*a.Name, *b.Name) })
	return pairs
}

// mountMetrics appends the series of one mount; blocked is the number of processes using
// it when its server is stalled, nil otherwise; verdict the last verdict on a read-ahead
// change, empty when none; targetKB the adaptive controller's target, 0 when none.
func (c *Collector) mountMetrics(out []prometheus.Metric, m *inventory.Mount, findings []Finding, blocked *int, verdict readahead.Verdict, targetKB int, class readahead.Classification) []prometheus.Metric {
	first := ""
	if len(m.MountPoints) > 0 {
		first = m.MountPoints[0]
	}
	// The server behind a local proxy, not 127.0.0.1: sums by server and export (the
	// headroom rule) must not add up different file systems.
	lv := []string{m.Device, first, m.ServerName(), m.Export, m.Version, m.Backend}
	base := labelPairs(mountLabels, lv)
	// with returns the mount's label pairs with more; the result is shared by every
	// series that carries the same extra values.
	with := func(names []string, values ...string) []*dto.LabelPair {
		return labelPairs(append(slices.Clip(mountLabels), names...), append(slices.Clip(lv), values...))
	}
	add := func(d *prometheus.Desc, typ prometheus.ValueType, v float64, labels []*dto.LabelPair) {
		out = append(out, &sample{desc: d, labels: labels, typ: typ, value: v})
	}

	var proxy, upstream string
	if p := m.Proxy; p != nil {
		// Kind is one of inventory.ProxyKinds; the upstream is one name per file system,
		// bounded like the server label.
		proxy, upstream = p.Kind, p.Upstream
	}
	add(c.info, prometheus.GaugeValue, 1, with(infoLabels, m.FSType, m.ClientGroup, fmt.Sprint(len(m.MountPoints)), proxy, upstream, cmp.Or(m.TransportSecurity, inventory.XprtSecNone)))
	for _, p := range kubelet.PodVolumes(m.MountPoints) {
		add(c.podInfo, prometheus.GaugeValue, 1, with(podLabels, p.PodUID, p.Volume, p.PV, p.Driver))
	}
	if m.ReadAheadKB != nil {
		add(c.readAhead, prometheus.GaugeValue, float64(*m.ReadAheadKB)*1024, base)
	}
	add(c.connections, prometheus.GaugeValue, float64(m.Connections), base)
	full := c.tier == TierFull
	if full {
		add(c.nconnect, prometheus.GaugeValue, float64(m.NConnect), base)
	}

	rules := make(map[[2]string]int)
	for _, f := range findings {
		rules[[2]string{f.Rule, f.Severity}]++
	}
	keys := make([][2]string, 0, len(rules))
	for k := range rules {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		add(c.findings, prometheus.GaugeValue, float64(rules[k]), with(findingLabels, k[0], k[1]))
	}
	compliant := 0.0
	if len(findings) == 0 {
		compliant = 1
	}
	add(c.compliant, prometheus.GaugeValue, compliant, base)
	if blocked != nil {
		add(c.blocked, prometheus.GaugeValue, float64(*blocked), base)
	}
	if verdict != "" {
		add(c.readAheadVerdict, prometheus.GaugeValue, 1, with(verdictLabel, string(verdict)))
	}
	if targetKB > 0 {
		add(c.readAheadTarget, prometheus.GaugeValue, float64(targetKB)*1024, base)
	}
	if class.Class != "" {
		add(c.trafficClass, prometheus.GaugeValue, 1, with(classLabel, string(class.Class)))
		for _, p := range class.Pods {
			add(c.podTrafficClass, prometheus.GaugeValue, 1, with(podClassLabels, p.UID, string(p.Class)))
		}
	}

	st := m.Stats
	if st == nil {
		return out
	}
	if full {
		add(c.age, prometheus.GaugeValue, st.Age.Seconds(), base)
	}
	// Sources in the order of their names, as the exposition lists them.
	direct, normal, server := with(sourceLabel, "direct"), with(sourceLabel, "normal"), with(sourceLabel, "server")
	add(c.readBytes, prometheus.CounterValue, float64(st.Bytes.DirectRead), direct)
	add(c.readBytes, prometheus.CounterValue, float64(st.Bytes.Read), normal)
	add(c.readBytes, prometheus.CounterValue, float64(st.Bytes.ReadTotal), server)
	add(c.writeBytes, prometheus.CounterValue, float64(st.Bytes.DirectWrite), direct)
	add(c.writeBytes, prometheus.CounterValue, float64(st.Bytes.Write), normal)
	add(c.writeBytes, prometheus.CounterValue, float64(st.Bytes.WriteTotal), server)
	if !full {
		return c.defaultOperations(out, st, with)
	}
	for _, e := range Events {
		add(c.events, prometheus.CounterValue, float64(e.Value(st.Events)), with(eventLabel, e.Name))
	}

	ops := make([]int, 0, len(st.Operations))
	for i, op := range st.Operations {
		// Most of the ~60 NFSv4 operations are never used; leaving idle ones out keeps
		// the series count near what the mount really does.
		if op.Requests != 0 || op.Transmissions != 0 {
			ops = append(ops, i)
		}
	}
	sort.Slice(ops, func(a, b int) bool { return st.Operations[ops[a]].Operation < st.Operations[ops[b]].Operation })
	for _, i := range ops {
		op := &st.Operations[i]
		l := with(operationLabel, op.Operation)
		retrans := uint64(0)
		if op.Transmissions > op.Requests {
			retrans = op.Transmissions - op.Requests
		}
		add(c.ops, prometheus.CounterValue, float64(op.Requests), l)
		add(c.retrans, prometheus.CounterValue, float64(retrans), l)
		add(c.majorTimeouts, prometheus.CounterValue, float64(op.MajorTimeouts), l)
		add(c.opErrors, prometheus.CounterValue, float64(op.Errors), l)
		add(c.sentBytes, prometheus.CounterValue, float64(op.BytesSent), l)
		add(c.recvBytes, prometheus.CounterValue, float64(op.BytesReceived), l)
		add(c.rttSeconds, prometheus.CounterValue, msToSeconds(op.CumulativeTotalResponseMilliseconds), l)
		add(c.exeSeconds, prometheus.CounterValue, msToSeconds(op.CumulativeTotalRequestMilliseconds), l)
		add(c.queueSec, prometheus.CounterValue, msToSeconds(op.CumulativeQueueMilliseconds), l)
	}
	return out
}

// defaultOperations appends the default tier's operation series: requests, errors, RTT
// and execution time for each of DefaultOperations and for the sum of the others, each
// left out while it has seen no request, as the full tier does; and retransmissions and
// major timeouts summed over all operations. Summed over the operation label, every
// counter gives the mount's total in both tiers.
func (c *Collector) defaultOperations(out []prometheus.Metric, st *inventory.Stats, with func([]string, ...string) []*dto.LabelPair) []prometheus.Metric {
	type sums struct{ requests, transmissions, errors, rttMS, exeMS uint64 }
	// buckets are DefaultOperations, then the other operations.
	names := append(slices.Clip(DefaultOperations), OtherOperations)
	buckets := make([]sums, len(names))
	var all sums
	var majorTimeouts uint64
	for i := range st.Operations {
		op := &st.Operations[i]
		k := slices.Index(DefaultOperations, op.Operation)
		if k < 0 {
			k = len(DefaultOperations)
		}
		for _, s := range []*sums{&buckets[k], &all} {
			s.requests += op.Requests
			s.transmissions += op.Transmissions
			s.errors += op.Errors
			s.rttMS += op.CumulativeTotalResponseMilliseconds
			s.exeMS += op.CumulativeTotalRequestMilliseconds
		}
		majorTimeouts += op.MajorTimeouts
	}
	retrans := uint64(0)
	if all.transmissions > all.requests {
		retrans = all.transmissions - all.requests
	}
	ls := with(operationLabel, AllOperations)
	out = append(out, &sample{desc: c.retrans, labels: ls, typ: prometheus.CounterValue, value: float64(retrans)})
	out = append(out, &sample{desc: c.majorTimeouts, labels: ls, typ: prometheus.CounterValue, value: float64(majorTimeouts)})
	// names is in the order the exposition lists label values: upper case before lower.
	for k, b := range buckets {
		if b.requests == 0 && b.transmissions == 0 {
			continue
		}
		l := with(operationLabel, names[k])
		out = append(out,
			&sample{desc: c.ops, labels: l, typ: prometheus.CounterValue, value: float64(b.requests)},
			&sample{desc: c.opErrors, labels: l, typ: prometheus.CounterValue, value: float64(b.errors)},
			&sample{desc: c.rttSeconds, labels: l, typ: prometheus.CounterValue, value: msToSeconds(b.rttMS)},
			&sample{desc: c.exeSeconds, labels: l, typ: prometheus.CounterValue, value: msToSeconds(b.exeMS)},
		)
	}
	return out
}

// serverMetrics returns, per server address the sunrpc transports connect to, their
// number and how many are stuck (inv.Stalled); none when the kernel shows no transports.
// The series are bounded by the servers, not by the mounts or their nconnect.
func (c *Collector) serverMetrics(inv *inventory.Inventory) []prometheus.Metric {
	count := map[string]int{}
	for _, t := range inv.Transports {
		if t.DstAddr != "" {
			count[t.DstAddr]++
		}
	}
	// One address has a StalledServer per port: 127.0.0.1 for every local proxy.
	stuck := make(map[string]int, len(inv.Stalled))
	for _, s := range inv.Stalled {
		stuck[s.Addr] += len(s.Transports)
	}
	addrs := make([]string, 0, len(count))
	for a := range count {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	out := make([]prometheus.Metric, 0, 2*len(addrs)+1)
	for _, a := range addrs {
		out = append(out,
			constMetric(c.serverTransports, prometheus.GaugeValue, float64(count[a]), a),
			constMetric(c.serverStuck, prometheus.GaugeValue, float64(stuck[a]), a),
		)
	}
	if len(inv.Blocked) > 0 {
		out = append(out, constMetric(c.uninspected, prometheus.GaugeValue, float64(inv.Blocked[0].Uninspected)))
	}
	return append(out, c.blockedMounts(inv)...)
}

// maxBlockedMountServers bounds nfstune_server_blocked_mounts: its label is a server name
// from a command line, not one of the mounts'.
const maxBlockedMountServers = 64

// blockedMounts returns nfstune_server_blocked_mounts: the stuck mount programs
// (inv.Mounting) per server, the first maxBlockedMountServers servers by name.
func (c *Collector) blockedMounts(inv *inventory.Inventory) []prometheus.Metric {
	count := map[string]int{}
	for _, p := range inv.Mounting {
		if p.Program == inventory.ProgramMount && p.Server != "" {
			count[p.Server]++
		}
	}
	servers := make([]string, 0, len(count))
	for s := range count {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	if len(servers) > maxBlockedMountServers {
		servers = servers[:maxBlockedMountServers]
	}
	out := make([]prometheus.Metric, 0, len(servers))
	for _, s := range servers {
		out = append(out, prometheus.MustNewConstMetric(c.serverBlockedMounts, prometheus.GaugeValue, float64(count[s]), s))
	}
	return out
}

// groupMetrics returns the per-client-group series. The transport counters are taken from
// one mount of the group: every mount of the group prints the same xprt: lines.
func (c *Collector) groupMetrics(inv *inventory.Inventory) []prometheus.Metric {
	stats := make(map[string]*inventory.Stats)
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		if m.Stats != nil && stats[m.ClientGroup] == nil {
			stats[m.ClientGroup] = m.Stats
		}
	}
	var out []prometheus.Metric
	for _, g := range inv.Groups {
		lv := []string{g.Key, g.ServerAddr, g.Version, g.Proto}
		out = append(out,
			constMetric(c.groupMounts, prometheus.GaugeValue, float64(len(g.Devices)), lv...),
			constMetric(c.groupConnections, prometheus.GaugeValue, float64(g.Connections), lv...),
		)
		st := stats[g.Key]
		if st == nil {
			continue
		}
		t := SumTransports(st.Transports)
		out = append(out,
			constMetric(c.groupSends, prometheus.CounterValue, float64(t.Sends), lv...),
			constMetric(c.groupRecvs, prometheus.CounterValue, float64(t.Receives), lv...),
			constMetric(c.groupBadXIDs, prometheus.CounterValue, float64(t.BadTransactionIDs), lv...),
			constMetric(c.groupBacklog, prometheus.CounterValue, float64(t.CumulativeBacklog), lv...),
			constMetric(c.groupConnects, prometheus.CounterValue, float64(t.Connect), lv...),
		)
	}
	return out
}

// msToSeconds converts a cumulative millisecond counter. Some old kernels print values near
// 2^64 (procfs issue 166); like node_exporter, keep them within float64's exact range.
func msToSeconds(ms uint64) float64 {
	const mantissa = 1 << 53
	return float64(ms%mantissa) / 1000
}
