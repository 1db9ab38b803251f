package readahead

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podcgroup"
)

// The classifier is fed two samples of the counters a node shows, 10 s apart: a mount's
// mountstats (read(2) bytes, READ payload, READs) and the cgroup counters of its pods.
const classifyInterval = 10 * time.Second

// pageBytes is the page size the tests count refaults in.
const pageBytes = 4096

// nfsSample is the mountstats counters of one sample.
type nfsSample struct {
	appMiB, serverMiB, reads uint64
}

// evidence measures a mount with 1 MiB rsize and read-ahead raKB between two samples.
func evidence(raKB int, prev, cur nfsSample) Evidence {
	stats := func(s nfsSample, age time.Duration) *inventory.Stats {
		return &inventory.Stats{
			Age:   age,
			Bytes: procfs.NFSBytesStats{Read: s.appMiB << 20, ReadTotal: s.serverMiB << 20},
			Operations: []procfs.NFSOperationStats{
				{Operation: "READ", Requests: s.reads, CumulativeTotalResponseMilliseconds: 2 * s.reads},
			},
		}
	}
	m := &inventory.Mount{RSize: 1 << 20, ReadAheadKB: &raKB, Stats: stats(cur, time.Hour+classifyInterval)}
	return Measure(m, stats(prev, time.Hour), classifyInterval)
}

// cgroupSample is the counters of one pod cgroup sample that the classifier reads.
type cgroupSample struct {
	majFaults, refaultPages, limitEvents uint64
	memStallSeconds                      float64
	limitMiB                             uint64 // 0: no memory.max
}

func (s cgroupSample) counters() *podcgroup.Counters {
	c := &podcgroup.Counters{
		PgMajFault:            s.majFaults,
		WorkingsetRefaultFile: s.refaultPages,
		EventsMax:             s.limitEvents,
	}
	c.Memory = &podcgroup.PSI{Some: podcgroup.Pressure{TotalMicrosec: uint64(s.memStallSeconds * 1e6)}}
	if s.limitMiB > 0 {
		limit := s.limitMiB << 20
		c.MemoryMaxBytes = &limit
	}
	return c
}

func pod(uid string, prev, cur cgroupSample) PodActivity {
	return PodBetween(uid, prev.counters(), cur.counters(), classifyInterval, pageBytes)
}

// withFaults gives a pod the per-pod collector's fault figures: readBytes of READs started in
// its faults, over faults read faults.
func withFaults(p PodActivity, readBytes, faults uint64) PodActivity {
	p.Faults = &FaultEvidence{ReadBytes: readBytes, Faults: faults}
	return p
}

func withMountFaults(e Evidence, readBytes, faults uint64) Evidence {
	e.Faults = &FaultEvidence{ReadBytes: readBytes, Faults: faults}
	return e
}

