// Package podio counts each cgroup's NFS I/O per superblock with eBPF, where the kernel
// counts only per superblock (mountstats): the bytes applications read and wrote, the
// faults on NFS-backed mappings (reads through mmap, which mountstats shows only as a
// remainder), and the READ and WRITE RPCs started in the cgroup's tasks, with their bytes
// and latency. The agent maps cgroups to pods (Attribute) and exports the sums.
//
// The programs are in bpf/podio.c, compiled by bpf2go into the committed podio_*_bpfel.o
// and their bindings (gen.go). The collector is opt-in: it needs BTF
// (/sys/kernel/btf/vmlinux), CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8),
// and tracefs; without them Load says why and the agent carries on without it.
package podio

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// LatencyBounds are the upper bounds, in seconds, of the RPC latency buckets bpf/podio.c
// counts (B0 to B5); a last bucket holds everything slower. From 1 ms, a fast cloud
// service's round trip, to 100 ms, a server in trouble.
var LatencyBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.1}

// LatencyBuckets is the number of buckets: one per bound and one above them all.
const LatencyBuckets = 7

// Key names one cgroup's I/O on one superblock.
type Key struct {
	// Cgroup is the cgroup v2 ID of the tasks (the inode number of its directory below
	// /sys/fs/cgroup).
	Cgroup uint64
	// Device is the superblock's device number, "major:minor" as mountinfo writes it.
	Device string
}

// Counters are cumulative since the collector was loaded.
type Counters struct {
	// ReadBytes and Reads are what read(2), readv(2), pread(2) and splice returned
	// (nfs_file_read), WriteBytes and Writes what write(2) and friends accepted
	// (nfs_file_write): the application's side.
	ReadBytes, Reads   uint64
	WriteBytes, Writes uint64
	// Faults are page faults on NFS-backed mappings that reached the filesystem's .fault
	// (filemap_fault: the faulting page was not ready in the page cache); MajorFaults
	// those that had to read the page in. MapFaults are the read faults that tried the
	// page cache first (filemap_map_pages, fault-around): on a kernel with fault-around
	// (the default), every read fault of a mapped reader, served from the cache or not.
	Faults, MajorFaults, MapFaults uint64
	// ReadRPCs and ServerReadBytes are the READs started in the cgroup's tasks (read(2),
	// read-ahead and faults alike) and the bytes the server returned for them;
	// FaultReadBytes is the part started inside a fault: reads through mmap.
	ReadRPCs, ServerReadBytes, FaultReadBytes uint64
	// WriteRPCs and ServerWriteBytes are the WRITEs started in the cgroup's tasks (a
	// flush on close or fsync, O_SYNC); writeback by the kernel's flusher threads runs
	// outside any pod and counts for the node (docs/agent.md).
	WriteRPCs, ServerWriteBytes uint64
	// ReadLatency and WriteLatency are the RPCs' times from start to reply.
	ReadLatency, WriteLatency Histogram
}

// Histogram counts RPCs by latency: Buckets[i] those at most LatencyBounds[i] seconds,
// not cumulative; the last those slower than every bound.
type Histogram struct {
	Buckets    [LatencyBuckets]uint64
	SumSeconds float64
}

// Count is the number of RPCs in h.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, b := range h.Buckets {
		n += b
	}
	return n
}

// Add adds o's counts to c.
func (c *Counters) Add(o Counters) {
	c.ReadBytes += o.ReadBytes
	c.Reads += o.Reads
	c.WriteBytes += o.WriteBytes
	c.Writes += o.Writes
	c.Faults += o.Faults
	c.MajorFaults += o.MajorFaults
	c.MapFaults += o.MapFaults
	c.ReadRPCs += o.ReadRPCs
	c.ServerReadBytes += o.ServerReadBytes
	c.FaultReadBytes += o.FaultReadBytes
	c.WriteRPCs += o.WriteRPCs
	c.ServerWriteBytes += o.ServerWriteBytes
	c.ReadLatency.add(o.ReadLatency)
	c.WriteLatency.add(o.WriteLatency)
}

