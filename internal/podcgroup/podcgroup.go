// Package podcgroup reads a Kubernetes pod's cgroup v2 memory and pressure counters: what
// its page cache costs it (memory.stat), whether it hit its memory limit (memory.events,
// memory.max), and how long its tasks waited for memory and I/O (PSI memory.pressure and
// io.pressure). It reads only files below /sys/fs/cgroup, in the directory kubelet named
// for the pod (kubelet.PodCgroupDirs), each with a size cap; never a mount point.
//
// The files are described in the kernel's Documentation/admin-guide/cgroup-v2.rst
// (memory.stat, memory.events, memory.max) and Documentation/accounting/psi.rst (the
// pressure files, in cgroups since Linux 4.20).
package podcgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/kubelet"
)

// MaxFileSize caps each file read: memory.stat, the largest, is a few KiB (about 60 lines
// of "key value").
const MaxFileSize = 64 << 10

// ErrNoPodCgroup is returned when none of the directories kubelet may name for the pod
// exists: the pod runs no more, it is not a kubelet pod, or the host has no cgroup v2
// hierarchy at /sys/fs/cgroup (a v1-only host).
var ErrNoPodCgroup = errors.New("no cgroup v2 directory for the pod")

// Pressure is one line of a PSI file: the share of the last 10 seconds some (or all)
// non-idle tasks were stalled, in percent, and the total stall time in microseconds.
type Pressure struct {
	Avg10         float64 `json:"avg10"`
	TotalMicrosec uint64  `json:"total_us"`
}

// PSI is a pressure file's two lines: "some" tasks stalled, and "full": all non-idle tasks
// stalled at once.
type PSI struct {
	Some Pressure `json:"some"`
	Full Pressure `json:"full"`
}

// Counters is one sample of a pod's cgroup. The memory.stat and memory.events fields are
// cumulative since the cgroup was created (counts of events or pages) or current sizes
// (bytes), as the kernel documents them.
type Counters struct {
	// Dir is the pod's cgroup directory, relative to the cgroup v2 root.
	Dir string `json:"dir"`

	// PgMajFault is memory.stat pgmajfault: page faults that had to read the page in, from
	// a file or swap (a count).
	PgMajFault uint64 `json:"pgmajfault"`
	// WorkingsetRefaultFile is memory.stat workingset_refault_file (workingset_refault
	// before Linux 5.9): file pages read in again soon after they were evicted (a count of
	// pages; mm/workingset.c).
	WorkingsetRefaultFile uint64 `json:"workingset_refault_file"`
	// FileBytes is memory.stat file: the page cache the pod is charged for, in bytes;
	// FileMappedBytes is file_mapped, the part of it mapped into processes (mmap).
	FileBytes       uint64 `json:"file_bytes"`
	FileMappedBytes uint64 `json:"file_mapped_bytes"`

	// EventsHigh, EventsMax and EventsOOM are memory.events high (reclaim forced by
	// memory.high), max (the usage was about to exceed memory.max) and oom (allocations
	// failed at the limit): counts.
	EventsHigh uint64 `json:"events_high"`
	EventsMax  uint64 `json:"events_max"`
	EventsOOM  uint64 `json:"events_oom"`

	// MemoryMaxBytes is memory.max in bytes; nil when it is "max" (no limit).
	MemoryMaxBytes *uint64 `json:"memory_max_bytes,omitempty"`

	// Memory and IO are memory.pressure and io.pressure; nil on a kernel without PSI
	// (CONFIG_PSI off, or psi=0 on the command line, as RHEL 8 boots: the files are
	// missing or refuse reads).
	Memory *PSI `json:"memory_pressure,omitempty"`
	IO     *PSI `json:"io_pressure,omitempty"`
}

// Limited reports whether the pod has a memory limit: its page cache is reclaimed at the
// limit, not only when the node runs short (cgroup-v2.rst, memory.max).
func (c *Counters) Limited() bool { return c.MemoryMaxBytes != nil }

