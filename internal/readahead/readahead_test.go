package readahead

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/inventory"
)

// loadStats parses one recorded mountstats entry with prometheus/procfs, as inventory does.
func loadStats(t *testing.T, name string) *inventory.Stats {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1", "mountstats"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := procfs.NewFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fs.Proc(1)
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := p.MountStats()
	if err != nil || len(mounts) != 1 {
		t.Fatalf("parsing %s: %d mounts, %v", name, len(mounts), err)
	}
	s := mounts[0].Stats.(*procfs.MountStatsNFS)
	return &inventory.Stats{StatVersion: s.StatVersion, Age: s.Age, Bytes: s.Bytes, Events: s.Events, Operations: s.Operations}
}

func labMount(t *testing.T, sample string, readAheadKB int) *inventory.Mount {
	return &inventory.Mount{Device: "0:64", MountPoints: []string{"/mnt/lab/rsize-1m"}, RSize: 262144,
		ReadAheadKB: &readAheadKB, Stats: loadStats(t, sample)}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestMeasureLabSamples checks the figures of two samples 10 s apart against a hand
// computation (testdata/README.md lists the counters).
func TestMeasureLabSamples(t *testing.T) {
	prev := loadStats(t, "lab-6.1-rsize-1m.0.mountstats")
	m := labMount(t, "lab-6.1-rsize-1m.1.mountstats", 1024)
	got := Measure(m, prev, 10*time.Second)

	// Application reads: normal 3 GiB - 1 GiB = 2147483648, direct 268435456 - 0;
	// 2147483648 + 268435456 = 2415919104 bytes.
	// Server READ payload: 4563402752 - 1342177280 = 3221225472 bytes (3 GiB).
	// Over-read: 3221225472 / 2415919104 = 3 GiB / 2.25 GiB = 4/3 = 1.3333.
	// READs: 17408 - 5120 = 12288; average READ 3221225472 / 12288 = 262144 bytes = rsize.
	// READ RTT: (52480 - 20480) ms = 32 s; in flight 32 s / 10 s = 3.2 READs.
	// One window of 1024 KiB holds 1048576 / 262144 = 4 READs; window-bound 3.2 / 4 = 0.8.
	// Events: readpage 12 - 10 = 2, readpages 4352 - 1280 = 3072.
	// Application rate: 2415919104 / 10 = 241591910.4 bytes/s.
	want := Evidence{
		Seconds: 10, ReadAheadKB: 1024, RSize: 262144,
		AppReadBytes: 2415919104, ServerReadBytes: 3221225472,
		Reads: 12288, ReadRTTSeconds: 32, ReadPageEvents: 2, ReadaheadEvents: 3072,
		OverRead: 4.0 / 3, AvgReadBytes: 262144, InFlight: 3.2, WindowReads: 4, WindowBound: 0.8,
		AppBytesPerSecond: 241591910.4,
	}
	checkEvidence(t, got, want)
	// 0.8 >= 0.75 and over-read 1.33 <= 1.5 over 12288 READs: the window limits.
	if !got.Limiting() || got.Wasteful() {
		t.Errorf("Limiting() = %v, Wasteful() = %v; want true, false", got.Limiting(), got.Wasteful())
	}
	// With a window of 2048 KiB: 8 READs per window, 3.2 / 8 = 0.4: not window-bound.
	m.ReadAheadKB = ptr(2048)
	if got := Measure(m, prev, 10*time.Second); !near(got.WindowBound, 0.4) || got.Limiting() {
		t.Errorf("at 2048 KiB: window-bound %v, Limiting() %v; want 0.4, false", got.WindowBound, got.Limiting())
	}
}

// TestMeasureSinceMount checks the cumulative figures of one sample, and that counters
// going backwards (a reused device number) measure since the mount too.
func TestMeasureSinceMount(t *testing.T) {
	m := labMount(t, "lab-6.1-rsize-1m.1.mountstats", 1024)
	// Since the mount (110 s): application 3221225472 + 268435456 = 3489660928 bytes,
	// server 4563402752, over-read 4563402752 / 3489660928 = 1.30769...; 17408 READs of
	// 262144 bytes; RTT 52.48 s over 110 s = 0.4771 in flight; 4 READs per window.
	want := Evidence{
		Seconds: 110, SinceMount: true, ReadAheadKB: 1024, RSize: 262144,
		AppReadBytes: 3489660928, ServerReadBytes: 4563402752,
		Reads: 17408, ReadRTTSeconds: 52.48, ReadPageEvents: 12, ReadaheadEvents: 4352,
		OverRead: 4563402752.0 / 3489660928, AvgReadBytes: 262144, InFlight: 52.48 / 110,
		WindowReads: 4, WindowBound: 52.48 / 110 / 4, AppBytesPerSecond: 3489660928.0 / 110,
	}
	checkEvidence(t, Measure(m, nil, time.Second), want)
	// The later sample as "previous": its counters are higher, so this is a new superblock.
	later := m.Stats
	m0 := labMount(t, "lab-6.1-rsize-1m.0.mountstats", 1024)
	if got := Measure(m0, later, time.Second); !got.SinceMount || got.Seconds != 100 || got.AppReadBytes != 1073741824 {
		t.Errorf("counters went back: got since mount %v, %v s, %d bytes; want true, 100 s, 1073741824", got.SinceMount, got.Seconds, got.AppReadBytes)
	}
}

func checkEvidence(t *testing.T, got, want Evidence) {
	t.Helper()
	if got.Seconds != want.Seconds || got.SinceMount != want.SinceMount || got.ReadAheadKB != want.ReadAheadKB ||
		got.RSize != want.RSize || got.AppReadBytes != want.AppReadBytes || got.ServerReadBytes != want.ServerReadBytes ||
		got.Reads != want.Reads || got.ReadPageEvents != want.ReadPageEvents || got.ReadaheadEvents != want.ReadaheadEvents {
		t.Errorf("counters:\n got %+v\nwant %+v", got, want)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"read RTT", got.ReadRTTSeconds, want.ReadRTTSeconds},
		{"over-read", got.OverRead, want.OverRead},
		{"average READ", got.AvgReadBytes, want.AvgReadBytes},
		{"in flight", got.InFlight, want.InFlight},
		{"window READs", got.WindowReads, want.WindowReads},
		{"window-bound", got.WindowBound, want.WindowBound},
		{"application rate", got.AppBytesPerSecond, want.AppBytesPerSecond},
	} {
		if !near(f.got, f.want) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
}

func ptr(n int) *int { return &n }

// TestWastefulAndLimiting covers the thresholds on either side, and Mapped.
func TestWastefulAndLimiting(t *testing.T) {
	for _, tt := range []struct {
		name                       string
		e                          Evidence
		wasteful, limiting, mapped bool
	}{
		{"3.9x over 1 GiB", Evidence{ServerReadBytes: 1 << 30, AppReadBytes: (1 << 30) * 10 / 39}, true, false, false},
		{"3.9x over 100 MiB: too little", Evidence{ServerReadBytes: 100 << 20, AppReadBytes: (100 << 20) * 10 / 39}, false, false, false},
		{"1.2x", Evidence{ServerReadBytes: 1 << 30, AppReadBytes: (1 << 30) * 10 / 12}, false, false, false},
		{"window full", Evidence{Reads: 1000, AvgReadBytes: 128 << 10, WindowBound: 0.9, OverRead: 1.0}, false, true, false},
		{"window full but 50 READs", Evidence{Reads: 50, AvgReadBytes: 128 << 10, WindowBound: 0.9, OverRead: 1.0}, false, false, false},
		{"window full and wasting", Evidence{Reads: 1000, AvgReadBytes: 128 << 10, WindowBound: 0.9, OverRead: 2}, false, false, false},
		{"window half used", Evidence{Reads: 1000, AvgReadBytes: 128 << 10, WindowBound: 0.5, OverRead: 1.0}, false, false, false},
		// The random readers of the lab (16 jobs of 16 KiB reads, 50 ms round trip): 18
		// READs in flight, 8 of 16 KiB per 128 KiB window, and no window would change them.
		{"random 16 KiB READs", Evidence{Reads: 22000, AvgReadBytes: 16 << 10, WindowBound: 2.3, OverRead: 0.9}, false, false, false},
		// Read through mmap: the lab's random readers of a mapped file (scenario e) sent 3 GiB
		// in 30 s with no application bytes; a read(2) beside them leaves most unseen.
		{"no application bytes", Evidence{ServerReadBytes: 3 << 30}, false, false, true},
		{"no application bytes over 100 MiB: too little", Evidence{ServerReadBytes: 100 << 20}, false, false, false},
		{"12x over 1 GiB", Evidence{ServerReadBytes: 1 << 30, AppReadBytes: (1 << 30) / 12}, false, false, true},
		{"9x over 1 GiB: read(2)'s waste", Evidence{ServerReadBytes: 1 << 30, AppReadBytes: (1 << 30) / 9}, true, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.e.AppReadBytes > 0 {
				tt.e.OverRead = float64(tt.e.ServerReadBytes) / float64(tt.e.AppReadBytes)
			}
			tt.e.ReadAheadKB, tt.e.RSize = 128, 1<<20
			if got := tt.e.Wasteful(); got != tt.wasteful {
				t.Errorf("Wasteful() = %v, want %v (over-read %.2f)", got, tt.wasteful, tt.e.OverRead)
			}
			if got := tt.e.Limiting(); got != tt.limiting {
				t.Errorf("Limiting() = %v, want %v", got, tt.limiting)
			}
			if got := tt.e.Mapped(); got != tt.mapped {
				t.Errorf("Mapped() = %v, want %v", got, tt.mapped)
			}
		})
	}
}