// A pod that reads without memory trouble: a few faults of its own binaries, no refaults.
func quietPod(uid string) PodActivity {
	return pod(uid, cgroupSample{majFaults: 100}, cgroupSample{majFaults: 110})
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		e    Evidence
		pods []PodActivity
		want Class
	}{
		// read(2) of whole files: 800 MiB read, 800 MiB fetched in 800 READs of 1 MiB.
		{"streaming read(2)", evidence(1024, nfsSample{1000, 1000, 1000}, nfsSample{1800, 1800, 1800}),
			[]PodActivity{quietPod("a")}, StreamingRead},
		// read(2) of 16 KiB at random: 64 MiB in 4096 READs of 16 KiB.
		{"random read(2)", evidence(1024, nfsSample{500, 500, 9000}, nfsSample{564, 564, 9000 + 4096}),
			[]PodActivity{quietPod("a")}, RandomRead},
		// mmap of a model file read in order, and of a database read at random: 2 GiB and
		// 512 MiB fetched in READs of 1 MiB, no read(2) bytes. A fault reads the window
		// around itself either way, so the two cannot be told apart.
		{"mmap in whole windows, in order", evidence(1024, nfsSample{10, 100, 100}, nfsSample{10, 2148, 2148}),
			[]PodActivity{pod("a", cgroupSample{majFaults: 50}, cgroupSample{majFaults: 66})}, Unknown},
		{"mmap in whole windows, at random", evidence(1024, nfsSample{10, 100, 100}, nfsSample{10, 612, 612}),
			[]PodActivity{pod("a", cgroupSample{majFaults: 50}, cgroupSample{majFaults: 50 + 512})}, Unknown},
		// The same two with the per-pod collector: the model's 2048 MiB of fault READs took
		// 32768 read faults, 64 KiB each; the database's 512 MiB took 512 faults of 16 KiB
		// each, a 1 MiB window read around each.
		{"mmap in whole windows, in order, faults seen", evidence(1024, nfsSample{10, 100, 100}, nfsSample{10, 2148, 2148}),
			[]PodActivity{withFaults(pod("a", cgroupSample{majFaults: 50}, cgroupSample{majFaults: 66}), 2048<<20, 32768)}, MappedSequential},
		{"mmap in whole windows, at random, faults seen", evidence(1024, nfsSample{10, 100, 100}, nfsSample{10, 612, 612}),
			[]PodActivity{withFaults(pod("a", cgroupSample{majFaults: 50}, cgroupSample{majFaults: 50 + 512}), 512<<20, 512)}, MappedRandom},
		// A host mount (no pods) with the collector: the mount's own fault evidence.
		{"host mount through mmap at random, faults seen", withMountFaults(evidence(15360, nfsSample{0, 0, 0}, nfsSample{0, 800, 800}), 800<<20, 400), nil, MappedRandom},
		// A pod reading read(2) beside the collector's figures of few faults: streaming.
		{"streaming read(2), a few faults of its binaries", evidence(1024, nfsSample{1000, 1000, 1000}, nfsSample{1800, 1800, 1800}),
			[]PodActivity{withFaults(quietPod("a"), 2<<20, 40)}, StreamingRead},
		// The same after MMAP_LOTSAMISS: faults read single pages, 64 MiB in 16384 READs.
		{"mmap random, single pages", evidence(1024, nfsSample{10, 100, 100}, nfsSample{10, 164, 100 + 16384}),
			[]PodActivity{pod("a", cgroupSample{majFaults: 50}, cgroupSample{majFaults: 50 + 16384})}, MappedRandom},
		// A pod at its 64 MiB limit streaming 400 MiB, of which 200 MiB are pages it had
		// cached and lost; the limit is hit and it waits for memory a third of the time.
		{"thrashing", evidence(15360, nfsSample{1000, 1000, 1000}, nfsSample{1400, 1400, 1400}),
			[]PodActivity{pod("a",
				cgroupSample{majFaults: 10, refaultPages: 1000, limitEvents: 40, memStallSeconds: 5, limitMiB: 64},
				cgroupSample{majFaults: 10, refaultPages: 1000 + 200<<20/pageBytes, limitEvents: 90, memStallSeconds: 8.3, limitMiB: 64})},
			Thrashing},
		// Edges.
		{"host mount streaming, no pods", evidence(1024, nfsSample{0, 0, 0}, nfsSample{800, 800, 800}), nil, StreamingRead},
		{"host mount through mmap, no pods: cannot tell", evidence(1024, nfsSample{0, 0, 0}, nfsSample{0, 800, 800}), nil, Unknown},
		{"too little traffic", evidence(1024, nfsSample{1000, 1000, 1000}, nfsSample{1008, 1008, 1008}),
			[]PodActivity{quietPod("a")}, Unknown},
		{"unreadable cgroup", evidence(1024, nfsSample{1000, 1000, 1000}, nfsSample{1800, 1800, 1800}),
			[]PodActivity{PodBetween("a", nil, (cgroupSample{}).counters(), classifyInterval, pageBytes)}, Unknown},
		{"pods disagree: one thrashing, one not", evidence(15360, nfsSample{1000, 1000, 1000}, nfsSample{1400, 1400, 1400}),
			[]PodActivity{quietPod("b"), pod("a",
				cgroupSample{limitMiB: 64},
				cgroupSample{refaultPages: 200 << 20 / pageBytes, limitEvents: 50, limitMiB: 64})},
			Mixed},
		// Refaults without a limit are the node's reclaim, not the pod's limit.
		{"refaults without a limit", evidence(15360, nfsSample{1000, 1000, 1000}, nfsSample{1400, 1400, 1400}),
			[]PodActivity{pod("a", cgroupSample{}, cgroupSample{refaultPages: 200 << 20 / pageBytes, memStallSeconds: 5})},
			StreamingRead},
		// A limited pod that refaults a little (under a quarter of its reads) is not thrashing.
		{"limited, few refaults", evidence(1024, nfsSample{1000, 1000, 1000}, nfsSample{1400, 1400, 1400}),
			[]PodActivity{pod("a", cgroupSample{limitMiB: 64}, cgroupSample{refaultPages: 50 << 20 / pageBytes, limitEvents: 50, limitMiB: 64})},
			StreamingRead},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Classify(tt.e, tt.pods)
			if got.Class != tt.want {
				t.Errorf("Classify = %s (%s), want %s; pods %+v", got.Class, got.Why, tt.want, got.Pods)
			}
			if got.Why == "" || len(got.Pods) != len(tt.pods) {
				t.Errorf("Classify = %+v: want a reason and one class per pod", got)
			}
		})
	}
}

