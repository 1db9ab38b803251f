package readahead

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/nfstune/nfstune/internal/podcgroup"
)

// Class is the kind of a mount's read traffic over an interval, as its mountstats, the
// cgroup counters of the pods that use it and, where it runs, the per-pod collector tell it.
type Class string

// The classes, a fixed set: label values of nfstune_mount_readahead_traffic_class.
const (
	// StreamingRead is read(2) (or O_DIRECT) reading files in order: READs as large as
	// read-ahead makes them.
	StreamingRead Class = "streaming_read"
	// RandomRead is read(2) at scattered offsets: small READs that no window changes
	// ("standalone, small random read", mm/readahead.c).
	RandomRead Class = "random_read"
	// MappedRandom is reading through mmap at scattered offsets: the per-pod collector saw
	// the faults bring in more than MappedRandomOverRead times what they touched
	// (FaultEvidence), or, without it, the kernel gave up reading around the faults
	// (mm/filemap.c, do_sync_mmap_readahead, MMAP_LOTSAMISS) and reads single pages. Before
	// that, each fault reads the whole window around itself, in order or not, and without
	// the collector mmap reading in order cannot be told from it: both are Unknown.
	MappedRandom Class = "mapped_random"
	// MappedSequential is reading through mmap in order (a model or an index loaded
	// whole): the per-pod collector saw the faults touch what they brought in.
	MappedSequential Class = "mapped_sequential"
	// Thrashing is a memory-limited pod whose page cache keeps losing pages it reads again:
	// what read-ahead brings in pushes out what the pod still needs.
	Thrashing Class = "thrashing"
	// Mixed is a mount whose pods' traffic falls in different classes (per pod, each has
	// its own).
	Mixed Class = "mixed"
	// Unknown is too little traffic to tell, or traffic the counters cannot tell apart (a
	// pod's cgroup could not be read; mmap reads in whole windows).
	Unknown Class = "unknown"
)

// Classes lists every Class.
var Classes = []Class{StreamingRead, RandomRead, MappedRandom, MappedSequential, Thrashing, Mixed, Unknown}

// The classifier's thresholds (docs/agent.md, "Read traffic classes"). Each comment names
// the kernel source whose behaviour the rule relies on; the values are judgement, to be
// checked against measurements before any read-ahead decision is built on a class.
const (
	// MinClassifyBytes is the server READ payload an interval needs before its traffic is
	// classified: the controller's MinStepBytes, below which a mount is idle or nearly so.
	MinClassifyBytes = MinStepBytes
	// ThrashRefaultShare is the share of the server READ payload that must be refaults of
	// the pod's file pages (memory.stat workingset_refault_file, pages evicted and read
	// again while their shadow entry still remembered them: mm/workingset.c) before its
	// cache counts as thrashing: a quarter of what it reads is what it had and lost.
	ThrashRefaultShare = 0.25
	// ThrashMemoryStall is the share of the interval some of the pod's tasks waited for
	// memory (memory.pressure "some" total; Documentation/accounting/psi.rst) that, with
	// refaults, says the cache loss costs the pod time: a tenth.
	ThrashMemoryStall = 0.10
	// MinRandomMajorFaults is the major faults (FaultEvidence.MajorFaults) that, with an
	// over-read above MappedRandomOverRead, class a pod MappedRandom although its own READ
	// payload is below MinClassifyBytes. A fault that finds its page nowhere in the page
	// cache reads the window around itself (mm/filemap.c, filemap_fault and
	// do_sync_mmap_readahead). A reader in order takes one such fault where it starts, and
	// reads on in faults that find their pages: the next window is read when it reaches the
	// marker page a quarter of a window before the end (do_async_mmap_readahead). Until it
	// has mapped a quarter of its first window its over-read is above MappedRandomOverRead
	// too, but over that one major fault; a reader at random takes one at each page it
	// misses. A count of read faults cannot stand in: with the over-read above
	// MappedRandomOverRead, 64 read faults already start MinClassifyBytes, and a reader in
	// order within the first quarter of a 15 MiB window (NFS's default with a 1 MiB rsize)
	// can have taken up to 60. Four leaves room for a few readers in order starting on the
	// superblock in one pod within one interval.
	MinRandomMajorFaults = 4
	// RandomMissShare is the share of a pod's faults that reach filemap_fault (those
	// fault-around could not serve: FaultEvidence.FilemapFaults) that are major faults, at
	// or above which it reads a mapped file at random whatever the window: a reader at
	// random misses the page cache at nearly every access it has not made before, while a
	// reader in order finds its next pages in the cache or in flight, read ahead from the
	// marker page (mm/filemap.c, do_async_mmap_readahead), and misses only where it starts
	// or outruns them. Unlike the over-read, the share does not fall when the window is
	// lowered to what the faults touch, so a pod's class does not flip once the controller
	// has fitted the window to it. A half lies between the two.
	RandomMissShare = 0.5
	// MinUnseenMajorFaults is the major faults over an interval (memory.stat pgmajfault) at
	// which a pod without the per-pod collector's fault figures counts as reading through
	// mmap, or swapping, on files nothing names (PodClass.UnseenMajorFaults): read(2) takes
	// no major faults, and a pod's shell and program take a handful as they start
	// (docs/lab-notes/2026-12-03-pod-traffic-classes.md), while a reader of a mapped file
	// takes one at each miss of the page cache. The controller's MinStepMajorFaults.
	MinUnseenMajorFaults = MinStepMajorFaults
)

