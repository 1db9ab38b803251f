package agent

import (
	"os"
	"sync"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/kubelet"
	"github.com/nfstune/nfstune/internal/podcgroup"
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
// between two reads of the statistics (readahead.Classify): the mount's mountstats and
// the cgroup counters (podcgroup.Read) of the pods that mount it, as kubelet's mount paths
// name them. It keeps the last sample and the last classes in memory only.
type trafficClasses struct {
	root      hostfs.Root
	pageBytes int

	mu      sync.Mutex
	last    map[string]*inventory.Stats    // device -> statistics at lastAt
	pods    map[string]*podcgroup.Counters // pod UID -> counters at lastAt (nil: unreadable)
	lastAt  time.Time
	classes map[string]readahead.Classification
}

func newTrafficClasses(root hostfs.Root) *trafficClasses {
	return &trafficClasses{root: root, pageBytes: os.Getpagesize(), last: map[string]*inventory.Stats{},
		pods: map[string]*podcgroup.Counters{}, classes: map[string]readahead.Classification{}}
}

// observe takes a fresh inventory read at now: unless the last sample is younger than
// MinTrafficInterval, it classifies every superblock that has statistics in both samples
// and keeps this sample as the next one's start. Superblocks that went lose their class.
func (t *trafficClasses) observe(inv *inventory.Inventory, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.lastAt.IsZero() && now.Sub(t.lastAt) < MinTrafficInterval {
		return
	}
	elapsed := now.Sub(t.lastAt)
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
			acts = append(acts, readahead.PodBetween(pv.PodUID, t.pods[pv.PodUID], cur, elapsed, t.pageBytes))
		}
		prev := t.last[m.Device]
		if prev == nil || t.lastAt.IsZero() {
			continue
		}
		e := readahead.Measure(m, prev, elapsed)
		if e.SinceMount {
			continue // the device number names another superblock now
		}
		classes[m.Device] = readahead.Classify(e, acts)
	}
	t.last, t.pods, t.lastAt, t.classes = last, pods, now, classes
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