// TestClassifyPods checks the per-pod answers of a mount the pods disagree on: each pod
// keeps its own class, sorted by UID, and the mount's reason says they differ.
func TestClassifyPods(t *testing.T) {
	t.Parallel()
	e := evidence(15360, nfsSample{1000, 1000, 1000}, nfsSample{1400, 1400, 1400})
	got := Classify(e, []PodActivity{
		quietPod("b"),
		pod("a", cgroupSample{limitMiB: 64}, cgroupSample{refaultPages: 200 << 20 / pageBytes, limitEvents: 50, limitMiB: 64}),
		PodBetween("c", (cgroupSample{}).counters(), nil, classifyInterval, pageBytes),
	})
	want := []PodClass{{UID: "a", Class: Thrashing}, {UID: "b", Class: StreamingRead}, {UID: "c", Class: Unknown}}
	if got.Class != Mixed || !strings.Contains(got.Why, "3 pods") || len(got.Pods) != len(want) {
		t.Fatalf("Classify = %+v, want mixed over 3 pods", got)
	}
	for i, w := range want {
		if got.Pods[i].UID != w.UID || got.Pods[i].Class != w.Class {
			t.Errorf("pod %d = %+v, want %s %s", i, got.Pods[i], w.UID, w.Class)
		}
	}
}

// TestPodBetweenCountersBack: a counter lower in the later sample (a recreated cgroup)
// counts as no rise, not as a wrapped huge one.
func TestPodBetweenCountersBack(t *testing.T) {
	t.Parallel()
	a := pod("a", cgroupSample{majFaults: 500, refaultPages: 500, memStallSeconds: 9},
		cgroupSample{majFaults: 10, refaultPages: 10, memStallSeconds: 1})
	if !a.Seen || a.MajorFaults != 0 || a.RefaultedFileBytes != 0 || a.MemoryStall != 0 {
		t.Errorf("PodBetween = %+v, want zero rises", a)
	}
}

// ownReads gives a pod the per-pod collector's READ figures: serverMiB of READ payload in
// reads READs started in its tasks, appMiB returned to its read(2)s.
func ownReads(p PodActivity, serverMiB, appMiB, reads uint64) PodActivity {
	p.Reads = &PodReads{ServerReadBytes: serverMiB << 20, AppReadBytes: appMiB << 20, Reads: reads}
	return p
}

// ownFaults gives a pod the per-pod collector's fault figures: readMiB of READs started in
// faults read faults, as on a kernel without fault-around each reaching filemap_fault,
// majors of which found their page nowhere in the page cache.
func ownFaults(p PodActivity, readMiB, faults, majors uint64) PodActivity {
	p.Faults = &FaultEvidence{ReadBytes: readMiB << 20, Faults: faults, MajorFaults: majors, FilemapFaults: faults}
	return p
}

