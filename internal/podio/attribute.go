package podio

import (
	"cmp"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/kubelet"
)

// PodIO is the I/O of one pod's tasks on one superblock; PodUID "" is the node's: tasks
// in no pod's cgroup (host services, the kernel's flusher threads).
type PodIO struct {
	PodUID string `json:"pod_uid"`
	Device string `json:"device"`
	Counters
}

// MaxCgroupDepth bounds the walk below /sys/fs/cgroup: kubelet's deepest cgroups, a
// container's below kubepods.slice/<qos>.slice/<pod>.slice, are at depth 4.
const MaxCgroupDepth = 6

// MinWalkInterval is the least time between two walks of the cgroup tree, and
// RewalkInterval the most: a walk finds the cgroups that went (their pods' series go),
// also when no new one asks for it.
const (
	MinWalkInterval = 10 * time.Second
	RewalkInterval  = time.Minute
)

// Attributor sums the collector's per-cgroup counters per pod (kubelet.CgroupPod on each
// cgroup's path). It walks /sys/fs/cgroup to learn cgroup IDs' paths when the counters
// name one it does not know, at most once per MinWalkInterval, and at least once per
// RewalkInterval; a cgroup that a walk begun
// after its first sighting did not find is gone: its last counters stay in its pod's sums
// (so the node's sums never fall, nor a pod's while it runs) and Sum names it for
// Collector.Forget; a pod with no cgroup left goes from the sums.
type Attributor struct {
	root     hostfs.Root
	pods     map[uint64]string    // cgroup ID -> pod UID ("": not a pod's)
	unknown  map[uint64]time.Time // cgroup ID -> first seen, not found yet
	walkedAt time.Time
	retired  map[podDevice]Counters
	last     map[uint64]map[string]Counters // cgroup -> device -> last counters
	// forgotten are cgroups whose last counters are in retired: until Collector.Forget
	// took them out of the kernel's table, their counters are not counted again.
	forgotten map[uint64]bool
}

type podDevice struct{ pod, device string }

// NewAttributor returns an Attributor reading cgroups below root's /sys/fs/cgroup.
func NewAttributor(root hostfs.Root) *Attributor {
	return &Attributor{root: root, pods: map[uint64]string{}, unknown: map[uint64]time.Time{},
		retired: map[podDevice]Counters{}, last: map[uint64]map[string]Counters{}, forgotten: map[uint64]bool{}}
}

// Sum returns the pods' sums over counts (Collector.Read at now, which Sum may change),
// sorted by pod and device, and the cgroups that are gone.
func (a *Attributor) Sum(now time.Time, counts map[Key]Counters) (out []PodIO, gone []uint64) {
	stillForgotten := map[uint64]bool{}
	for k := range counts {
		if a.forgotten[k.Cgroup] {
			stillForgotten[k.Cgroup] = true
			delete(counts, k)
		}
	}
	a.forgotten = stillForgotten
	for k := range counts {
		if _, ok := a.pods[k.Cgroup]; !ok {
			if _, seen := a.unknown[k.Cgroup]; !seen {
				a.unknown[k.Cgroup] = now
			}
		}
	}
	podOf := a.pods // a gone cgroup's pod, which the walk no longer shows
	walked := false
	if since := now.Sub(a.walkedAt); (len(a.unknown) > 0 && since >= MinWalkInterval) || since >= RewalkInterval {
		live := walkCgroups(a.root)
		a.walkedAt = now
		a.pods = make(map[uint64]string, len(live))
		for id, path := range live {
			a.pods[id], _ = kubelet.CgroupPod(path)
		}
		for id, first := range a.unknown {
			if _, ok := live[id]; ok {
				delete(a.unknown, id)
			} else if !first.After(now) {
				gone = append(gone, id)
			}
		}
		for id := range a.last {
			if _, ok := live[id]; !ok && !slices.Contains(gone, id) {
				gone = append(gone, id)
			}
		}
		walked = true
	}
	for k, c := range counts {
		if a.last[k.Cgroup] == nil {
			a.last[k.Cgroup] = map[string]Counters{}
		}
		a.last[k.Cgroup][k.Device] = c
	}
	for _, id := range gone {
		pod := podOf[id]
		for dev, c := range a.last[id] {
			r := a.retired[podDevice{pod, dev}]
			r.Add(c)
			a.retired[podDevice{pod, dev}] = r
		}
		delete(a.last, id)
		delete(a.pods, id)
		delete(a.unknown, id)
		a.forgotten[id] = true
	}
	if walked {
		// A pod none of whose cgroups is left is gone, and its series with it; the node's
		// sums stay.
		livePods := map[string]bool{}
		for _, pod := range a.pods {
			livePods[pod] = true
		}
		for pd := range a.retired {
			if pd.pod != "" && !livePods[pd.pod] {
				delete(a.retired, pd)
			}
		}
	}
	sums := make(map[podDevice]Counters, len(a.retired))
	for pd, c := range a.retired {
		sums[pd] = c
	}
	for id, devs := range a.last {
		if _, ok := a.unknown[id]; ok {
			continue // its pod is not known before the next walk: counted then, not as the node's now
		}
		for dev, c := range devs {
			pd := podDevice{a.pods[id], dev}
			s := sums[pd]
			s.Add(c)
			sums[pd] = s
		}
	}
	for pd, c := range sums {
		out = append(out, PodIO{PodUID: pd.pod, Device: pd.device, Counters: c})
	}
	slices.SortFunc(out, func(x, y PodIO) int {
		return cmp.Or(cmp.Compare(x.PodUID, y.PodUID), cmp.Compare(x.Device, y.Device))
	})
	return out, gone
}

// walkCgroups returns the ID (the directory's inode number) and path, relative to the
// cgroup v2 root, of every cgroup down to MaxCgroupDepth.
func walkCgroups(root hostfs.Root) map[uint64]string {
	base := root.Sys("fs", "cgroup")
	out := map[uint64]string{}
	_ = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // a cgroup removed during the walk
		}
		rel, _ := filepath.Rel(base, path)
		if rel == "." {
			rel = ""
		}
		if depth(rel) > MaxCgroupDepth {
			return filepath.SkipDir
		}
		info, err := os.Lstat(path)
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			out[st.Ino] = "/" + rel
		}
		return nil
	})
	return out
}

func depth(rel string) int {
	if rel == "" {
		return 0
	}
	n := 1
	for _, r := range rel {
		if r == '/' {
			n++
		}
	}
	return n
}