// faultsAtRandom reports whether faults read a mapped file at random, over at least
// MinRandomMajorFaults misses of the page cache: they fetch more than MappedRandomOverRead
// times what they map, or a RandomMissShare or more of them miss.
func faultsAtRandom(f *FaultEvidence) bool {
	if f == nil || f.MajorFaults < MinRandomMajorFaults {
		return false
	}
	return f.OverRead() > MappedRandomOverRead || f.MissesAtRandom()
}

// randomWhy is the reason the faults f read at random, for a class's why.
func randomWhy(f *FaultEvidence) string {
	return fmt.Sprintf("%d of its %d faults past fault-around missed the page cache, and its %d read faults started %s of READs, %.1f times the 64 KiB each maps",
		f.MajorFaults, f.FilemapFaults, f.Faults, mib(f.ReadBytes), f.OverRead())
}

// PodActivity is one pod's cgroup counters over an interval: the differences of two
// podcgroup.Counters samples (PodBetween). Seen is false when its cgroup could not be read
// in either sample; the rest is then zero.
type PodActivity struct {
	UID  string `json:"uid"`
	Seen bool   `json:"seen"`
	// Seconds is the length of the interval.
	Seconds float64 `json:"seconds"`
	// MajorFaults is the rise of memory.stat pgmajfault: faults that read a page in, from
	// any file or swap.
	MajorFaults uint64 `json:"major_faults"`
	// RefaultedFileBytes is the rise of workingset_refault_file, in bytes.
	RefaultedFileBytes uint64 `json:"refaulted_file_bytes"`
	// LimitEvents is the rise of memory.events high, max and oom together.
	LimitEvents uint64 `json:"limit_events"`
	// Limited is set when the pod has a memory.max.
	Limited bool `json:"limited"`
	// MemoryStall and IOStall are the shares of the interval (0 to 1) some of the pod's
	// tasks waited for memory and for I/O (the PSI "some" totals); 0 without PSI.
	MemoryStall float64 `json:"memory_stall"`
	IOStall     float64 `json:"io_stall"`
	// Faults is what the pod's page faults on this mount did over the interval, from the
	// per-pod collector; nil without it.
	Faults *FaultEvidence `json:"faults,omitempty"`
	// Reads is the pod's own read traffic on this mount over the interval, from the per-pod
	// collector; nil without it (or without its read(2) or RPC counts).
	Reads *PodReads `json:"reads,omitempty"`
}

// PodReads is what mountstats counts for a whole superblock, counted for one pod's tasks
// by the per-pod collector (package podio): the READs started in them and what read(2)
// returned to them, over an interval.
type PodReads struct {
	// ServerReadBytes is the READ payload of the READs the pod's tasks started: their
	// read(2) misses, their read-ahead and their page faults.
	ServerReadBytes uint64 `json:"server_read_bytes"`
	// AppReadBytes is what read(2) and its kin returned to the pod's tasks.
	AppReadBytes uint64 `json:"app_read_bytes"`
	// Reads is the number of those READs.
	Reads uint64 `json:"reads"`
}

