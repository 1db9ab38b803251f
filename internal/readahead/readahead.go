// Package readahead measures, from a superblock's own mountstats counters, whether its
// read-ahead pays: how many of the bytes the server sent the applications read (over-read),
// whether the read-ahead window is what bounds the READs in flight (window-bound), and, for a
// change of read_ahead_kb, whether the mount's traffic after it is better than before
// (Judge). It reads nothing: it works on two samples of inventory.Stats, so that audit,
// metrics, tune and the agent compute the same figures the same way.
//
// The counters come from fs/nfs/iostat.h and fs/nfs/super.c nfs_show_stats
// (/proc/self/mountstats): the bytes: line's normal, direct and server read bytes, the
// events: line's vfsreadpage and vfsreadpages, and the READ and READ_PLUS rows of the
// per-op statistics (operations, cumulative RTT in milliseconds).
package readahead

import (
	"strings"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
)

// Thresholds of the figures, justified where they are used (docs/policy.md, NFS003 and
// NFS004).
const (
	// WastefulOverRead is the over-read above which read-ahead wastes: a third of the bytes
	// the server sent were never read. A sequential reader whose pages stay in memory reads
	// each fetched page once (about 1.0); the tail past where a reader stops is at most one
	// window per open file, which MinWasteBytes keeps small. Readers whose windows do not fit
	// their memory (16 readers in a 64 MiB cgroup at 15360 KiB) fetch several times what
	// they read (docs/benchmarks.md).
	WastefulOverRead = 1.5
	// MinWasteBytes is the server READ payload a mount must have received before its
	// over-read is judged: 256 MiB is 17 windows of the largest default read-ahead
	// (15 x 1 MiB rsize), so the overshoot of one stream's last window adds at most 6 %.
	MinWasteBytes = 256 << 20
	// MappedOverRead is the over-read above which most of what the server sent was not
	// read with read(2) but through mmap, whose reads are not application bytes: read(2)
	// readers that waste stay well below it, and a mount read through mmap alone has no
	// application bytes at all (docs/benchmarks.md, scenario e).
	MappedOverRead = 10
	// WindowBoundAt is the ratio of READs in flight to READs one window allows at and above
	// which the window bounds the reader. A window-limited stream cannot keep the whole
	// window in flight all the time: the kernel starts the next asynchronous batch only when
	// the reader reaches the marker page of the current one, and RTT counts the server's
	// time too; 0.75 leaves a quarter for those gaps. With several streams each has its own
	// window, so the ratio counts busy windows and may exceed 1.
	WindowBoundAt = 0.75
	// MinWindowReads is the READs a two-sample window must hold before it is judged
	// window-bound: fewer is a few files opened, not a reader.
	MinWindowReads = 100
	// FaultAroundBytes is what one read fault on a mapped file maps at most from the page
	// cache (mm/memory.c, fault_around_bytes, 64 KiB by default): what a mapped reader that
	// goes in order uses of each of its faults.
	FaultAroundBytes = 64 << 10
	// MappedRandomOverRead is the mapped over-read (FaultEvidence.OverRead) above which
	// mapped readers' faults bring in much more than they touch: their accesses are
	// scattered, and most of the read-ahead window each fault reads around itself
	// (mm/filemap.c, do_sync_mmap_readahead) is evicted unused. Readers that go in order
	// touch the whole window, near 1; a reader of 16 KiB at random offsets reaches the
	// window over 64 KiB. 4 leaves readers in order a margin for the window past the end of
	// what they read.
	MappedRandomOverRead = 4
	// MappedFloorKB is the least read-ahead the adaptive controller sets for mapped random
	// readers: the kernel's default (mm/readahead.c, VM_READAHEAD_PAGES). It is below one
	// rsize, the floor for read(2) readers, because a fault's READs are as large as the
	// window around it, not the reader's request.
	MappedFloorKB = 128
)

