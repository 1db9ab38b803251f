package podio

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/hostfs"
)

// TestSourceRetries: while the nfs module is missing, Source tries again at every read;
// a failure that waiting does not mend (no BTF) is tried once, logged once, and reported
// in every snapshot.
func TestSourceRetries(t *testing.T) {
	for _, tt := range []struct {
		name      string
		err       error
		wantTries int
	}{
		{"nfs not loaded", ErrNoNFS, 5},
		{"no BTF", errors.New("podio: the kernel has no BTF"), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := NewSource(hostfs.Root(t.TempDir()), slog.New(slog.NewTextHandler(&logs, nil)))
			tries := 0
			s.load = func() (*Collector, error) { tries++; return nil, tt.err }
			now := time.Unix(1000, 0)
			for i := range 5 {
				snap := s.Read(now.Add(time.Duration(i) * time.Second))
				if snap.Loaded || snap.Why != tt.err.Error() {
					t.Fatalf("read %d: %+v, want not loaded because %q", i, snap, tt.err)
				}
			}
			if tries != tt.wantTries {
				t.Errorf("%d tries in 5 reads, want %d", tries, tt.wantTries)
			}
			if n := strings.Count(logs.String(), "per-pod NFS I/O is off"); n != 1 {
				t.Errorf("logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// TestSourceRates checks the per-second figures between two samples MinRateInterval
// apart, a pod new in the second, and that a closer sample keeps the last rates.
func TestSourceRates(t *testing.T) {
	s := NewSource(hostfs.Root(t.TempDir()), slog.New(slog.DiscardHandler))
	now := time.Unix(1000, 0)
	a := PodKey{"pod-a", "0:66"}
	s.observe([]PodIO{{PodUID: a.PodUID, Device: a.Device, Counters: Counters{ReadBytes: 100,
		ReadLatency: Histogram{Buckets: [LatencyBuckets]uint64{2}, SumSeconds: 0.002}}}}, now)
	if s.rates != nil {
		t.Fatalf("rates from one sample: %v", s.rates)
	}
	next := []PodIO{
		{PodUID: a.PodUID, Device: a.Device, Counters: Counters{ReadBytes: 100 + 20<<20, MajorFaults: 50,
			ReadLatency: Histogram{Buckets: [LatencyBuckets]uint64{2, 4}, SumSeconds: 0.010}}},
		{PodUID: "pod-b", Device: "0:66", Counters: Counters{ServerReadBytes: 10 << 20}},
	}
	s.observe(next, now.Add(MinRateInterval))
	ra, rb := s.rates[a], s.rates[PodKey{"pod-b", "0:66"}]
	if ra.ReadBytes != 2<<20 || ra.MajorFaults != 5 || rb.ServerReadBytes != 1<<20 {
		t.Errorf("rates %+v and %+v, want 2 MiB/s read and 5 faults/s, 1 MiB/s READ payload", ra, rb)
	}
	if want := 0.008 / 4; ra.ReadLatencyMean < want*0.999 || ra.ReadLatencyMean > want*1.001 {
		t.Errorf("mean READ latency %v, want %v", ra.ReadLatencyMean, want)
	}
	s.observe(nil, now.Add(MinRateInterval+time.Second))
	if len(s.rates) != 2 {
		t.Errorf("a sample 1 s later replaced the rates: %v", s.rates)
	}
}
