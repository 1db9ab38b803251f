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