// FaultEvidence is what the page faults of a superblock's mapped readers did over an
// interval, from the per-pod collector (package podio), summed over the cgroups that read
// the superblock: the READ payload their faults started, and their read faults.
type FaultEvidence struct {
	// ReadBytes is the READ payload started inside page faults.
	ReadBytes uint64 `json:"read_bytes"`
	// Faults are the read faults: calls of the mapping's .map_pages (each read fault
	// tries the page cache there first), or of .fault on a kernel without fault-around.
	Faults uint64 `json:"faults"`
	// MajorFaults are the faults that found their page nowhere in the page cache
	// (filemap_fault's VM_FAULT_MAJOR): each reads the window around itself
	// (do_sync_mmap_readahead, mm/filemap.c), or a single page once the kernel has stopped
	// reading around the mapping's faults (MMAP_LOTSAMISS, VM_RAND_READ).
	MajorFaults uint64 `json:"major_faults"`
	// FilemapFaults are the calls of the mapping's .fault (filemap_fault): the read faults
	// fault-around could not serve from pages already in the cache. MajorFaults are those
	// of them that found their page nowhere in it.
	FilemapFaults uint64 `json:"filemap_faults"`
}

// MissShare is the share of the faults that reached filemap_fault that found their page
// nowhere in the page cache; 0 without such faults.
func (f FaultEvidence) MissShare() float64 {
	if f.FilemapFaults == 0 {
		return 0
	}
	return float64(f.MajorFaults) / float64(f.FilemapFaults)
}

// OverRead is the READ payload the faults started per FaultAroundBytes of read faults; 0
// without faults.
func (f FaultEvidence) OverRead() float64 {
	if f.Faults == 0 {
		return 0
	}
	return float64(f.ReadBytes) / float64(f.Faults*FaultAroundBytes)
}

// readPerMajorKB is the READ payload the faults started per major fault, in KiB: the
// window the faulting readers' files read around a miss; 0 without major faults.
func (f FaultEvidence) readPerMajorKB() float64 {
	if f.MajorFaults == 0 {
		return 0
	}
	return float64(f.ReadBytes) / float64(f.MajorFaults) / 1024
}

// Random reports whether the faults read at scattered offsets through a window too large
// for them, over at least minBytes of READ payload.
func (f FaultEvidence) Random(minBytes uint64) bool {
	return f.ReadBytes >= minBytes && f.OverRead() > MappedRandomOverRead
}

// MissesAtRandom reports whether the faults read a mapped file at random whatever the
// window: MinRandomMajorFaults or more of them found their page nowhere in the page cache,
// a RandomMissShare or more of those that reached filemap_fault.
func (f FaultEvidence) MissesAtRandom() bool {
	return f.MajorFaults >= MinRandomMajorFaults && f.MissShare() >= RandomMissShare
}

