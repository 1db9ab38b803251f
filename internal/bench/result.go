package bench

import (
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/strictyaml"
)

// Result is what bench run and bench sweep write: the runs, the tuning state at the start
// and the provenance.
type Result struct {
	Runs       []Run      `json:"runs"`
	Tuning     *Tuning    `json:"tuning"`
	Provenance Provenance `json:"provenance"`
	// Curve is the load curve of a bench curve result; its runs are the curve's steps.
	Curve *Curve `json:"curve,omitempty"`
}

// Run is one fio process: one job of a profile, one repeat, one variant.
type Run struct {
	Profile string `json:"profile"`
	Job     string `json:"job"`
	// Variant names the tuning of a sweep step, e.g. "ra=4096"; empty for bench run.
	Variant   string  `json:"variant,omitempty"`
	Repeat    int     `json:"repeat"`
	ReadMiBs  float64 `json:"read_mib_s"`
	WriteMiBs float64 `json:"write_mib_s"`
	// ReadIOPS and WriteIOPS are operations per second; files per second for the
	// metadata jobs.
	ReadIOPS  float64 `json:"read_iops"`
	WriteIOPS float64 `json:"write_iops"`
	LatP50ms  float64 `json:"lat_p50_ms"`
	LatP99ms  float64 `json:"lat_p99_ms"`
	LatMeanms float64 `json:"lat_mean_ms"`
	// LatSource is "lat_ns" or "clat_ns": which fio latency the percentiles are.
	LatSource string    `json:"lat_source,omitempty"`
	Started   time.Time `json:"started"`
	ElapsedS  float64   `json:"elapsed_s"`
	// CacheDropped is true when the page cache was dropped (vm.drop_caches) before the run.
	CacheDropped bool `json:"cache_dropped"`
	// Command is the exact fio command line.
	Command []string `json:"command"`
	// Tuning is the mount's state during this run.
	Tuning *Tuning `json:"tuning,omitempty"`
	// Mountstats is the change of the mount's counters over the run.
	Mountstats *StatsDelta `json:"mountstats_delta,omitempty"`
}

// Tuning is the client-side state a result depends on.
type Tuning struct {
	MountPoint  string            `json:"mountpoint"`
	FSType      string            `json:"fstype"`
	Device      string            `json:"device,omitempty"`
	Server      string            `json:"server,omitempty"`
	Export      string            `json:"export,omitempty"`
	Version     string            `json:"version,omitempty"`
	Options     map[string]string `json:"mount_options,omitempty"`
	ReadAheadKB *int              `json:"read_ahead_kb"`
	NConnect    int               `json:"nconnect,omitempty"`
	// Connections is the effective number of transports (xprt lines in mountstats).
	Connections int    `json:"connections"`
	RSize       int    `json:"rsize,omitempty"`
	WSize       int    `json:"wsize,omitempty"`
	Backend     string `json:"backend,omitempty"`
	// TransportSecurity is the mount's xprtsec (none, tls, mtls): a result over TLS pays
	// for encryption on every byte, so it is not comparable with one without.
	TransportSecurity string `json:"xprtsec,omitempty"`
}

