package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/readahead"
)

const (
	trafficPod     = "0f3c2a4e-1b2d-4c5e-8f90-a1b2c3d4e5f6"
	trafficOther   = "11111111-2222-3333-4444-555555555555"
	trafficPodDir  = "kubepods/burstable/pod" + trafficPod
	trafficVolPath = "/var/lib/kubelet/pods/" + trafficPod + "/volumes/kubernetes.io~nfs/data"
	otherVolPath   = "/var/lib/kubelet/pods/" + trafficOther + "/volumes/kubernetes.io~nfs/data"
)

// writeCgroup writes the pod's cgroup files: a 64 MiB limit, refaultPages pages refaulted,
// limitEvents at the limit and stallSeconds waiting for memory.
func writeCgroup(t *testing.T, root hostfs.Root, refaultPages, limitEvents int, stallSeconds float64) {
	t.Helper()
	dir := root.Sys("fs", "cgroup", trafficPodDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	us := int(stallSeconds * 1e6)
	for name, text := range map[string]string{
		"memory.stat":     "file 60000000\nfile_mapped 0\nworkingset_refault_file " + strconv.Itoa(refaultPages) + "\npgmajfault 10\n",
		"memory.events":   "low 0\nhigh 0\nmax " + strconv.Itoa(limitEvents) + "\noom 0\n",
		"memory.max":      "67108864\n",
		"memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + strconv.Itoa(us) + "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"io.pressure":     "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// streamingInventory is one superblock mounted into both pods, after appMiB read with
// read(2) and fetched in READs of 1 MiB, at 15360 KiB read-ahead.
func streamingInventory(age time.Duration, appMiB uint64) *inventory.Inventory {
	ra := 15360
	return &inventory.Inventory{Mounts: []inventory.Mount{{
		Device: "0:60", MountPoints: []string{trafficVolPath, otherVolPath}, RSize: 1 << 20, ReadAheadKB: &ra,
		Stats: &inventory.Stats{Age: age,
			Bytes:      procfs.NFSBytesStats{Read: appMiB << 20, ReadTotal: appMiB << 20},
			Operations: []procfs.NFSOperationStats{{Operation: "READ", Requests: appMiB, CumulativeTotalResponseMilliseconds: appMiB}}},
	}}}
}

// TestTrafficClasses feeds the agent's classifier two samples 30 s apart: the mount
// streams 400 MiB, the pod with a cgroup refaults half of it at its limit (thrashing), and
// the other pod's cgroup cannot be read (unknown): the mount is mixed. A sample sooner
// than MinTrafficInterval keeps the classes; a superblock that goes loses its class.
func TestTrafficClasses(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	tc := newTrafficClasses(root)
	tc.pageBytes = 4096
	t0 := time.Unix(1_800_000_000, 0)

	writeCgroup(t, root, 1000, 5, 1)
	tc.observe(streamingInventory(time.Hour, 1000), nil, t0)
	if got := tc.latest(); len(got) != 0 {
		t.Fatalf("classes after one sample = %v, want none", got)
	}

	writeCgroup(t, root, 1000+200<<20/4096, 60, 4)
	tc.observe(streamingInventory(time.Hour+30*time.Second, 1400), nil, t0.Add(30*time.Second))
	got := tc.latest()["0:60"]
	if got.Class != readahead.Mixed || len(got.Pods) != 2 ||
		got.Pods[0] != (readahead.PodClass{UID: trafficPod, Class: readahead.Thrashing, Why: got.Pods[0].Why}) ||
		got.Pods[1].UID != trafficOther || got.Pods[1].Class != readahead.Unknown {
		t.Fatalf("classes = %+v, want mixed: %s thrashing, %s unknown", got, trafficPod, trafficOther)
	}

	tc.observe(streamingInventory(time.Hour+31*time.Second, 1401), nil, t0.Add(31*time.Second))
	if again := tc.latest()["0:60"]; again.Class != readahead.Mixed {
		t.Errorf("a sample 1 s later changed the class to %+v", again)
	}

	tc.observe(&inventory.Inventory{}, nil, t0.Add(time.Minute))
	if gone := tc.latest(); len(gone) != 0 {
		t.Errorf("classes after the superblock went = %v, want none", gone)
	}
}

// mappedInventory is one superblock mounted into both pods after serverMiB fetched through
// mmap (no read(2) bytes) in READs of 1 MiB, at 15360 KiB read-ahead.
func mappedInventory(age time.Duration, serverMiB uint64) *inventory.Inventory {
	inv := streamingInventory(age, serverMiB)
	inv.Mounts[0].Stats.Bytes.Read = 0
	return inv
}

// TestTrafficClassesWithFaults: with the per-pod collector's readings, the pod whose faults
// bring in 240 times what they touch reads at random through mmap and the other, whose
// faults use what they bring in, reads in order: each gets its own class, which mountstats
// alone cannot give (both read in whole windows).
func TestTrafficClassesWithFaults(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	writeCgroup(t, root, 0, 0, 0)
	tc := newTrafficClasses(root)
	t0 := time.Unix(1_800_000_000, 0)
	reading := func(randomMiB, randomFaults, seqMiB, seqFaults uint64) *podio.Snapshot {
		return &podio.Snapshot{Loaded: true, Pods: []podio.PodIO{
			{PodUID: trafficPod, Device: "0:60", Counters: podio.Counters{ServerReadBytes: randomMiB << 20, FaultReadBytes: randomMiB << 20, MapFaults: randomFaults}},
			{PodUID: trafficOther, Device: "0:60", Counters: podio.Counters{ServerReadBytes: seqMiB << 20, FaultReadBytes: seqMiB << 20, MapFaults: seqFaults}},
		}}
	}
	tc.observe(mappedInventory(time.Hour, 1000), reading(600, 40, 400, 6400), t0)
	// 30 s on: 150 MiB in 10 faults (15 MiB each) for the first, 250 MiB in 4000 faults
	// (64 KiB each) for the second.
	tc.observe(mappedInventory(time.Hour+30*time.Second, 1400), reading(750, 50, 650, 10400), t0.Add(30*time.Second))
	got := tc.latest()["0:60"]
	if got.Class != readahead.Mixed || len(got.Pods) != 2 {
		t.Fatalf("classes = %+v, want mixed over two pods", got)
	}
	want := map[string]readahead.Class{trafficPod: readahead.MappedRandom, trafficOther: readahead.MappedSequential}
	for _, p := range got.Pods {
		if p.Class != want[p.UID] {
			t.Errorf("pod %s: %s (%s), want %s", p.UID, p.Class, p.Why, want[p.UID])
		}
	}
	// Without the collector the same samples cannot tell: whole windows either way.
	plain := newTrafficClasses(root)
	plain.observe(mappedInventory(time.Hour, 1000), nil, t0)
	plain.observe(mappedInventory(time.Hour+30*time.Second, 1400), nil, t0.Add(30*time.Second))
	for _, p := range plain.latest()["0:60"].Pods {
		if p.Class != readahead.Unknown {
			t.Errorf("without the collector pod %s: %s, want unknown", p.UID, p.Class)
		}
	}
	// /status lists the classes with why, and leaves out a superblock nothing could be told of.
	inv := mappedInventory(time.Hour+30*time.Second, 1400)
	listed := listedClasses(tc.latest(), inv)
	if len(listed) != 1 || listed[0].Device != "0:60" || listed[0].Class != string(readahead.Mixed) || len(listed[0].Pods) != 2 ||
		listed[0].Pods[0].Why == "" || listed[0].Pods[1].Why == "" {
		t.Errorf("/status classes = %+v, want 0:60 mixed with both pods and their reasons", listed)
	}
	if mount := plain.latest()["0:60"]; mount.Class != readahead.Unknown {
		t.Errorf("without the collector the mount: %s (%s), want unknown", mount.Class, mount.Why)
	}
	if listed := listedClasses(plain.latest(), inv); len(listed) != 0 {
		t.Errorf("/status lists a superblock whose classes are all unknown: %+v", listed)
	}
}

// TestAuditNamesSharedNeeds: the agent's audit gets its traffic classes, so that a
// superblock whose pods need opposite read-ahead, one streaming and one thrashing at its
// memory limit, is reported (NFS006) with both pods.
func TestAuditNamesSharedNeeds(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	writeOtherCgroup(t, root)
	inv := streamingInventory(time.Hour+time.Minute, 1400)
	a := auditingAgent(t, root, inv, nil)
	a.traffic.pageBytes = 4096
	writeCgroup(t, root, 1000, 5, 1)
	a.traffic.observe(streamingInventory(time.Hour, 1000), nil, time.Now().Add(-time.Minute))
	writeCgroup(t, root, 1000+200<<20/4096, 60, 20)
	v, err := a.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := findingNFS006(t, v)
	if !strings.Contains(found.Message, "pod "+trafficOther+" read files in order, pod "+trafficPod+" thrash") {
		t.Errorf("NFS006 message %q does not name both pods", found.Message)
	}
}

// TestAuditNamesUnseenFaults: without the per-pod collector, a pod of a streaming
// superblock whose cgroup takes hundreds of major faults is not given the streaming class,
// and the agent's audit names it (NFS007), with the streaming pod it may conflict with and
// the collector as the fix.
func TestAuditNamesUnseenFaults(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	writeOtherCgroup(t, root)
	writeCgroup(t, root, 0, 0, 0)
	inv := streamingInventory(time.Hour+time.Minute, 1400)
	a := auditingAgent(t, root, inv, nil)
	a.traffic.observe(streamingInventory(time.Hour, 1000), nil, time.Now().Add(-time.Minute))
	stat := root.Sys("fs", "cgroup", trafficPodDir, "memory.stat")
	if err := os.WriteFile(stat, []byte("file 60000000\nfile_mapped 0\nworkingset_refault_file 0\npgmajfault 410\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := a.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	classes := a.traffic.latest()["0:60"]
	if classes.Class != readahead.Mixed {
		t.Errorf("the superblock: %s (%s), want mixed", classes.Class, classes.Why)
	}
	var found *audit.Finding
	for i, f := range v.report.Findings {
		if f.ID == "NFS007" {
			found = &v.report.Findings[i]
		}
	}
	if found == nil {
		t.Fatalf("no NFS007 among %d findings; classes %+v", len(v.report.Findings), classes)
	}
	if !strings.HasPrefix(found.Message, "pod "+trafficPod+" took major faults") ||
		!strings.Contains(found.Message, "with pod "+trafficOther+", reading files in order") ||
		!strings.Contains(found.Actual, "pod "+trafficPod+": 400 major faults") || !strings.Contains(found.Fix, "agent.podIO") {
		t.Errorf("NFS007 = %q / %q / %q, want the faulting pod with its 400 faults, the streaming pod beside it, and the collector", found.Message, found.Actual, found.Fix)
	}
}

// writeOtherCgroup writes the other pod's cgroup files: no memory limit, nothing refaulted.
func writeOtherCgroup(t *testing.T, root hostfs.Root) {
	t.Helper()
	otherDir := root.Sys("fs", "cgroup", "kubepods/besteffort/pod"+trafficOther)
	if err := os.MkdirAll(otherDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"memory.stat":   "file 60000000\nfile_mapped 0\nworkingset_refault_file 0\npgmajfault 0\n",
		"memory.events": "low 0\nhigh 0\nmax 0\noom 0\n",
		"memory.max":    "max\n",
	} {
		if err := os.WriteFile(filepath.Join(otherDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// auditingAgent is an agent under the default policy that reads inv, and the per-pod
// collector through podIO (nil: without it).
func auditingAgent(t *testing.T, root hostfs.Root, inv *inventory.Inventory, podIO func(time.Time) podio.Snapshot) *Agent {
	t.Helper()
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Root: root, PID: 1, PodIO: podIO,
		Read: func(context.Context) (*inventory.Inventory, error) { return inv, nil },
		Load: func() (*Policy, error) { return LoadPolicy(policyFile, "", false) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	return a
}

// findingNFS006 is the read's NFS006 finding; the test fails without one.
func findingNFS006(t *testing.T, v *view) *audit.Finding {
	t.Helper()
	for i, f := range v.report.Findings {
		if f.ID == "NFS006" {
			return &v.report.Findings[i]
		}
	}
	t.Fatalf("no NFS006 among %d findings; classes %+v", len(v.report.Findings), v.snap.TrafficClasses)
	return nil
}

// sharedReading is the per-pod collector's cumulative reading of two pods on one
// superblock: the other pod streams with read(2), streamMiB in READs of 1 MiB; the pod reads
// a mapped file at random, its faults (each a major one) each reading a 2 MiB window, and
// maps 64 KiB per fault.
func sharedReading(streamMiB, randomFaults uint64) *podio.Snapshot {
	return &podio.Snapshot{Loaded: true, Pods: []podio.PodIO{
		{PodUID: trafficOther, Device: "0:60", Counters: podio.Counters{ReadBytes: streamMiB << 20, Reads: streamMiB * 8,
			ReadRPCs: streamMiB, ServerReadBytes: streamMiB << 20}},
		{PodUID: trafficPod, Device: "0:60", Counters: podio.Counters{MapFaults: randomFaults, Faults: randomFaults, MajorFaults: randomFaults,
			ReadRPCs: 2 * randomFaults, ServerReadBytes: randomFaults << 21, FaultReadBytes: randomFaults << 21}},
	}}
}

// TestTrafficClassesOwnFigures: two pods on one superblock, one streaming 390 MiB with
// read(2), the other reading a mapped file at random whose 5 faults in the interval start
// only 10 MiB of READs. With the collector each pod is classified by its own figures: the
// random reader's few faults read a window each (mapped_random), not the superblock's
// streaming. Without the collector's read(2) and READ counts (a part not loaded) the
// superblock's figures stand for its traffic, and its own faults, each a miss, still tell
// that it reads at random.
func TestTrafficClassesOwnFigures(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	writeCgroup(t, root, 0, 0, 0)
	writeOtherCgroup(t, root)
	t0 := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		name    string
		missing map[podio.Part]string
		want    readahead.Class
	}{
		{"the collector whole", nil, readahead.MappedRandom},
		{"no read(2) counts", map[podio.Part]string{podio.PartFileIO: "kprobes refused"}, readahead.MappedRandom},
		// Without the fault counts the pod's own READs, 10 MiB, are too little to tell; the
		// superblock's streaming is not its class.
		{"no fault counts", map[podio.Part]string{podio.PartFaults: "trampolines refused"}, readahead.Unknown},
		{"neither", map[podio.Part]string{podio.PartFaults: "trampolines refused", podio.PartFileIO: "kprobes refused"}, readahead.StreamingRead},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := newTrafficClasses(root)
			reading := func(streamMiB, randomFaults uint64) *podio.Snapshot {
				s := sharedReading(streamMiB, randomFaults)
				s.Missing = tt.missing
				return s
			}
			tc.observe(streamingInventory(time.Hour, 1000), reading(990, 40), t0)
			tc.observe(streamingInventory(time.Hour+30*time.Second, 1400), reading(1380, 45), t0.Add(30*time.Second))
			got := tc.latest()["0:60"]
			want := map[string]readahead.Class{trafficOther: readahead.StreamingRead, trafficPod: tt.want}
			if len(got.Pods) != 2 {
				t.Fatalf("classes = %+v, want two pods", got)
			}
			for _, p := range got.Pods {
				if p.Class != want[p.UID] {
					t.Errorf("pod %s: %s (%s), want %s", p.UID, p.Class, p.Why, want[p.UID])
				}
			}
		})
	}
}

// TestAuditNamesSharedNeedsMapped: the agent's audit reports (NFS006) a superblock whose
// one pod streams and whose other reads a mapped file at random, though the random reader's
// own READ payload is below the classifier's minimum.
func TestAuditNamesSharedNeedsMapped(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	writeCgroup(t, root, 0, 0, 0)
	writeOtherCgroup(t, root)
	a := auditingAgent(t, root, streamingInventory(time.Hour+time.Minute, 1400),
		func(time.Time) podio.Snapshot { return *sharedReading(1380, 45) })
	a.traffic.observe(streamingInventory(time.Hour, 1000), sharedReading(990, 40), time.Now().Add(-time.Minute))
	v, err := a.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := findingNFS006(t, v)
	if !strings.Contains(found.Message, "pod "+trafficOther+" read files in order, pod "+trafficPod+" read a mapped file at random") {
		t.Errorf("NFS006 message %q does not name both pods", found.Message)
	}
}