// Evidence is one superblock's read traffic over an interval: the counters' differences,
// and the figures derived from them (zero when undefined, e.g. OverRead without application
// reads).
type Evidence struct {
	// Seconds is the length of the interval; SinceMount is set when it runs from the mount
	// (no earlier sample, or the counters went backwards because the device number was
	// reused).
	Seconds    float64 `json:"seconds"`
	SinceMount bool    `json:"since_mount"`
	// ReadAheadKB is read_ahead_kb at the end of the interval; RSize the mount's rsize.
	ReadAheadKB int `json:"read_ahead_kb"`
	RSize       int `json:"rsize"`
	// AppReadBytes are the bytes applications read with read(2): the bytes: line's normal
	// and direct read bytes (fields 1 and 3). Reads of mmap'd files are not counted here.
	AppReadBytes uint64 `json:"app_read_bytes"`
	// ServerReadBytes are the READ payload bytes the server sent (bytes: field 5).
	ServerReadBytes uint64 `json:"server_read_bytes"`
	// Reads and ReadRTTSeconds are the READ operations completed and their summed round
	// trip times (per-op statistics, READ and READ_PLUS rows); zero when the per-op rows
	// were not read.
	Reads          uint64  `json:"reads"`
	ReadRTTSeconds float64 `json:"read_rtt_seconds"`
	// ReadPageEvents counts pages read one at a time (events: vfsreadpage, ->read_folio):
	// pages read-ahead did not bring in, because it is off or could not allocate them under
	// memory pressure. ReadaheadEvents counts read-ahead batches (vfsreadpages,
	// ->readahead). Both are shown as they are; no threshold uses them.
	ReadPageEvents  uint64 `json:"readpage_events"`
	ReadaheadEvents uint64 `json:"readahead_events"`
	// Opens counts files opened on the superblock (events: vfsopen). Each open file copies
	// the superblock's read-ahead when it is opened (mm/readahead.c file_ra_state_init), so a
	// change reaches only files opened after it: with no open in an interval, the interval's
	// reads all ran at windows set before it.
	Opens uint64 `json:"opens"`
	// OpensCounted says whether the mount's protocol counts file opens in vfsopen: NFSv2
	// and v3 do (fs/nfs/file.c nfs_file_open); NFSv4 opens a file in atomic_open or
	// nfs4_file_open (fs/nfs/dir.c, fs/nfs/nfs4file.c), which leave the counter alone, and
	// there it counts only directory opens (nfs_opendir). Without it, no interval can be
	// told to have had no opens.
	OpensCounted bool `json:"opens_counted"`
	// Faults is what the mapped readers' page faults did, from the per-pod collector (agent
	// --pod-io); nil without it.
	Faults *FaultEvidence `json:"faults,omitempty"`
	// FaultsUnseen is set when the per-pod collector runs but has no fault figures for the
	// interval: it loaded during it, or could not be read at one of its ends. The mapped
	// readers' first misses would be unseen then.
	FaultsUnseen bool `json:"faults_unseen,omitempty"`
	// Thrashing is set when a pod that uses the mount was classified Thrashing over the last
	// interval the agent classified (Classify, from the pods' cgroup counters): its page cache
	// keeps losing what read-ahead brings in.
	Thrashing bool `json:"thrashing,omitempty"`
	// UnseenMajorFaults is the major faults of the pods that use the mount whose faults
	// nothing places (PodClass.UnseenMajorFaults), summed, over the last interval the agent
	// classified: pods reading through mmap, or swapping, without the per-pod collector.
	UnseenMajorFaults uint64 `json:"unseen_major_faults,omitempty"`

	// OverRead is ServerReadBytes / AppReadBytes: above 1, read-ahead fetched pages that
	// were evicted or never read; below 1, reads were served from the page cache.
	OverRead float64 `json:"over_read"`
	// AvgReadBytes is ServerReadBytes / Reads, the payload of an average READ.
	AvgReadBytes float64 `json:"avg_read_bytes"`
	// InFlight is the average number of READs outstanding: READs per second times their
	// average RTT, which is ReadRTTSeconds / Seconds (Little's law).
	InFlight float64 `json:"reads_in_flight"`
	// WindowReads is how many READs of AvgReadBytes one read-ahead window keeps in flight:
	// ReadAheadKB x 1024 / AvgReadBytes.
	WindowReads float64 `json:"window_reads"`
	// WindowBound is InFlight / WindowReads: near 1 (WindowBoundAt) the read-ahead window is
	// what limits a sequential reader.
	WindowBound float64 `json:"window_bound"`
	// AppBytesPerSecond is AppReadBytes / Seconds: what the applications got.
	AppBytesPerSecond float64 `json:"app_read_bytes_per_second"`
}

// noOpens reports whether the interval is known to have had no file opened: its protocol
// counts opens (OpensCounted) and it counted none.
func (e Evidence) noOpens() bool { return e.OpensCounted && e.Opens == 0 }