// TestClassifySharedSuperblock: two pods on one superblock, each classified by its own
// figures when the per-pod collector has them; a pod with too little traffic of its own is
// left out of the superblock's class. Over 10 s at a 2048 KiB window, pod b's 16
// readers stream 800 MiB with read(2) in READs of 1 MiB, and pod e reads 16 KiB at random
// offsets through mmap: 5 faults, each a major one that reads the 2 MiB window around it, 10
// MiB in READs of 1 MiB, 32 times the 64 KiB each fault maps. The superblock's own figures
// are b's: 810 MiB fetched for 800 MiB read(2) in 810 READs of 1 MiB.
func TestClassifySharedSuperblock(t *testing.T) {
	t.Parallel()
	g := evidence(2048, nfsSample{1000, 1000, 1000}, nfsSample{1800, 1810, 1810})
	b := ownFaults(ownReads(quietPod("b"), 800, 800, 800), 0, 0, 0)
	e := ownFaults(ownReads(quietPod("e"), 10, 0, 10), 10, 5, 5)
	for _, tt := range []struct {
		name  string
		ev    Evidence
		pods  []PodActivity
		mount Class
		want  map[string]Class
	}{
		{"each pod by its own figures", g, []PodActivity{b, e},
			Mixed, map[string]Class{"b": StreamingRead, "e": MappedRandom}},
		// Without the collector both pods have the superblock's figures only, as before.
		{"no collector: the superblock's figures", g, []PodActivity{quietPod("b"), quietPod("e")},
			StreamingRead, map[string]Class{"b": StreamingRead, "e": StreamingRead}},
		// Faults without the pod's READ and read(2) counts (a part of the collector not
		// loaded): the superblock's figures are enough, and the pod's own faults, each a miss
		// fetching 32 times what it maps, say it reads a mapped file at random.
		{"e's faults without its READ figures", g, []PodActivity{b, ownFaults(quietPod("e"), 10, 5, 5)},
			Mixed, map[string]Class{"b": StreamingRead, "e": MappedRandom}},
		// One reader in order that has just started on a file it opened at 15360 KiB: its
		// first fault read the window, and 20 read faults have used 1.25 MiB of it, an
		// over-read of 12 over a single major fault. Too little to tell, not random.
		{"e starting to read in order", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 15, 0, 15), 15, 20, 1)},
			StreamingRead, map[string]Class{"b": StreamingRead, "e": Unknown}},
		// Reading slowly in order: 2 MiB in 32 read faults, each used whole.
		{"e reading little in order", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 2, 0, 2), 2, 32, 1)},
			StreamingRead, map[string]Class{"b": StreamingRead, "e": Unknown}},
		// Random faults, but only 3 major ones: not enough to tell them from readers in order
		// starting.
		{"e with few major faults", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 6, 0, 6), 6, 3, 3)},
			StreamingRead, map[string]Class{"b": StreamingRead, "e": Unknown}},
		// e once the window fits it (160 KiB): its faults fetch less than they map, but
		// 450 of its 500 faults missed the cache, little traffic or much.
		{"e at a window that fits it", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 8, 0, 8), 8, 500, 450)},
			Mixed, map[string]Class{"b": StreamingRead, "e": MappedRandom}},
		{"e at a window that fits it, busier", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 40, 0, 40), 40, 2500, 2250)},
			Mixed, map[string]Class{"b": StreamingRead, "e": MappedRandom}},
		// A reader in order at a small window: an eighth of its faults missed, where it
		// outran the read-ahead.
		{"e reading in order at a small window", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 20, 0, 20), 20, 320, 40)},
			Mixed, map[string]Class{"b": StreamingRead, "e": MappedSequential}},
		// A pod that reads nothing of its own (it writes, or idles) no longer takes b's class,
		// and is left out of the superblock's: b's alone.
		{"e reads nothing", g, []PodActivity{b, ownFaults(ownReads(quietPod("e"), 0, 0, 0), 0, 0, 0)},
			StreamingRead, map[string]Class{"b": StreamingRead, "e": Unknown}},
		// The superblock's average READ is small (b's 800 READs of 1 MiB among e's 4096 of
		// 16 KiB read(2)s): each pod's own READs tell b streaming and e random.
		{"random read(2) beside streaming", evidence(1024, nfsSample{1000, 1000, 1000}, nfsSample{1864, 1864, 1000 + 4896}),
			[]PodActivity{b, ownFaults(ownReads(quietPod("e"), 64, 64, 4096), 0, 0, 0)},
			Mixed, map[string]Class{"b": StreamingRead, "e": RandomRead}},
		// Pod a at its 64 MiB limit streams 200 MiB, of which 100 MiB are pages it had and
		// lost: half its own READ payload, though a fourteenth of the superblock's 1400 MiB.
		{"thrashing by its own READ payload", evidence(15360, nfsSample{1000, 1000, 1000}, nfsSample{2400, 2400, 2400}),
			[]PodActivity{ownFaults(ownReads(quietPod("b"), 1200, 1200, 1200), 0, 0, 0),
				ownFaults(ownReads(pod("a", cgroupSample{limitMiB: 64}, cgroupSample{refaultPages: 100 << 20 / pageBytes, limitEvents: 50, limitMiB: 64}),
					200, 200, 200), 0, 0, 0)},
			Mixed, map[string]Class{"a": Thrashing, "b": StreamingRead}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Classify(tt.ev, tt.pods)
			if got.Class != tt.mount || len(got.Pods) != len(tt.want) {
				t.Errorf("Classify = %s (%s) over %d pods, want %s over %d", got.Class, got.Why, len(got.Pods), tt.mount, len(tt.want))
			}
			for _, p := range got.Pods {
				if p.Class != tt.want[p.UID] || p.Why == "" {
					t.Errorf("pod %s = %s (%s), want %s with a reason", p.UID, p.Class, p.Why, tt.want[p.UID])
				}
			}
		})
	}
}

