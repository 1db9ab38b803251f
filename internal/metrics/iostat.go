package metrics

import (
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/readahead"
)

// TransportTotals are the counters of all transports of one kernel NFS client added up.
// With nconnect=N mountstats prints N xprt: lines; nfs-utils' nfsiostat keeps only the last
// one and so undercounts by about N.
type TransportTotals struct {
	Connections       int
	Sends             uint64
	Receives          uint64
	BadTransactionIDs uint64
	CumulativeBacklog uint64
	Connect           uint64
}

// SumTransports adds up the counters of every xprt: line.
func SumTransports(ts []procfs.NFSTransportStats) TransportTotals {
	t := TransportTotals{Connections: len(ts)}
	for _, x := range ts {
		t.Sends += x.Sends
		t.Receives += x.Receives
		t.BadTransactionIDs += x.BadTransactionIDs
		t.CumulativeBacklog += x.CumulativeBacklog
		t.Connect += x.Connect
	}
	return t
}

// MountRates are one mount's rates over an interval, as nfsiostat prints them, but with the
// transport counters of every connection counted.
type MountRates struct {
	// Device is the superblock; empty for a mount read from a saved mountstats file.
	Device     string `json:"device,omitempty"`
	MountPoint string `json:"mountpoint"`
	// Server is the server the data lives on: for a mount through a local proxy, the one
	// behind it (inventory.Mount.ServerName), as in the metrics.
	Server      string  `json:"server"`
	Export      string  `json:"export"`
	Version     string  `json:"version"`
	Connections int     `json:"connections"`
	Seconds     float64 `json:"interval_seconds"`
	// OpsPerSec is RPC requests sent per second over all transports of the client group.
	// The group's transports are shared, so mounts of one group show the same value.
	OpsPerSec float64 `json:"ops_per_sec"`
	// Backlog is the average backlog queue length seen by each RPC sent in the interval,
	// over all transports: mountstats -r's "average backlog queue length". nfsiostat's
	// "rpc bklog" is this divided by the sample time again, from the last transport only.
	Backlog float64 `json:"rpc_backlog"`
	// ReadMBps and WriteMBps are READ and WRITE payload to and from the server, in MB/s
	// (10^6 bytes), from the bytes: line.
	ReadMBps  float64 `json:"read_mb_per_sec"`
	WriteMBps float64 `json:"write_mb_per_sec"`
	// Retrans is the number of retransmissions over all operations in the interval.
	Retrans uint64 `json:"retrans"`
	// Ops are the operations that ran in the interval, READ and WRITE first.
	Ops []OpRates `json:"ops"`
	// ReadAhead is the read-ahead evidence over the same interval: over-read, READs in
	// flight against the window, average READ size (package readahead).
	ReadAhead readahead.Evidence `json:"readahead"`
	// Attr, Dir and Page are nfsiostat's -a, -d and -p evidence over the same interval
	// (see View); nil unless asked for (KeepViews).
	Attr *AttrCache `json:"attr,omitempty"`
	Dir  *DirCache  `json:"dir,omitempty"`
	Page *PageCache `json:"page,omitempty"`

	// key matches the mount with its earlier sample (statsKeys).
	key string
}