// Measure returns the evidence of mount m between prev, a sample of its statistics taken
// elapsed earlier, and m.Stats now. With prev nil, or counters lower than prev's (the device
// number now names another superblock), it measures since the mount. m.Stats must not be nil.
func Measure(m *inventory.Mount, prev *inventory.Stats, elapsed time.Duration) Evidence {
	cur := m.Stats
	e := Evidence{RSize: m.RSize, Seconds: elapsed.Seconds()}
	if m.ReadAheadKB != nil {
		e.ReadAheadKB = *m.ReadAheadKB
	}
	if prev == nil || wentBack(prev, cur) {
		prev = &inventory.Stats{}
		e.Seconds, e.SinceMount = cur.Age.Seconds(), true
	}
	e.AppReadBytes = delta(cur.Bytes.Read, prev.Bytes.Read) + delta(cur.Bytes.DirectRead, prev.Bytes.DirectRead)
	e.ServerReadBytes = delta(cur.Bytes.ReadTotal, prev.Bytes.ReadTotal)
	e.ReadPageEvents = delta(cur.Events.VFSReadPage, prev.Events.VFSReadPage)
	e.ReadaheadEvents = delta(cur.Events.VFSReadPages, prev.Events.VFSReadPages)
	e.Opens = delta(cur.Events.VFSOpen, prev.Events.VFSOpen)
	e.OpensCounted = !strings.HasPrefix(m.Version, "4")
	reads, rttMS := readRow(cur)
	preads, prttMS := readRow(prev)
	e.Reads = delta(reads, preads)
	e.ReadRTTSeconds = float64(delta(rttMS, prttMS)) / 1000
	e.derive()
	return e
}

// combine returns the evidence of two consecutive intervals, a then b, as one: their
// counters summed over both lengths, the read-ahead and rsize at b's end.
func combine(a, b Evidence) Evidence {
	e := Evidence{
		Seconds:         a.Seconds + b.Seconds,
		SinceMount:      a.SinceMount,
		ReadAheadKB:     b.ReadAheadKB,
		RSize:           b.RSize,
		AppReadBytes:    a.AppReadBytes + b.AppReadBytes,
		ServerReadBytes: a.ServerReadBytes + b.ServerReadBytes,
		Reads:           a.Reads + b.Reads,
		ReadRTTSeconds:  a.ReadRTTSeconds + b.ReadRTTSeconds,
		ReadPageEvents:  a.ReadPageEvents + b.ReadPageEvents,
		ReadaheadEvents: a.ReadaheadEvents + b.ReadaheadEvents,
		Opens:           a.Opens + b.Opens,
		OpensCounted:    a.OpensCounted && b.OpensCounted,
		FaultsUnseen:    a.FaultsUnseen || b.FaultsUnseen,
	}
	if a.Faults != nil && b.Faults != nil {
		e.Faults = &FaultEvidence{ReadBytes: a.Faults.ReadBytes + b.Faults.ReadBytes, Faults: a.Faults.Faults + b.Faults.Faults,
			MajorFaults: a.Faults.MajorFaults + b.Faults.MajorFaults, FilemapFaults: a.Faults.FilemapFaults + b.Faults.FilemapFaults}
	}
	e.derive()
	return e
}

// derive fills in the figures computed from the counters.
func (e *Evidence) derive() {
	if e.AppReadBytes > 0 {
		e.OverRead = float64(e.ServerReadBytes) / float64(e.AppReadBytes)
	}
	if e.Reads > 0 {
		e.AvgReadBytes = float64(e.ServerReadBytes) / float64(e.Reads)
	}
	if e.Seconds > 0 {
		e.InFlight = e.ReadRTTSeconds / e.Seconds
		e.AppBytesPerSecond = float64(e.AppReadBytes) / e.Seconds
	}
	if e.AvgReadBytes > 0 && e.ReadAheadKB > 0 {
		e.WindowReads = float64(e.ReadAheadKB) * 1024 / e.AvgReadBytes
		e.WindowBound = e.InFlight / e.WindowReads
	}
}