// Provenance records how a result was produced.
type Provenance struct {
	Tool       string    `json:"tool"`
	Profile    string    `json:"profile"`
	FioVersion string    `json:"fio_version"`
	Kernel     string    `json:"kernel"`
	Hostname   string    `json:"hostname,omitempty"`
	Directory  string    `json:"directory"`
	SizeBytes  int64     `json:"size_bytes"`
	RuntimeS   int       `json:"runtime_s"`
	RampS      int       `json:"ramp_s"`
	Repeat     int       `json:"repeat"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	// Interrupted is set when the run was cancelled; the runs before it are kept.
	Interrupted bool `json:"interrupted,omitempty"`
	// Warnings are problems that did not stop the run (e.g. caches not dropped).
	Warnings []string `json:"warnings,omitempty"`
}

// StatsDelta is the difference of a mount's mountstats counters across a run.
type StatsDelta struct {
	// ServerReadBytes and ServerWriteBytes are the bytes read from and written to the
	// server (mountstats "bytes:" fields 5 and 6).
	ServerReadBytes  uint64 `json:"server_read_bytes"`
	ServerWriteBytes uint64 `json:"server_write_bytes"`
	// Retransmissions are RPC transmissions beyond one per request, over every op.
	Retransmissions uint64    `json:"retransmissions"`
	MajorTimeouts   uint64    `json:"major_timeouts"`
	Ops             []OpDelta `json:"ops,omitempty"`
}

// OpDelta is one NFS operation's change over a run.
type OpDelta struct {
	Op              string `json:"op"`
	Requests        uint64 `json:"requests"`
	Retransmissions uint64 `json:"retransmissions"`
	MajorTimeouts   uint64 `json:"major_timeouts"`
	Errors          uint64 `json:"errors"`
	// AvgRTTms is the mean time from transmission to reply; AvgExecms from queueing to
	// completion; AvgQueuems waiting for a slot.
	AvgRTTms   float64 `json:"avg_rtt_ms"`
	AvgExecms  float64 `json:"avg_exec_ms"`
	AvgQueuems float64 `json:"avg_queue_ms"`
}

// DiffStats returns after minus before. Counters that went backwards (the mount was
// replaced between the snapshots) make the delta meaningless, so nil is returned.
func DiffStats(before, after *inventory.Stats) *StatsDelta {
	if before == nil || after == nil {
		return nil
	}
	if after.Bytes.ReadTotal < before.Bytes.ReadTotal || after.Bytes.WriteTotal < before.Bytes.WriteTotal {
		return nil
	}
	d := &StatsDelta{
		ServerReadBytes:  after.Bytes.ReadTotal - before.Bytes.ReadTotal,
		ServerWriteBytes: after.Bytes.WriteTotal - before.Bytes.WriteTotal,
	}
	prev := map[string]procfs.NFSOperationStats{}
	for _, op := range before.Operations {
		prev[op.Operation] = op
	}
	for _, a := range after.Operations {
		b := prev[a.Operation]
		if a.Requests < b.Requests || a.Transmissions < b.Transmissions {
			return nil
		}
		req := a.Requests - b.Requests
		if req == 0 {
			continue
		}
		trans := a.Transmissions - b.Transmissions
		o := OpDelta{
			Op:            a.Operation,
			Requests:      req,
			MajorTimeouts: sub(a.MajorTimeouts, b.MajorTimeouts),
			Errors:        sub(a.Errors, b.Errors),
			AvgRTTms:      float64(sub(a.CumulativeTotalResponseMilliseconds, b.CumulativeTotalResponseMilliseconds)) / float64(req),
			AvgExecms:     float64(sub(a.CumulativeTotalRequestMilliseconds, b.CumulativeTotalRequestMilliseconds)) / float64(req),
			AvgQueuems:    float64(sub(a.CumulativeQueueMilliseconds, b.CumulativeQueueMilliseconds)) / float64(req),
		}
		if trans > req {
			o.Retransmissions = trans - req
		}
		d.Retransmissions += o.Retransmissions
		d.MajorTimeouts += o.MajorTimeouts
		d.Ops = append(d.Ops, o)
	}
	sort.Slice(d.Ops, func(i, j int) bool {
		if d.Ops[i].Requests != d.Ops[j].Requests {
			return d.Ops[i].Requests > d.Ops[j].Requests
		}
		return d.Ops[i].Op < d.Ops[j].Op
	})
	return d
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// TuningOf describes an NFS mount from the inventory.
func TuningOf(m *inventory.Mount, mountPoint string) *Tuning {
	t := &Tuning{
		MountPoint:  mountPoint,
		FSType:      m.FSType,
		Device:      m.Device,
		Server:      m.Server,
		Export:      m.Export,
		Version:     m.Version,
		Options:     m.Options,
		NConnect:    m.NConnect,
		Connections: m.Connections,
		RSize:       m.RSize,
		WSize:       m.WSize,
		Backend:     m.Backend,

		TransportSecurity: m.TransportSecurity,
	}
	if m.ReadAheadKB != nil {
		v := *m.ReadAheadKB
		t.ReadAheadKB = &v
	}
	return t
}

// ReadResult reads a result file written by bench run or bench sweep.
func ReadResult(path string) (*Result, error) {
	b, err := hostfs.ReadFile(path, hostfs.MaxSmall)
	if err != nil {
		return nil, fmt.Errorf("reading result: %w", err)
	}
	var r Result
	if err := strictyaml.Decode(path, b, &r, strictyaml.JSON); err != nil {
		return nil, fmt.Errorf("parsing result: %w", err)
	}
	if len(r.Runs) == 0 {
		return nil, fmt.Errorf("result %q has no runs", path)
	}
	return &r, nil
}