// OpRates are one NFS operation's figures over an interval.
type OpRates struct {
	Operation  string  `json:"operation"`
	Ops        uint64  `json:"ops"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	KBPerOp    float64 `json:"kb_per_op"`
	Retrans    uint64  `json:"retrans"`
	AvgRTTMs   float64 `json:"avg_rtt_ms"`
	AvgExeMs   float64 `json:"avg_exe_ms"`
	AvgQueueMs float64 `json:"avg_queue_ms"`
	Errors     uint64  `json:"errors"`
}

// Rates compares two inventories taken elapsed apart and returns the rates of every mount
// in cur that has stats, in cur's order. A mount absent from prev (or whose counters went
// backwards, because it was mounted again) is measured since it was mounted, as nfsiostat
// does for its first report. When prev is nil every mount is measured since mount.
func Rates(prev, cur *inventory.Inventory, elapsed time.Duration) []MountRates {
	old := make(map[string]*inventory.Stats)
	if prev != nil {
		for i, key := range statsKeys(prev) {
			if prev.Mounts[i].Stats != nil {
				old[key] = prev.Mounts[i].Stats
			}
		}
	}
	var out []MountRates
	for i, key := range statsKeys(cur) {
		m := &cur.Mounts[i]
		if m.Stats == nil {
			continue
		}
		p := old[key]
		dt := elapsed.Seconds()
		if p == nil || wentBack(p, m.Stats) {
			p = &inventory.Stats{}
			dt = m.Stats.Age.Seconds()
		}
		r := mountRates(m, p, m.Stats, dt)
		r.ReadAhead = readahead.Measure(m, old[key], elapsed)
		r.key = key
		out = append(out, r)
	}
	return out
}

// statsKeys names each mount of inv for matching it with an earlier sample: its device,
// or, read from a saved mountstats file where devices are unknown, its mount point and
// its rank among the entries on that mount point (stacked superblocks).
func statsKeys(inv *inventory.Inventory) []string {
	keys := make([]string, len(inv.Mounts))
	seen := map[string]int{}
	for i, m := range inv.Mounts {
		if m.Device != "" {
			keys[i] = m.Device
			continue
		}
		mp := ""
		if len(m.MountPoints) > 0 {
			mp = m.MountPoints[0]
		}
		keys[i] = fmt.Sprintf("%s#%d", mp, seen[mp])
		seen[mp]++
	}
	return keys
}

// wentBack reports whether any counter is lower in cur than in prev: the device number was
// reused by a new superblock.
func wentBack(prev, cur *inventory.Stats) bool {
	if cur.Age < prev.Age || cur.Bytes.ReadTotal < prev.Bytes.ReadTotal || cur.Bytes.WriteTotal < prev.Bytes.WriteTotal {
		return true
	}
	pt, ct := SumTransports(prev.Transports), SumTransports(cur.Transports)
	return ct.Sends < pt.Sends
}

func mountRates(m *inventory.Mount, prev, cur *inventory.Stats, dt float64) MountRates {
	r := MountRates{
		Device: m.Device, Server: m.ServerName(), Export: m.Export, Version: m.Version,
		Connections: len(cur.Transports), Seconds: dt,
		Ops: []OpRates{}, // an idle interval is "ops": [] in JSON, not null
	}
	if len(m.MountPoints) > 0 {
		r.MountPoint = m.MountPoints[0]
	}
	per := func(n float64) float64 {
		if dt <= 0 {
			return 0
		}
		return n / dt
	}
	pt, ct := SumTransports(prev.Transports), SumTransports(cur.Transports)
	sends := delta(ct.Sends, pt.Sends)
	r.OpsPerSec = per(float64(sends))
	if sends > 0 {
		r.Backlog = float64(delta(ct.CumulativeBacklog, pt.CumulativeBacklog)) / float64(sends)
	}
	r.ReadMBps = per(float64(delta(cur.Bytes.ReadTotal, prev.Bytes.ReadTotal))) / 1e6
	r.WriteMBps = per(float64(delta(cur.Bytes.WriteTotal, prev.Bytes.WriteTotal))) / 1e6
	views(prev, cur, &r)

	before := make(map[string]procfs.NFSOperationStats, len(prev.Operations))
	for _, op := range prev.Operations {
		before[op.Operation] = op
	}
	for _, op := range cur.Operations {
		b := before[op.Operation]
		ops := delta(op.Requests, b.Requests)
		trans := delta(op.Transmissions, b.Transmissions)
		retrans := delta(trans, ops)
		r.Retrans += retrans
		if ops == 0 {
			continue
		}
		n := float64(ops)
		r.Ops = append(r.Ops, OpRates{
			Operation:  op.Operation,
			Ops:        ops,
			OpsPerSec:  per(n),
			KBPerOp:    float64(delta(op.BytesSent, b.BytesSent)+delta(op.BytesReceived, b.BytesReceived)) / 1024 / n,
			Retrans:    retrans,
			AvgRTTMs:   float64(delta(op.CumulativeTotalResponseMilliseconds, b.CumulativeTotalResponseMilliseconds)) / n,
			AvgExeMs:   float64(delta(op.CumulativeTotalRequestMilliseconds, b.CumulativeTotalRequestMilliseconds)) / n,
			AvgQueueMs: float64(delta(op.CumulativeQueueMilliseconds, b.CumulativeQueueMilliseconds)) / n,
			Errors:     delta(op.Errors, b.Errors),
		})
	}
	sort.SliceStable(r.Ops, func(i, j int) bool { return opRank(r.Ops[i]) < opRank(r.Ops[j]) })
	return r
}

// opRank puts READ and WRITE first and keeps the kernel's order for the rest.
func opRank(o OpRates) int {
	switch o.Operation {
	case "READ":
		return 0
	case "WRITE":
		return 1
	}
	return 2
}

func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}