// Read returns the counters of pod podUID below root's /sys/fs/cgroup. It reads the first
// of kubelet.PodCgroupDirs whose memory.stat exists; ErrNoPodCgroup when none does. A
// malformed file is an error naming its path: nothing is guessed from part of a sample.
func Read(root hostfs.Root, podUID string) (*Counters, error) {
	dirs := kubelet.PodCgroupDirs(podUID)
	if dirs == nil {
		return nil, fmt.Errorf("pod UID %q: not a UID kubelet names cgroups with", podUID)
	}
	for _, dir := range dirs {
		stat, err := hostfs.ReadFile(root.Sys("fs", "cgroup", dir, "memory.stat"), MaxFileSize)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading pod %s's cgroup: %w", podUID, err)
		}
		c := &Counters{Dir: dir}
		if err := c.read(root, dir, stat); err != nil {
			return nil, fmt.Errorf("reading pod %s's cgroup: %w", podUID, err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("pod %s: %w", podUID, ErrNoPodCgroup)
}

// read parses memory.stat (already read) and reads the other files of dir.
func (c *Counters) read(root hostfs.Root, dir string, stat []byte) error {
	path := func(name string) string { return root.Sys("fs", "cgroup", dir, name) }
	// Linux 5.9 split workingset_refault into _anon and _file when it began to detect
	// refaults of anonymous pages (mm/workingset.c); before, only file pages were tracked
	// and the one counter is theirs.
	refault := "workingset_refault_file"
	if !bytes.Contains(stat, []byte("\n"+refault+" ")) && bytes.Contains(stat, []byte("\nworkingset_refault ")) {
		refault = "workingset_refault"
	}
	if err := parseKeyed(stat, map[string]*uint64{
		"pgmajfault":  &c.PgMajFault,
		refault:       &c.WorkingsetRefaultFile,
		"file":        &c.FileBytes,
		"file_mapped": &c.FileMappedBytes,
	}); err != nil {
		return fmt.Errorf("%s: %w", path("memory.stat"), err)
	}
	events, err := hostfs.ReadFile(path("memory.events"), MaxFileSize)
	if err == nil {
		err = parseKeyed(events, map[string]*uint64{"high": &c.EventsHigh, "max": &c.EventsMax, "oom": &c.EventsOOM})
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path("memory.events"), err)
	}
	limit, err := hostfs.ReadFile(path("memory.max"), MaxFileSize)
	if err == nil {
		c.MemoryMaxBytes, err = parseMax(limit)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path("memory.max"), err)
	}
	for name, psi := range map[string]**PSI{"memory.pressure": &c.Memory, "io.pressure": &c.IO} {
		b, err := hostfs.ReadFile(path(name), MaxFileSize)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP) {
			continue // no PSI on this kernel
		}
		var p PSI
		if err == nil {
			p, err = parsePSI(b)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path(name), err)
		}
		*psi = &p
	}
	return nil
}

// parseKeyed reads "key value" lines (memory.stat, memory.events) into the fields named
// in want; every key of want must be present, other keys are skipped (each kernel adds its
// own).
func parseKeyed(b []byte, want map[string]*uint64) error {
	seen := make(map[string]bool, len(want))
	for line := range bytes.Lines(b) {
		key, value, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
		p, wanted := want[key]
		if !wanted {
			continue
		}
		if !ok || seen[key] {
			return fmt.Errorf("%q: no value, or repeated", key)
		}
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*p, seen[key] = n, true
	}
	var missing []string
	for k := range want {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// parseMax reads memory.max: "max" (no limit) or a number of bytes.
func parseMax(b []byte) (*uint64, error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return nil, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("not \"max\" or a number of bytes: %q", s)
	}
	return &n, nil
}

// parsePSI reads a pressure file: "some avg10=.. avg60=.. avg300=.. total=.." and the same
// for "full" (psi.rst). A cgroup's memory and io files have both lines; a missing "full"
// line (the system-wide cpu file of kernels before 5.13) leaves Full zero.
func parsePSI(b []byte) (PSI, error) {
	var psi PSI
	seen := false
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		var p *Pressure
		switch f[0] {
		case "some":
			p, seen = &psi.Some, true
		case "full":
			p = &psi.Full
		default:
			return PSI{}, fmt.Errorf("unknown line %q", f[0])
		}
		var haveAvg, haveTotal bool
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "avg10":
				p.Avg10, err = strconv.ParseFloat(v, 64)
				haveAvg = true
			case "total":
				p.TotalMicrosec, err = strconv.ParseUint(v, 10, 64)
				haveTotal = true
			}
			if err != nil {
				return PSI{}, fmt.Errorf("%s %s: %w", f[0], k, err)
			}
		}
		if !haveAvg || !haveTotal {
			return PSI{}, fmt.Errorf("%s line without avg10 and total", f[0])
		}
	}
	if !seen {
		return PSI{}, errors.New("no \"some\" line")
	}
	return psi, nil
}