func (h *Histogram) add(o Histogram) {
	for i := range h.Buckets {
		h.Buckets[i] += o.Buckets[i]
	}
	h.SumSeconds += o.SumSeconds
}

// Part is one group of hooks, loaded or not on its own.
type Part string

// The parts, each counting some of Counters' fields.
const (
	// PartFileIO is the kprobes on nfs_file_read and nfs_file_write: ReadBytes, Reads,
	// WriteBytes, Writes.
	PartFileIO Part = "file_io"
	// PartFaults is fentry/fexit on filemap_fault and fentry on filemap_map_pages: Faults,
	// MajorFaults, MapFaults, and which READs count in FaultReadBytes. It needs BPF trampolines (x86-64 from 5.5, arm64 from 6.0).
	PartFaults Part = "faults"
	// PartRPC is the nfs tracepoints: the RPC counts, bytes and latency.
	PartRPC Part = "rpc"
)

// A variant is one way of loading a part: its programs and how to attach them. Parts try
// their variants in order; the first that loads and attaches is the part's.
type variant struct {
	// name says which in Collector.Variants: "btf" (fexit, tp_btf: the nfs module's own
	// BTF, Linux 5.11 and later; no perf_event_open) or "perf" (kprobes and tracepoints).
	name     string
	programs []string
	// check, when set, says why the variant cannot run on this host before it is loaded.
	check  func(tracefs string) error
	attach func(prog func(string) *ebpf.Program) ([]link.Link, error)
}

var partVariants = map[Part][]variant{
	PartFileIO: {
		{name: "btf", programs: []string{podioProgNfsFileReadFexit, podioProgNfsFileWriteFexit},
			attach: tracing(podioProgNfsFileReadFexit, podioProgNfsFileWriteFexit)},
		{name: "perf", programs: []string{podioProgNfsFileReadEnter, podioProgNfsFileReadExit, podioProgNfsFileWriteEnter, podioProgNfsFileWriteExit},
			attach: func(prog func(string) *ebpf.Program) ([]link.Link, error) {
				return attachAll(
					func() (link.Link, error) { return link.Kprobe("nfs_file_read", prog(podioProgNfsFileReadEnter), nil) },
					func() (link.Link, error) { return link.Kretprobe("nfs_file_read", prog(podioProgNfsFileReadExit), nil) },
					func() (link.Link, error) { return link.Kprobe("nfs_file_write", prog(podioProgNfsFileWriteEnter), nil) },
					func() (link.Link, error) {
						return link.Kretprobe("nfs_file_write", prog(podioProgNfsFileWriteExit), nil)
					})
			}},
	},
	PartFaults: {
		{name: "btf", programs: []string{podioProgFilemapFaultEnter, podioProgFilemapFaultExit, podioProgFilemapMapPagesEnter},
			attach: tracing(podioProgFilemapFaultEnter, podioProgFilemapFaultExit, podioProgFilemapMapPagesEnter)},
	},
	PartRPC: {
		{name: "btf", programs: []string{podioProgNfsInitiateReadBtf, podioProgNfsReadpageDoneBtf, podioProgNfsInitiateWriteBtf, podioProgNfsWritebackDoneBtf},
			attach: tracing(podioProgNfsInitiateReadBtf, podioProgNfsReadpageDoneBtf, podioProgNfsInitiateWriteBtf, podioProgNfsWritebackDoneBtf)},
		{name: "perf", programs: []string{podioProgNfsInitiateRead, podioProgNfsReadpageDone, podioProgNfsInitiateWrite, podioProgNfsWritebackDone},
			check: checkTracepoints,
			attach: func(prog func(string) *ebpf.Program) ([]link.Link, error) {
				tp := func(name string) func() (link.Link, error) {
					return func() (link.Link, error) { return link.Tracepoint("nfs", name, prog(name), nil) }
				}
				return attachAll(tp("nfs_initiate_read"), tp("nfs_readpage_done"), tp("nfs_initiate_write"), tp("nfs_writeback_done"))
			}},
	},
}

