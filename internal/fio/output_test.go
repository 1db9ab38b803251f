package fio

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// The fixtures were recorded with fio 3.33 on a local ext4 directory; the expected values
// were read from the same files with a separate JSON reader.
func TestSummarizeRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file                string
		entries             int
		readBps, writeBps   float64
		readIOPS, writeIOPS float64
		p50, p99            float64
		latSource           string
	}{
		// A "note:" line precedes the JSON on stdout; lat_ns has samples but no
		// percentiles without lat_percentiles=1, so clat_ns is used.
		{file: "preamble-note.json", entries: 1, readBps: 1048576000, readIOPS: 256000, p50: 820, p99: 1464, latSource: "clat_ns"},
		// --status-interval prints four concatenated documents; the last is final.
		{file: "status-interval.json", entries: 1, readBps: 309184575, readIOPS: 75484.515485, p50: 86528, p99: 175104, latSource: "clat_ns"},
		// Options before --name are only in "global options"; numjobs=2 without
		// group_reporting gives two entries to add up.
		{file: "global-options-no-group.json", entries: 2, readBps: 154702296 + 153756593, readIOPS: 37769.115442 + 37538.230885, p50: 366592, p99: 1908736, latSource: "clat_ns"},
		// group_reporting folds 4 jobs into one entry; lat_percentiles=1 fills lat_ns.
		{file: "group-reporting-4jobs.json", entries: 1, writeBps: 925639503, writeIOPS: 28248.275862, p50: 134144, p99: 193536, latSource: "lat_ns"},
		// Both directions: latency comes from the one with more samples (read: 71849
		// against 71330).
		{file: "clat-only-randrw.json", entries: 1, readBps: 294146430, writeBps: 292021669, readIOPS: 35906.546727, writeIOPS: 35647.176412, p50: 88576, p99: 175104, latSource: "clat_ns"},
		// filecreate: io_bytes and iops are size bookkeeping; the 4000 files created in
		// 933 ms are the operations, and no bytes move.
		{file: "filecreate.json", entries: 1, readIOPS: 4000 / 0.933, p50: 419840, p99: 8454144, latSource: "clat_ns"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			o, err := Parse(readFixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if o.Version != "fio-3.33" {
				t.Errorf("version = %q", o.Version)
			}
			s := Summarize(o)
			checks := []struct {
				name      string
				got, want float64
			}{
				{"entries", float64(s.Entries), float64(tt.entries)},
				{"read B/s", s.ReadBytesPerSec, tt.readBps},
				{"write B/s", s.WriteBytesPerSec, tt.writeBps},
				{"read IOPS", s.ReadIOPS, tt.readIOPS},
				{"write IOPS", s.WriteIOPS, tt.writeIOPS},
				{"p50", s.LatP50NS, tt.p50},
				{"p99", s.LatP99NS, tt.p99},
			}
			for _, c := range checks {
				if !near(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
				}
			}
			if s.LatSource != tt.latSource {
				t.Errorf("lat source = %q, want %q", s.LatSource, tt.latSource)
			}
			if s.Errors != 0 {
				t.Errorf("errors = %d", s.Errors)
			}
		})
	}
}

func TestOptionFallsBackToGlobal(t *testing.T) {
	t.Parallel()
	o, err := Parse(readFixture(t, "global-options-no-group.json"))
	if err != nil {
		t.Fatal(err)
	}
	j := &o.Jobs[0]
	if v, ok := o.Option(j, "ioengine"); !ok || v != "libaio" {
		t.Errorf("ioengine = %q, %v; want libaio from global options", v, ok)
	}
	if v, ok := o.Option(j, "rw"); !ok || v != "randread" {
		t.Errorf("rw = %q, %v; want randread from job options", v, ok)
	}
	if _, ok := o.Option(j, "stonewall"); ok {
		t.Error("stonewall found, want absent")
	}
}

var parseTests = []struct {
	name    string
	in      string
	wantErr error
	jobs    int
}{
	{name: "empty", in: "", wantErr: ErrNoJSON},
	{name: "only notes", in: "note: both iodepth >= 1 and synchronous I/O engine are selected\n", wantErr: ErrNoJSON},
	{name: "truncated", in: "{\n \"fio version\" : \"fio-3.33\",\n \"jobs\" : [ {", wantErr: errAny},
	{name: "no jobs", in: "{\"fio version\": \"fio-3.33\", \"jobs\": []}\n", wantErr: errAny},
	{name: "trailing garbage", in: "{\"jobs\": [{\"jobname\": \"a\"}]}\nfio: pid=1, got signal=15\n", jobs: 1},
	{name: "indented start", in: "fio: warning\n  {\"jobs\": [{\"jobname\": \"a\"}]}", jobs: 1},
	{name: "client stats", in: "{\"client_stats\": [{\"jobname\": \"a\"}, {\"jobname\": \"All clients\"}]}", jobs: 2},
	{name: "wrong type", in: "{\"jobs\": [{\"jobname\": 5}]}", wantErr: errAny},
}

var errAny = errors.New("any error")

func TestParseTable(t *testing.T) {
	t.Parallel()
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := Parse([]byte(tt.in))
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && len(o.Jobs) != tt.jobs {
				t.Errorf("jobs = %d, want %d", len(o.Jobs), tt.jobs)
			}
		})
	}
}

func TestPercentileKeys(t *testing.T) {
	t.Parallel()
	l := Latency{N: 3, Percentiles: map[string]float64{"99.000000": 7, "50": 3, "99.900000": 9, "bogus": 1}}
	for _, tt := range []struct {
		p    float64
		want float64
		ok   bool
	}{{99, 7, true}, {50, 3, true}, {99.9, 9, true}, {95, 0, false}} {
		got, ok := l.Percentile(tt.p)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Percentile(%v) = %v, %v; want %v, %v", tt.p, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add([]byte(tt.in))
	}
	f.Add(readFixtureF(f, "status-interval.json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Parse(b)
		if err == nil {
			Summarize(o) // must never panic
		}
	})
}

func readFixtureF(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// TestSummarizeMixAllDirections: four sections run together (bench curve's mix). The
// write direction has the most samples (3202 creates and 3200 writes against 3200 stats
// and 3200 reads), so the busiest direction's p99 is the creates' 70144 ns; the reads'
// 460800 ns tail shows only in the figures over every direction.
func TestSummarizeMixAllDirections(t *testing.T) {
	t.Parallel()
	o, err := Parse(readFixture(t, "mix-sections.json"))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(o)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"entries", float64(s.Entries), 4},
		{"busiest p99", s.LatP99NS, 70144},
		{"all p99", s.AllP99NS, 460800},
		{"all p50", s.AllP50NS, (15424*3202 + 2544*3200 + 90624*3200 + 5600*3200) / 12802.0},
		{"read IOPS", s.ReadIOPS, 3200/2.002 + 1599.2004},
		{"write IOPS", s.WriteIOPS, 3202/2.001 + 1599.2004},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
