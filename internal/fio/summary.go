package fio

// Summary condenses one fio run into the figures nfstune reports.
type Summary struct {
	// ReadBytesPerSec and WriteBytesPerSec are summed over every job entry.
	ReadBytesPerSec  float64
	WriteBytesPerSec float64
	// ReadIOPS and WriteIOPS are summed over every job entry. For the metadata engines
	// (filecreate, filestat, filedelete) they count files created, stat'ed or deleted
	// per second, the latency sample count over the run time.
	ReadIOPS  float64
	WriteIOPS float64
	// LatP50NS and LatP99NS are in nanoseconds, taken from the direction that did the
	// most operations. With several job entries (no group_reporting) P50 is the mean
	// of the entries' medians weighted by their sample counts and P99 is the worst
	// entry's, which never understates the tail.
	LatP50NS  float64
	LatP99NS  float64
	LatMeanNS float64
	// LatSource is "lat_ns" (submission plus completion) or "clat_ns" (completion only,
	// used when fio recorded no total-latency percentiles).
	LatSource string
	// AllP50NS and AllP99NS are the same figures over both directions of every entry: for
	// a mix of operations run together, where the busiest direction alone would hide the
	// tail of the other (small writes among stats and reads).
	AllP50NS float64
	AllP99NS float64
	// Entries is the number of entries in "jobs".
	Entries int
	// Errors counts entries with a non-zero error.
	Errors int
}

// metadataEngines report operation counts through the latency samples: their io_bytes,
// total_ios and iops come from the file size bookkeeping, not from real I/O.
var metadataEngines = map[string]bool{"filecreate": true, "filestat": true, "filedelete": true}

// IsMetadataEngine reports whether engine is a file-operation engine without data I/O.
func IsMetadataEngine(engine string) bool { return metadataEngines[engine] }

type latAcc struct {
	ops         int64
	p50Weighted float64
	meanWeight  float64
	p99         float64
	source      string
}

// Summarize aggregates the job entries of o.
func Summarize(o *Output) Summary {
	var s Summary
	var rd, wr, all latAcc
	for i := range o.Jobs {
		j := &o.Jobs[i]
		s.Entries++
		if j.Error != 0 {
			s.Errors++
		}
		engine, _ := o.Option(j, "ioengine")
		meta := IsMetadataEngine(engine)
		s.ReadBytesPerSec += bytesPerSec(j.Read, meta)
		s.WriteBytesPerSec += bytesPerSec(j.Write, meta)
		s.ReadIOPS += iops(j.Read, meta)
		s.WriteIOPS += iops(j.Write, meta)
		rd.add(j.Read)
		wr.add(j.Write)
		all.add(j.Read)
		all.add(j.Write)
	}
	best := rd
	if wr.ops > rd.ops {
		best = wr
	}
	if best.ops > 0 {
		s.LatP50NS = best.p50Weighted / float64(best.ops)
		s.LatMeanNS = best.meanWeight / float64(best.ops)
		s.LatP99NS = best.p99
		s.LatSource = best.source
	}
	if all.ops > 0 {
		s.AllP50NS = all.p50Weighted / float64(all.ops)
		s.AllP99NS = all.p99
	}
	return s
}

func (a *latAcc) add(d Direction) {
	l, src := d.Lat, "lat_ns"
	if l.N == 0 || len(l.Percentiles) == 0 {
		l, src = d.CLat, "clat_ns"
	}
	if l.N == 0 {
		return
	}
	p50, ok50 := l.Percentile(50)
	p99, ok99 := l.Percentile(99)
	if !ok50 || !ok99 {
		return
	}
	a.ops += l.N
	a.p50Weighted += p50 * float64(l.N)
	a.meanWeight += l.Mean * float64(l.N)
	if p99 > a.p99 {
		a.p99 = p99
	}
	if a.source == "" || src == "clat_ns" {
		a.source = src
	}
}

func bytesPerSec(d Direction, meta bool) float64 {
	if meta {
		return 0
	}
	if d.BWBytes > 0 {
		return float64(d.BWBytes)
	}
	return float64(d.BWKiB) * 1024 // fio before 3.0 had no bw_bytes
}

func iops(d Direction, meta bool) float64 {
	if !meta {
		return d.IOPS
	}
	if d.Runtime <= 0 {
		return 0
	}
	return float64(d.CLat.N) / (float64(d.Runtime) / 1000)
}