// TestBetween pairs mounts by device: one with an earlier sample is measured over the
// interval, one without since its mount, one without statistics not at all.
func TestBetween(t *testing.T) {
	m0 := labMount(t, "lab-6.1-rsize-1m.0.mountstats", 1024)
	m1 := labMount(t, "lab-6.1-rsize-1m.1.mountstats", 1024)
	other := *m1
	other.Device = "0:99"
	bare := inventory.Mount{Device: "0:98"}
	got := Between(&inventory.Inventory{Mounts: []inventory.Mount{*m0}},
		&inventory.Inventory{Mounts: []inventory.Mount{*m1, other, bare}}, 10*time.Second)
	if len(got) != 2 || got["0:64"].SinceMount || got["0:64"].Seconds != 10 || !got["0:99"].SinceMount {
		t.Errorf("Between = %+v", got)
	}
}

// TestMeasureCountsReadPlus: an NFSv4.2 client of Linux 6.4 and later reads with READ_PLUS
// when the server offers it; its rows count as READs, with READ's, in every figure.
func TestMeasureCountsReadPlus(t *testing.T) {
	ra := 1024
	stats := func(read, readPlus, rttMS uint64, bytes uint64) *inventory.Stats {
		return &inventory.Stats{Age: time.Minute,
			Bytes: procfs.NFSBytesStats{Read: bytes, ReadTotal: bytes},
			Operations: []procfs.NFSOperationStats{
				{Operation: "READ", Requests: read, CumulativeTotalResponseMilliseconds: rttMS / 4},
				{Operation: "READ_PLUS", Requests: readPlus, CumulativeTotalResponseMilliseconds: rttMS - rttMS/4},
			}}
	}
	prev := stats(0, 0, 0, 0)
	// 10 s: 2 READs and 98 READ_PLUS of 1 MiB, 400 ms of RTT in all.
	m := &inventory.Mount{Device: "0:68", RSize: 1 << 20, ReadAheadKB: &ra, Stats: stats(2, 98, 400, 100<<20)}
	got := Measure(m, prev, 10*time.Second)
	if got.Reads != 100 || !near(got.AvgReadBytes, 1<<20) || !near(got.InFlight, 0.04) {
		t.Errorf("READs %d, average READ %.0f, in flight %.3f; want 100, 1048576, 0.04", got.Reads, got.AvgReadBytes, got.InFlight)
	}
	if !got.Streaming() {
		t.Error("READ_PLUS of one rsize not streaming")
	}
}