// tracing attaches BTF-typed programs (fentry, fexit, tp_btf) to the targets their
// sections name.
func tracing(names ...string) func(func(string) *ebpf.Program) ([]link.Link, error) {
	return func(prog func(string) *ebpf.Program) ([]link.Link, error) {
		var fns []func() (link.Link, error)
		for _, n := range names {
			fns = append(fns, func() (link.Link, error) { return link.AttachTracing(link.TracingOptions{Program: prog(n)}) })
		}
		return attachAll(fns...)
	}
}

// attachAll attaches each in turn; on the first failure it detaches what it attached.
func attachAll(fns ...func() (link.Link, error)) ([]link.Link, error) {
	var links []link.Link
	for _, fn := range fns {
		l, err := fn()
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

// Parts lists every part in the order Load tries them.
var Parts = []Part{PartFileIO, PartFaults, PartRPC}

// Collector is the loaded programs and their maps.
type Collector struct {
	coll  *ebpf.Collection
	links []link.Link
	// Missing says, for each part that is not loaded, why; Variants, for each part that
	// is, which of its ways ("btf" or "perf").
	Missing  map[Part]string
	Variants map[Part]string
}

// ErrUnsupported wraps every reason the collector cannot run at all on this host.
var ErrUnsupported = errors.New("per-pod NFS I/O collector unavailable")

// Load loads and attaches the programs, tracefs the directory of the trace events
// (FindTracefs; only the perf variants need it). Each part tries its variants in order; a
// part none of whose variants loads (its hooks missing on this kernel, a tracepoint record
// laid out otherwise, a privilege missing) is left out and named in Missing with each
// variant's reason. Load fails, with an error wrapping ErrUnsupported, only when no part
// loads.
func Load(tracefs string) (*Collector, error) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux: %v)", ErrUnsupported, err)
	}
	if err := rlimit.RemoveMemlock(); err != nil { // kernels before 5.11 charge maps to RLIMIT_MEMLOCK
		return nil, fmt.Errorf("%w: raising RLIMIT_MEMLOCK: %v", ErrUnsupported, err)
	}
	c := &Collector{Missing: map[Part]string{}, Variants: map[Part]string{}}
	why := map[Part][]string{}
	dropped := map[string]bool{} // part/variant names left out
	drop := func(part Part, v variant, err error) {
		dropped[string(part)+"/"+v.name] = true
		why[part] = append(why[part], v.name+": "+permissionHint(err))
	}
	for _, part := range Parts {
		for _, v := range partVariants[part] {
			if v.check != nil {
				if err := v.check(tracefs); err != nil {
					drop(part, v, err)
				}
			}
		}
	}
	for {
		spec, err := loadPodio()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		for _, part := range Parts {
			for _, v := range partVariants[part] {
				if dropped[string(part)+"/"+v.name] {
					for _, name := range v.programs {
						delete(spec.Programs, name)
					}
				}
			}
		}
		if len(spec.Programs) == 0 {
			c.noteMissing(why)
			return nil, fmt.Errorf("%w: %s", ErrUnsupported, c.why())
		}
		coll, err := ebpf.NewCollection(spec)
		if err != nil {
			part, v, ok := failedVariant(err)
			if !ok || dropped[string(part)+"/"+v.name] {
				return nil, fmt.Errorf("%w: %s", ErrUnsupported, permissionHint(err))
			}
			drop(part, v, err)
			continue
		}
		c.coll = coll
		break
	}
	for _, part := range Parts {
		for _, v := range partVariants[part] {
			if dropped[string(part)+"/"+v.name] {
				continue
			}
			links, err := v.attach(func(name string) *ebpf.Program { return c.coll.Programs[name] })
			if err != nil {
				drop(part, v, err)
				continue
			}
			c.links = append(c.links, links...)
			c.Variants[part] = v.name
			break
		}
		if c.Variants[part] == "" {
			c.Missing[part] = strings.Join(why[part], "; ")
		}
	}
	if len(c.links) == 0 {
		c.coll.Close()
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, c.why())
	}
	return c, nil
}