// PodBetween returns pod uid's activity between prev, a sample taken elapsed earlier, and
// cur; pageBytes is the size of a page (os.Getpagesize), the unit of
// workingset_refault_file. A nil sample (the cgroup could not be read) gives an activity
// not Seen. A counter lower in cur than in prev counts as no rise.
func PodBetween(uid string, prev, cur *podcgroup.Counters, elapsed time.Duration, pageBytes int) PodActivity {
	a := PodActivity{UID: uid, Seconds: elapsed.Seconds()}
	if prev == nil || cur == nil {
		return a
	}
	a.Seen = true
	a.Limited = cur.Limited()
	a.MajorFaults = delta(cur.PgMajFault, prev.PgMajFault)
	a.RefaultedFileBytes = delta(cur.WorkingsetRefaultFile, prev.WorkingsetRefaultFile) * uint64(pageBytes)
	a.LimitEvents = delta(cur.EventsHigh, prev.EventsHigh) + delta(cur.EventsMax, prev.EventsMax) +
		delta(cur.EventsOOM, prev.EventsOOM)
	a.MemoryStall = stall(prev.Memory, cur.Memory, a.Seconds)
	a.IOStall = stall(prev.IO, cur.IO, a.Seconds)
	return a
}

// stall is the share of seconds some tasks were stalled between two samples of a pressure
// file: the rise of its "some" total (microseconds). Without PSI in either sample it is 0.
func stall(prev, cur *podcgroup.PSI, seconds float64) float64 {
	if prev == nil || cur == nil || seconds <= 0 {
		return 0
	}
	return float64(delta(cur.Some.TotalMicrosec, prev.Some.TotalMicrosec)) / 1e6 / seconds
}

// Classification is a mount's class over an interval and each of its pods'.
type Classification struct {
	Class Class  `json:"class"`
	Why   string `json:"why"`
	// Pods holds one class per pod, sorted by UID.
	Pods []PodClass `json:"pods,omitempty"`
}

// PodClass is one pod's class on a mount.
type PodClass struct {
	UID   string `json:"uid"`
	Class Class  `json:"class"`
	Why   string `json:"why"`
	// UnseenMajorFaults is the pod's major faults over the interval (its cgroup's
	// pgmajfault, from any file or swap) when there are MinUnseenMajorFaults or more and the
	// per-pod collector has no fault figures to say on which files and in what order: the
	// pod reads through mmap, or swaps, where mountstats cannot set its reads apart from the
	// superblock's. 0 otherwise.
	UnseenMajorFaults uint64 `json:"unseen_major_faults,omitempty"`
}

// Classify returns the class of a mount's traffic over an interval, e its evidence, and of
// each pod in pods (the pods that use it, with their activity over the same interval).
//
// mountstats counts per superblock, not per pod, so without the per-pod collector every pod
// of a mount shares its read(2) and mmap figures; what sets a pod apart is its own cgroup:
// its refaults, limit events and stalls (thrashing), and its major faults (reading through
// mmap, or swapping: Unknown, with PodClass.UnseenMajorFaults). Those count all of a pod's
// files, not only this mount's. With the collector's figures (PodActivity.Reads, .Faults)
// each pod is classified by its own traffic instead.
//
// A mount without pods (a host mount) is classified from mountstats alone. A mount with
// pods takes their class when they all agree, and is Mixed when they do not (an
// unreadable pod's Unknown included: what cannot be seen is not assumed alike). A pod
// whose own figures show too little traffic is left out: it was seen, and says nothing of
// the mount's traffic; when every pod is, the mount is Unknown as they are.
func Classify(e Evidence, pods []PodActivity) Classification {
	if len(pods) == 0 {
		c, why := classify(mountFacts(e, nil))
		return Classification{Class: c, Why: why}
	}
	out := Classification{}
	var reading []PodClass // the pods not left out
	for _, p := range slices.SortedFunc(slices.Values(pods), func(a, b PodActivity) int { return cmp.Compare(a.UID, b.UID) }) {
		f := mountFacts(e, &p)
		c, why := classify(f)
		pc := PodClass{UID: p.UID, Class: c, Why: why}
		if f.faultsUnseen() {
			pc.UnseenMajorFaults = f.majorFaults
		}
		out.Pods = append(out.Pods, pc)
		if c != Unknown || !f.own || f.enough {
			reading = append(reading, out.Pods[len(out.Pods)-1])
		}
	}
	if len(reading) == 0 {
		reading = out.Pods
	}
	out.Class, out.Why = reading[0].Class, reading[0].Why
	for _, p := range reading[1:] {
		if p.Class != out.Class {
			out.Class, out.Why = Mixed, fmt.Sprintf("its %d pods' traffic differs", len(reading))
			if idle := len(out.Pods) - len(reading); idle > 0 {
				out.Why += fmt.Sprintf(" (%d more with too little traffic of their own)", idle)
			}
			break
		}
	}
	return out
}