// Wasteful reports whether read-ahead fetched much more than the applications read, over
// enough traffic to tell (WastefulOverRead, MinWasteBytes), and the reads were read(2)'s
// (not Mapped).
func (e Evidence) Wasteful() bool {
	return e.ServerReadBytes >= MinWasteBytes && e.OverRead > WastefulOverRead && !e.Mapped()
}

// Mapped reports whether, over enough traffic to tell (MinWasteBytes), most of the READ
// payload was not read with read(2) (MappedOverRead, or no application bytes at all): the
// files are read through mmap, where a page fault reads the whole window around itself,
// and what the readers used is not in mountstats.
func (e Evidence) Mapped() bool { return e.mappedOver(MinWasteBytes) }

// mappedOver is Mapped over at least minBytes of READ payload.
func (e Evidence) mappedOver(minBytes uint64) bool {
	return e.ServerReadBytes >= minBytes && (e.AppReadBytes == 0 || e.OverRead > MappedOverRead)
}

// mappedMisses reports whether the per-pod collector saw mapped readers of the superblock
// fault pages in from the server in the interval: MinRandomMajorFaults or more faults that
// found their page nowhere in the page cache, whatever their pattern. It is the first sign
// of a mapped reader, intervals before its READ payload or its pod's refaults are enough
// to classify it; false without the collector.
func (e Evidence) mappedMisses() bool {
	return e.Faults != nil && e.Faults.MajorFaults >= MinRandomMajorFaults
}

// Limiting reports whether the read-ahead window bounds the READs in flight, over enough
// READs to tell, while read-ahead does not waste: raising a window whose pages are thrown
// away would only throw away more. The READs must be read-ahead's (Streaming): random
// readers keep one READ in flight per request whatever the window, so 16 readers of 16 KiB
// fill two windows of 128 KiB without the window limiting anything.
func (e Evidence) Limiting() bool {
	return e.Reads >= MinWindowReads && e.Streaming() && e.WindowBound >= WindowBoundAt && e.OverRead <= WastefulOverRead
}

// readRow returns the operations and cumulative RTT in milliseconds of the READ and
// READ_PLUS rows together: an NFSv4.2 client reads with READ_PLUS when the server offers it
// (Linux 6.4 and later; fs/nfs/nfs42proc.c), and falls back to READ when it does not.
func readRow(s *inventory.Stats) (ops, rttMS uint64) {
	for i := range s.Operations {
		if op := &s.Operations[i]; op.Operation == "READ" || op.Operation == "READ_PLUS" {
			ops += op.Requests
			rttMS += op.CumulativeTotalResponseMilliseconds
		}
	}
	return ops, rttMS
}

// wentBack reports whether a counter is lower in cur than in prev.
func wentBack(prev, cur *inventory.Stats) bool {
	return cur.Age < prev.Age || cur.Bytes.ReadTotal < prev.Bytes.ReadTotal ||
		cur.Bytes.Read < prev.Bytes.Read || cur.Bytes.DirectRead < prev.Bytes.DirectRead
}

func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

// Between returns the evidence of every mount of cur that has statistics, by device,
// measured against the same device's statistics in prev, taken elapsed earlier (Measure:
// since the mount when prev lacks the device). prev may be nil.
func Between(prev, cur *inventory.Inventory, elapsed time.Duration) map[string]Evidence {
	old := make(map[string]*inventory.Stats)
	if prev != nil {
		for i := range prev.Mounts {
			if s := prev.Mounts[i].Stats; s != nil {
				old[prev.Mounts[i].Device] = s
			}
		}
	}
	out := make(map[string]Evidence, len(cur.Mounts))
	for i := range cur.Mounts {
		if m := &cur.Mounts[i]; m.Stats != nil {
			out[m.Device] = Measure(m, old[m.Device], elapsed)
		}
	}
	return out
}
