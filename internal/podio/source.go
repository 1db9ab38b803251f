package podio

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// MinRateInterval is the shortest interval over which Source computes rates: scrapes
// closer together keep the last rates.
const MinRateInterval = 10 * time.Second

// Snapshot is what Source.Read returns.
type Snapshot struct {
	// Loaded is true once the collector runs; Why says why not, or which parts are
	// missing (Collector.Missing) when it runs without them.
	Loaded  bool             `json:"loaded"`
	Why     string           `json:"why,omitempty"`
	Missing map[Part]string  `json:"missing,omitempty"`
	Pods    []PodIO          `json:"pods,omitempty"`
	Rates   map[PodKey]Rates `json:"-"`
	Dropped uint64           `json:"dropped_events,omitempty"`
}

// PodKey names a pod's I/O on a superblock.
type PodKey struct{ PodUID, Device string }

// Rates are a pod's per-second figures on one superblock over Source's last interval.
type Rates struct {
	ReadBytes, WriteBytes, ServerReadBytes, FaultReadBytes, MajorFaults float64
	// ReadLatencyMean is the mean READ latency over the interval in seconds; 0 without
	// READs.
	ReadLatencyMean float64
}

// Source runs the collector for the agent: it loads it on first use (and again at each
// read while the nfs module is missing), says once in the log why it cannot, sums
// its counters per pod, and keeps the rates of the last interval.
type Source struct {
	root   hostfs.Root
	logger *slog.Logger
	load   func() (*Collector, error)

	mu     sync.Mutex
	col    *Collector
	attr   *Attributor
	err    error
	prev   map[PodKey]Counters
	prevAt time.Time
	rates  map[PodKey]Rates
}

// NewSource returns a Source reading cgroups below root; nothing is loaded before Read.
func NewSource(root hostfs.Root, logger *slog.Logger) *Source {
	return &Source{root: root, logger: logger, attr: NewAttributor(root), load: func() (*Collector, error) {
		// The nfs module brings the hooks: before the node's first NFS mount there is none.
		if _, err := os.Stat("/sys/module/nfs"); err != nil {
			return nil, ErrNoNFS
		}
		// Only the perf variants need tracefs: without it they are left out, and say so.
		tracefs, _ := FindTracefs()
		return Load(tracefs)
	}}
}

// Read returns the pods' I/O at now.
func (s *Source) Read(now time.Time) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.col == nil {
		if !s.retry() {
			return Snapshot{Why: s.err.Error()}
		}
		col, err := s.load()
		if err != nil {
			first := s.err == nil
			s.err = err
			if first {
				s.logger.Warn("per-pod NFS I/O is off: the collector cannot run here", "why", err.Error())
			}
			return Snapshot{Why: err.Error()}
		}
		s.col, s.err = col, nil
		s.logger.Info("per-pod NFS I/O collector loaded", "missing", col.Missing)
	}
	counts, dropped, err := s.col.Read()
	if err != nil {
		return Snapshot{Loaded: true, Why: err.Error(), Missing: s.col.Missing}
	}
	pods, gone := s.attr.Sum(now, counts)
	if len(gone) > 0 {
		if err := s.col.Forget(gone); err != nil {
			s.logger.Warn("forgetting the NFS I/O of cgroups that are gone", "err", err)
		}
	}
	s.observe(pods, now)
	return Snapshot{Loaded: true, Missing: s.col.Missing, Pods: pods, Rates: s.rates, Dropped: dropped}
}

// retry says whether to try loading again: the first time, and at each read while the nfs
// module was missing; never after a failure that waiting does not mend. The module comes
// with the node's first NFS mount, and the collector's hooks with it: the read after that
// mount loads them, before the controller's first interval on it (a try without the module
// is one stat of /sys/module/nfs).
func (s *Source) retry() bool {
	return s.err == nil || errors.Is(s.err, ErrNoNFS)
}

func (s *Source) observe(pods []PodIO, now time.Time) {
	if !s.prevAt.IsZero() && now.Sub(s.prevAt) < MinRateInterval {
		return
	}
	cur := make(map[PodKey]Counters, len(pods))
	for _, p := range pods {
		cur[PodKey{p.PodUID, p.Device}] = p.Counters
	}
	if !s.prevAt.IsZero() {
		secs := now.Sub(s.prevAt).Seconds()
		rates := make(map[PodKey]Rates, len(cur))
		for k, c := range cur {
			p := s.prev[k] // zero for a pod new in this interval
			r := Rates{
				ReadBytes:       per(c.ReadBytes, p.ReadBytes, secs),
				WriteBytes:      per(c.WriteBytes, p.WriteBytes, secs),
				ServerReadBytes: per(c.ServerReadBytes, p.ServerReadBytes, secs),
				FaultReadBytes:  per(c.FaultReadBytes, p.FaultReadBytes, secs),
				MajorFaults:     per(c.MajorFaults, p.MajorFaults, secs),
			}
			if n := c.ReadLatency.Count() - min(p.ReadLatency.Count(), c.ReadLatency.Count()); n > 0 {
				r.ReadLatencyMean = (c.ReadLatency.SumSeconds - p.ReadLatency.SumSeconds) / float64(n)
			}
			rates[k] = r
		}
		s.rates = rates
	}
	s.prev, s.prevAt = cur, now
}

func per(cur, prev uint64, secs float64) float64 {
	if cur < prev || secs <= 0 {
		return 0
	}
	return float64(cur-prev) / secs
}

// Close unloads the collector.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.col == nil {
		return nil
	}
	err := s.col.Close()
	s.col = nil
	return err
}

// ErrNoNFS is returned by FindTracefs when tracefs has no nfs events: the nfs module is
// not loaded yet.
var ErrNoNFS = fmt.Errorf("%w: the nfs module is not loaded", ErrUnsupported)