// trafficFacts are what the decision table reads: one mount's interval, seen from one of
// its pods or from the mount alone.
type trafficFacts struct {
	serverBytes, appBytes uint64
	own                   bool // the READ figures are the pod's own (PodActivity.Reads)
	enough                bool // serverBytes >= MinClassifyBytes
	mapped                bool // most READ payload was not read(2)'s (Evidence.Mapped's rule)
	fullREADs             bool // READs as large as read-ahead makes them (Evidence.Streaming)
	avgREAD               float64

	pod     bool // seen from a pod
	podSeen bool // its cgroup was read

	limited      bool
	refaultShare float64 // refaulted file bytes / server READ payload
	limitEvents  uint64
	memoryStall  float64
	majorFaults  uint64 // the pod's cgroup's, from any file or swap

	// faults is the pod's own page faults on the mount, else (without its own READ
	// figures) the mount's, from the per-pod collector; nil without it.
	faults *FaultEvidence
}

// mountFacts gathers the facts of e, seen from pod p (nil: from the mount alone). A pod with
// its own READ figures (PodActivity.Reads) is seen by them instead of the mount's, so that
// a pod with little traffic of its own does not take the class of the others' traffic on
// the superblock.
func mountFacts(e Evidence, p *PodActivity) trafficFacts {
	own := p != nil && p.Reads != nil
	if own {
		e = podEvidence(e, *p.Reads)
	}
	f := trafficFacts{
		serverBytes: e.ServerReadBytes,
		appBytes:    e.AppReadBytes,
		enough:      e.ServerReadBytes >= MinClassifyBytes,
		mapped:      e.mappedOver(MinClassifyBytes),
		fullREADs:   e.Streaming(),
		avgREAD:     e.AvgReadBytes,
		faults:      e.Faults,
	}
	if p == nil {
		return f
	}
	if p.Faults != nil || own {
		f.faults = p.Faults
	}
	f.own = own
	f.pod, f.podSeen = true, p.Seen
	f.limited, f.limitEvents, f.memoryStall, f.majorFaults = p.Limited, p.LimitEvents, p.MemoryStall, p.MajorFaults
	if e.ServerReadBytes > 0 {
		f.refaultShare = float64(p.RefaultedFileBytes) / float64(e.ServerReadBytes)
	}
	return f
}

// faultsUnseen reports whether the pod takes MinUnseenMajorFaults major faults or more by its
// cgroup while the per-pod collector has neither fault figures nor READ figures of its own
// for it (with those, the READ payload read(2) did not return is its own remainder): it
// reads through mmap, or swaps, on files nothing names.
func (f trafficFacts) faultsUnseen() bool {
	return f.pod && f.podSeen && !f.own && f.faults == nil && f.majorFaults >= MinUnseenMajorFaults
}

// podEvidence is e with the pod's own READ figures r in place of the superblock's. rsize
// and read_ahead_kb stay e's: they are the superblock's settings, the same for every pod,
// and what a READ of read-ahead's size is measured against (Evidence.Streaming). The faults
// are the caller's to set. The READs' round trips are the superblock's only, so the
// figures derived from them are left out.
func podEvidence(e Evidence, r PodReads) Evidence {
	own := Evidence{Seconds: e.Seconds, ReadAheadKB: e.ReadAheadKB, RSize: e.RSize,
		AppReadBytes: r.AppReadBytes, ServerReadBytes: r.ServerReadBytes, Reads: r.Reads}
	own.derive()
	return own
}

