package agent

import (
	"os"
	"sync"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/podcgroup"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/readahead"
)

// The traffic classes' bounds.
const (
	// MinTrafficInterval is the shortest interval between two samples that the agent
	// classifies: scrapes closer together (two Prometheus servers) keep the earlier sample
	// and the last class, so that an interval holds enough traffic to tell.
	MinTrafficInterval = 10 * time.Second
	// MaxClassifiedPods caps the pods whose cgroups one sample reads, over all mounts: five
	// small files each. Pods past the cap are not read and get no class of their own; their
	// mount is classified from the pods that were.
	MaxClassifiedPods = 256
)

// trafficClasses classifies each superblock's read traffic, and its pods', over the interval
// between two reads of the statistics (readahead.Classify): the mount's mountstats, the
// cgroup counters (podcgroup.Read) of the pods that mount it, as kubelet's mount paths
// name them, and, with the per-pod collector, each pod's own faults, READs and read(2)
// bytes on it. It keeps the last sample and the last classes in memory only.
type trafficClasses struct {
	root      hostfs.Root
	pageBytes int

	mu      sync.Mutex
	last    map[string]*inventory.Stats              // device -> statistics at lastAt
	pods    map[string]*podcgroup.Counters           // pod UID -> counters at lastAt (nil: unreadable)
	faults  map[podio.PodKey]readahead.FaultEvidence // the per-pod collector's, cumulative, at lastAt
	reads   map[podio.PodKey]readahead.PodReads      // the same collector's READs and read(2) bytes
	lastAt  time.Time
	classes map[string]readahead.Classification
}

func newTrafficClasses(root hostfs.Root) *trafficClasses {
	return &trafficClasses{root: root, pageBytes: os.Getpagesize(), last: map[string]*inventory.Stats{},
		pods: map[string]*podcgroup.Counters{}, classes: map[string]readahead.Classification{}}
}

// observe takes a fresh inventory read at now, and the per-pod collector's reading io (nil
// without it): unless the last sample is younger than MinTrafficInterval, it classifies
// every superblock that has statistics in both samples and keeps this sample as the next
// one's start. Superblocks that went lose their class.
func (t *trafficClasses) observe(inv *inventory.Inventory, io *podio.Snapshot, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.lastAt.IsZero() && now.Sub(t.lastAt) < MinTrafficInterval {
		return
	}
	elapsed := now.Sub(t.lastAt)
	faults, reads := cumulativeFaults(io), cumulativeReads(io)
	pods := make(map[string]*podcgroup.Counters)
	classes := make(map[string]readahead.Classification, len(inv.Mounts))
	last := make(map[string]*inventory.Stats, len(inv.Mounts))
	for i := range inv.Mounts {
		m := &inv.Mounts[i]
		if m.Stats == nil {
			continue
		}
		last[m.Device] = m.Stats
		var acts []readahead.PodActivity
		for _, pv := range kubelet.PodVolumes(m.MountPoints) {
			cur, seen := pods[pv.PodUID]
			if !seen {
				if len(pods) >= MaxClassifiedPods {
					continue
				}
				cur, _ = podcgroup.Read(t.root, pv.PodUID) // an unreadable cgroup is a pod not Seen
				pods[pv.PodUID] = cur
			}
			act := readahead.PodBetween(pv.PodUID, t.pods[pv.PodUID], cur, elapsed, t.pageBytes)
			k := podio.PodKey{PodUID: pv.PodUID, Device: m.Device}
			act.Faults = faultsBetween(t.faults, faults, k)
			act.Reads = readsBetween(t.reads, reads, k)
			acts = append(acts, act)
		}
		prev := t.last[m.Device]
		if prev == nil || t.lastAt.IsZero() {
			continue
		}
		e := readahead.Measure(m, prev, elapsed)
		if e.SinceMount {
			continue // the device number names another superblock now
		}
		e.Faults = faultsBetween(t.faults, faults, podio.PodKey{Device: m.Device, PodUID: allPods})
		classes[m.Device] = readahead.Classify(e, acts)
	}
	t.last, t.pods, t.faults, t.reads, t.lastAt, t.classes = last, pods, faults, reads, now, classes
}