// noteMissing records every part without a variant as missing, with its variants' reasons.
func (c *Collector) noteMissing(why map[Part][]string) {
	for _, part := range Parts {
		if c.Variants[part] == "" {
			c.Missing[part] = strings.Join(why[part], "; ")
		}
	}
}

// failedVariant names the part and variant whose program failed to load, from the error
// NewCollection returned ("program <name>: ...").
func failedVariant(err error) (Part, variant, bool) {
	msg := err.Error()
	for part, vs := range partVariants {
		for _, v := range vs {
			for _, name := range v.programs {
				if strings.Contains(msg, "program "+name+":") {
					return part, v, true
				}
			}
		}
	}
	return "", variant{}, false
}

// permissionHint adds what the collector needs to an error of missing privilege.
func permissionHint(err error) string {
	if errors.Is(err, os.ErrPermission) {
		return err.Error() + " (it needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN before Linux 5.8; perf events also CAP_SYS_ADMIN where kernel.perf_event_paranoid is above 2)"
	}
	return err.Error()
}

func (c *Collector) why() string {
	var parts []string
	for _, part := range Parts {
		if why := c.Missing[part]; why != "" {
			parts = append(parts, string(part)+": "+why)
		}
	}
	return strings.Join(parts, "; ")
}

// Close detaches the programs and frees the maps.
func (c *Collector) Close() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	c.coll.Close()
	return errors.Join(errs...)
}

// Read returns every cgroup's counters and the number of events the kernel side dropped
// because its table was full (a count since Load: nonzero means the figures are low).
func (c *Collector) Read() (map[Key]Counters, uint64, error) {
	out := map[Key]Counters{}
	var (
		k podioKey
		v podioCounters
	)
	it := c.coll.Maps[podioMapStats].Iterate()
	for it.Next(&k, &v) {
		out[Key{Cgroup: k.Cgroup, Device: deviceName(k.Dev)}] = counters(v)
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading the per-cgroup NFS counters: %w", err)
	}
	var dropped uint64
	if err := c.coll.Maps[podioMapDropped].Lookup(uint32(0), &dropped); err != nil {
		return nil, 0, fmt.Errorf("reading the dropped count: %w", err)
	}
	return out, dropped, nil
}

// Forget deletes the counters of cgroups that are gone, so that the table keeps room for
// live ones. An ID is never reused while the host runs (kernfs node IDs are 64-bit and
// only grow), so a cgroup that went cannot come back.
func (c *Collector) Forget(cgroups []uint64) error {
	gone := make(map[uint64]bool, len(cgroups))
	for _, id := range cgroups {
		gone[id] = true
	}
	m := c.coll.Maps[podioMapStats]
	var (
		k    podioKey
		v    podioCounters
		keys []podioKey
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		if gone[k.Cgroup] {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	var errs []error
	for _, key := range keys {
		if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deviceName writes a kernel dev_t (major << 20 | minor, include/linux/kdev_t.h) as
// mountinfo does.
func deviceName(dev uint32) string {
	return fmt.Sprintf("%d:%d", dev>>20, dev&(1<<20-1))
}

func counters(v podioCounters) Counters {
	c := Counters{
		ReadBytes: v.ReadBytes, Reads: v.Reads, WriteBytes: v.WriteBytes, Writes: v.Writes,
		Faults: v.Faults, MajorFaults: v.MajorFaults, MapFaults: v.MapFaults,
		ReadRPCs: v.ReadRpcs, ServerReadBytes: v.ServerReadBytes, FaultReadBytes: v.FaultReadBytes,
		WriteRPCs: v.WriteRpcs, ServerWriteBytes: v.ServerWriteBytes,
		ReadLatency:  Histogram{Buckets: v.ReadBuckets, SumSeconds: float64(v.ReadLatencyNs) / 1e9},
		WriteLatency: Histogram{Buckets: v.WriteBuckets, SumSeconds: float64(v.WriteLatencyNs) / 1e9},
	}
	return c
}