// TestCombine: two intervals as one are their counters summed over both lengths, with the
// figures derived again (not averaged).
func TestCombine(t *testing.T) {
	a := Evidence{Seconds: 5, ReadAheadKB: 1024, RSize: 1 << 20, AppReadBytes: 400 << 20, ServerReadBytes: 400 << 20, Reads: 400, ReadRTTSeconds: 2}
	b := Evidence{Seconds: 5, ReadAheadKB: 2048, RSize: 1 << 20, AppReadBytes: 600 << 20, ServerReadBytes: 900 << 20, Reads: 450, ReadRTTSeconds: 4.5}
	a.derive()
	b.derive()
	e := combine(a, b)
	// 1000 MiB read over 10 s; 1300 MiB fetched in 850 READs taking 6.5 s in all.
	if e.Seconds != 10 || e.ReadAheadKB != 2048 || e.AppReadBytes != 1000<<20 {
		t.Fatalf("combine: %+v", e)
	}
	if e.AppBytesPerSecond != 100<<20 || e.OverRead != 1.3 || e.InFlight != 0.65 {
		t.Errorf("rate %.0f B/s, over-read %.2f, in flight %.2f; want 100 MiB/s, 1.30, 0.65", e.AppBytesPerSecond, e.OverRead, e.InFlight)
	}
	if want := 1300.0 * (1 << 20) / 850; e.AvgReadBytes != want {
		t.Errorf("average READ %.0f, want %.0f", e.AvgReadBytes, want)
	}
}