// allPods is the pod UID under which cumulativeFaults keeps a superblock's sum over every
// cgroup; no pod has it ("" is the node's own tasks).
const allPods = "*"

// cumulativeFaults are the collector's fault figures by pod and superblock, and by
// superblock summed (PodUID allPods); nil without the collector, before it loaded, or when
// it could not be read (an interval measured from an empty reading would count every fault
// since the load).
func cumulativeFaults(io *podio.Snapshot) map[podio.PodKey]readahead.FaultEvidence {
	if !countsFaults(io) || io.Why != "" {
		return nil
	}
	out := make(map[podio.PodKey]readahead.FaultEvidence, 2*len(io.Pods))
	for _, p := range io.Pods {
		f := readahead.FaultEvidence{ReadBytes: p.FaultReadBytes, Faults: max(p.MapFaults, p.Faults), MajorFaults: p.MajorFaults, FilemapFaults: p.Faults}
		out[podio.PodKey{PodUID: p.PodUID, Device: p.Device}] = f
		sum := out[podio.PodKey{PodUID: allPods, Device: p.Device}]
		sum.ReadBytes += f.ReadBytes
		sum.Faults += f.Faults
		sum.MajorFaults += f.MajorFaults
		sum.FilemapFaults += f.FilemapFaults
		out[podio.PodKey{PodUID: allPods, Device: p.Device}] = sum
	}
	return out
}

// countsFaults says whether the collector is loaded with the part that counts faults,
// whether or not this snapshot could be read (a failed read has Why set and no pods).
func countsFaults(io *podio.Snapshot) bool {
	return io != nil && io.Loaded && io.Missing[podio.PartFaults] == ""
}

// faultsBetween is k's fault evidence between two cumulative readings; nil when either
// reading is missing (no collector then or now), and zero for a key new in cur (no faults
// before). A count lower in cur (a pod's series restarted) counts as no rise.
func faultsBetween(prev, cur map[podio.PodKey]readahead.FaultEvidence, k podio.PodKey) *readahead.FaultEvidence {
	if prev == nil || cur == nil {
		return nil
	}
	c, p := cur[k], prev[k]
	return &readahead.FaultEvidence{ReadBytes: rise(c.ReadBytes, p.ReadBytes), Faults: rise(c.Faults, p.Faults),
		MajorFaults: rise(c.MajorFaults, p.MajorFaults), FilemapFaults: rise(c.FilemapFaults, p.FilemapFaults)}
}

// cumulativeReads are the collector's READ and read(2) figures by pod and superblock; nil
// without the collector, before it loaded, when it could not be read, or without the part
// that counts read(2) or the one that counts READs: a pod is classified by its own figures
// only when it has all of them, since the READ payload without read(2)'s share would pass
// for reading through mmap.
func cumulativeReads(io *podio.Snapshot) map[podio.PodKey]readahead.PodReads {
	if io == nil || !io.Loaded || io.Why != "" || io.Missing[podio.PartFileIO] != "" || io.Missing[podio.PartRPC] != "" {
		return nil
	}
	out := make(map[podio.PodKey]readahead.PodReads, len(io.Pods))
	for _, p := range io.Pods {
		out[podio.PodKey{PodUID: p.PodUID, Device: p.Device}] = readahead.PodReads{
			ServerReadBytes: p.ServerReadBytes, AppReadBytes: p.ReadBytes, Reads: p.ReadRPCs}
	}
	return out
}

// readsBetween is k's READ figures between two cumulative readings, as faultsBetween.
func readsBetween(prev, cur map[podio.PodKey]readahead.PodReads, k podio.PodKey) *readahead.PodReads {
	if prev == nil || cur == nil {
		return nil
	}
	c, p := cur[k], prev[k]
	return &readahead.PodReads{ServerReadBytes: rise(c.ServerReadBytes, p.ServerReadBytes),
		AppReadBytes: rise(c.AppReadBytes, p.AppReadBytes), Reads: rise(c.Reads, p.Reads)}
}

func rise(cur, prev uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

// latest returns the last class of each superblock, by device.
func (t *trafficClasses) latest() map[string]readahead.Classification {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]readahead.Classification, len(t.classes))
	for dev, c := range t.classes {
		out[dev] = c
	}
	return out
}