// classify is the decision table: the first row whose conditions hold gives the class.
// The rows read in the order a person would check them: is there enough to go on (or, with
// little, do the faults show reading at random plainly), can the pod be seen, is its cache
// thrashing (which matters whatever the access pattern), then mmap before read(2), since
// mmap reads hide in the READ payload: first what the per-pod collector saw the faults do
// (which needs no cgroup), then what the READ figures show without it, and, where they show
// read(2), whether the pod's cgroup says it faults on files nothing names.
func classify(f trafficFacts) (Class, string) {
	mapped := delta(f.serverBytes, f.appBytes)
	whose := ""
	if f.own {
		whose = " of its own"
	}
	switch {
	case !f.enough && faultsAtRandom(f.faults):
		return MappedRandom, fmt.Sprintf("little traffic%s (%s of READ payload), but faults at random: %s", whose, mib(f.serverBytes), randomWhy(f.faults))
	case !f.enough:
		return Unknown, fmt.Sprintf("too little traffic%s: %s of READ payload, %s needed", whose, mib(f.serverBytes), mib(MinClassifyBytes))
	case f.pod && f.podSeen && f.limited && f.refaultShare >= ThrashRefaultShare && (f.limitEvents > 0 || f.memoryStall >= ThrashMemoryStall):
		return Thrashing, fmt.Sprintf("memory-limited; refaulted file pages %.0f %% of the READ payload, %d limit events, memory stall %.0f %% of the time",
			100*f.refaultShare, f.limitEvents, 100*f.memoryStall)
	case f.faults != nil && f.faults.Random(MinClassifyBytes):
		return MappedRandom, fmt.Sprintf("page faults started %s of READs, %.1f times the 64 KiB each of their %d read faults maps: the window around each fault is mostly evicted unused",
			mib(f.faults.ReadBytes), f.faults.OverRead(), f.faults.Faults)
	case faultsAtRandom(f.faults):
		return MappedRandom, "faults at random: " + randomWhy(f.faults)
	case f.faults != nil && f.faults.ReadBytes >= MinClassifyBytes:
		return MappedSequential, fmt.Sprintf("page faults started %s of READs, %.1f times the 64 KiB each of their %d read faults maps: the faults use what they bring in",
			mib(f.faults.ReadBytes), f.faults.OverRead(), f.faults.Faults)
	case f.pod && !f.podSeen:
		return Unknown, "the pod's cgroup could not be read"
	case f.mapped && !f.fullREADs:
		return MappedRandom, fmt.Sprintf("%s read through mmap in READs of %.0f KiB: faults read single pages or small windows",
			mib(mapped), f.avgREAD/1024)
	case f.mapped:
		// A fault reads the window around itself whether the reader goes in order or
		// not, so the READs look alike; and a pod's pgmajfault does not tell them apart
		// either: on a 6.1 kernel an in-order mmap reader took more major faults per byte
		// than a random one (docs/lab-notes/2026-12-03-pod-traffic-classes.md).
		return Unknown, fmt.Sprintf("%s read through mmap in whole windows: in order and at random look alike in mountstats and the pod's major faults", mib(mapped))
	case f.faultsUnseen():
		// Its READs hide among the superblock's: the streaming class would be the other
		// pods', and a mapped reader's waste does not show under their read(2) bytes.
		return Unknown, fmt.Sprintf("the superblock's READs are read(2)'s, but the pod took %d major faults (its cgroup's pgmajfault, from any file or swap): it reads through mmap, or swaps, and without the per-pod collector neither its share of the READs nor its order can be told",
			f.majorFaults)
	case f.fullREADs:
		return StreamingRead, fmt.Sprintf("%s read(2) in READs of %.0f KiB, as large as read-ahead makes them", mib(f.appBytes), f.avgREAD/1024)
	}
	return RandomRead, fmt.Sprintf("%s read(2) in READs of %.0f KiB, smaller than read-ahead's", mib(f.appBytes), f.avgREAD/1024)
}