// TestClassifyUnseenFaults: without the per-pod collector, a pod whose cgroup takes
// MinUnseenMajorFaults major faults or more on a superblock whose READs are read(2)'s is not
// given the streaming class of the other pod's bytes: it reads through mmap (or swaps) where
// nothing places it, and says how many. The collector's figures, fault or READ, place it.
func TestClassifyUnseenFaults(t *testing.T) {
	t.Parallel()
	g := evidence(2048, nfsSample{1000, 1000, 1000}, nfsSample{1800, 1810, 1810})
	b := quietPod("b")
	faulting := func(majors uint64) PodActivity {
		return pod("e", cgroupSample{majFaults: 100, limitMiB: 64}, cgroupSample{majFaults: 100 + majors, limitMiB: 64})
	}
	for _, tt := range []struct {
		name   string
		e      PodActivity
		mount  Class
		class  Class
		unseen uint64
	}{
		{"e faulting, no collector", faulting(400), Mixed, Unknown, 400},
		{"e at the threshold", faulting(MinUnseenMajorFaults), Mixed, Unknown, MinUnseenMajorFaults},
		{"e below it: a program starting", faulting(MinUnseenMajorFaults - 1), StreamingRead, StreamingRead, 0},
		{"the collector places e's faults", ownFaults(faulting(400), 10, 5, 5), Mixed, MappedRandom, 0},
		{"e's own READs, no fault figures", ownReads(faulting(400), 0, 0, 0), StreamingRead, Unknown, 0},
		{"e's cgroup unreadable", PodActivity{UID: "e"}, Mixed, Unknown, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Classify(g, []PodActivity{b, tt.e})
			if got.Class != tt.mount || len(got.Pods) != 2 {
				t.Fatalf("Classify = %s (%s) over %d pods, want %s over 2", got.Class, got.Why, len(got.Pods), tt.mount)
			}
			if pb := got.Pods[0]; pb.Class != StreamingRead || pb.UnseenMajorFaults != 0 {
				t.Errorf("pod b = %s with %d unseen major faults (%s), want streaming_read with none", pb.Class, pb.UnseenMajorFaults, pb.Why)
			}
			if pe := got.Pods[1]; pe.Class != tt.class || pe.UnseenMajorFaults != tt.unseen {
				t.Errorf("pod e = %s with %d unseen major faults (%s), want %s with %d", pe.Class, pe.UnseenMajorFaults, pe.Why, tt.class, tt.unseen)
			}
		})
	}
}

// TestClassifyIdlePods: pods whose own figures show too little traffic are left out of the
// superblock's class, but not out of a disagreement's count; when all are, it is Unknown.
func TestClassifyIdlePods(t *testing.T) {
	t.Parallel()
	e := evidence(2048, nfsSample{1000, 1000, 1000}, nfsSample{1800, 1810, 1810})
	idle := func(uid string) PodActivity { return ownFaults(ownReads(quietPod(uid), 0, 0, 0), 0, 0, 0) }
	if got := Classify(e, []PodActivity{idle("a"), idle("b")}); got.Class != Unknown || !strings.Contains(got.Why, "too little traffic of its own") {
		t.Errorf("all idle: Classify = %s (%s), want unknown for too little traffic", got.Class, got.Why)
	}
	streaming := ownFaults(ownReads(quietPod("s"), 800, 800, 800), 0, 0, 0)
	random := ownFaults(ownReads(quietPod("r"), 10, 0, 10), 10, 5, 5)
	got := Classify(e, []PodActivity{idle("a"), streaming, random})
	if got.Class != Mixed || !strings.Contains(got.Why, "2 pods") || !strings.Contains(got.Why, "1 more") || len(got.Pods) != 3 {
		t.Errorf("Classify = %+v, want mixed over 2 pods, 1 more idle", got)
	}
}
