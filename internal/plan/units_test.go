package plan

import (
	"strings"
	"testing"
)

var sizeTests = []struct {
	in      string
	want    float64 // bytes
	wantErr string  // substring of the error
}{
	{in: "10TiB", want: 10 * TiB},
	{in: "500 GiB", want: 500 * GiB},
	{in: "1.5TiB", want: 1.5 * TiB},
	{in: "100GiB", want: 100 * GiB},
	{in: "1PiB", want: PiB},
	{in: "4096B", want: 4096},
	{in: "64KiB", want: 64 * KiB},
	{in: "512MiB", want: 512 * MiB},
	{in: "4000GB", want: 4000 * GB},
	{in: "1TB", want: TB},
	{in: "2PB", want: 2 * PB},
	{in: "10kB", want: 10 * KB},
	{in: "10KB", want: 10 * KB},
	{in: "  7 MB ", want: 7 * MB},
	{in: "10T", wantErr: "write TiB (powers of 1024) or TB"},
	{in: "10G", wantErr: "write GiB (powers of 1024) or GB"},
	{in: "10Ti", wantErr: "write TiB"},
	{in: "10", wantErr: "has no unit"},
	{in: "", wantErr: "empty size"},
	{in: "GiB", wantErr: "want a number and a unit"},
	{in: "-1GiB", wantErr: "want a number and a unit"},
	{in: "1.2.3GiB", wantErr: "invalid number"},
	{in: ".5GiB", wantErr: "invalid number"},
	{in: "5.GiB", wantErr: "invalid number"},
	{in: "10gib", wantErr: "unknown size unit"},
	{in: "10 tb", wantErr: "unknown size unit"},
	{in: "2GiB/s", wantErr: "is a throughput, want a size"},
	{in: "1e3GiB", wantErr: "unknown size unit"},
	{in: "10  GiB", wantErr: "unknown size unit"},
	{in: "99999999999PiB", wantErr: "out of range"},
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tt := range sizeTests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSize(tt.in)
			checkParse(t, float64(got), err, tt.want, tt.wantErr)
		})
	}
}

var rateTests = []struct {
	in      string
	want    float64 // bytes per second
	wantErr string
}{
	{in: "2GiB/s", want: 2 * GiB},
	{in: "500 MiB/s", want: 500 * MiB},
	{in: "1500MiBps", want: 1500 * MiB},
	{in: "20GiBps", want: 20 * GiB},
	{in: "100MB/s", want: 100 * MB},
	{in: "1GB/s", want: GB},
	{in: "12.5Gbps", want: 12.5 * GB / 8},
	{in: "12500Mbps", want: 12500 * MB / 8},
	{in: "25Gbit/s", want: 25 * GB / 8},
	{in: "800Mbit/s", want: 800 * MB / 8},
	{in: "2G/s", wantErr: "write GiB/s, GB/s or Gbps"},
	{in: "2T/s", wantErr: "write TiB/s, TB/s or Tbps"},
	{in: "2Mb/s", wantErr: "lower-case b means bits, write Mbit/s (bits) or MB/s (bytes)"},
	{in: "10Gb/s", wantErr: "write Gbit/s (bits) or GB/s (bytes)"},
	{in: "10xb/s", wantErr: "unknown throughput unit"},
	{in: "2GiB", wantErr: "not a throughput (missing /s)"},
	{in: "2 gbps", wantErr: "unknown throughput unit"},
	{in: "2", wantErr: "has no unit"},
	{in: "fast", wantErr: "want a number and a unit"},
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for _, tt := range rateTests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRate(tt.in)
			checkParse(t, float64(got), err, tt.want, tt.wantErr)
		})
	}
}

// The accepted units are named in every unknown-unit error.
func TestUnitErrorsListAccepted(t *testing.T) {
	t.Parallel()
	if _, err := ParseSize("3 bananas"); err == nil || !strings.Contains(err.Error(), acceptedSizes) {
		t.Errorf("ParseSize error %v does not list %q", err, acceptedSizes)
	}
	if _, err := ParseRate("3 bananas/s"); err == nil || !strings.Contains(err.Error(), acceptedRates) {
		t.Errorf("ParseRate error %v does not list %q", err, acceptedRates)
	}
}

var countTests = []struct {
	in      string
	want    float64
	wantErr string
}{
	{in: "20000", want: 20000},
	{in: "100_000", want: 100000},
	{in: "102,400", want: 102400},
	{in: "0", want: 0},
	{in: "20k", wantErr: "whole number"},
	{in: "-5", wantErr: "whole number"},
	{in: "1.5", wantErr: "whole number"},
	{in: "", wantErr: "empty count"},
	{in: "_1", wantErr: "invalid count"},
	{in: "99999999999999999999", wantErr: "out of range"},
}

func TestParseCount(t *testing.T) {
	t.Parallel()
	for _, tt := range countTests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseCount(tt.in)
			checkParse(t, float64(got), err, tt.want, tt.wantErr)
		})
	}
}

func checkParse(t *testing.T, got float64, err error, want float64, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want it to contain %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, tt := range sizeTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err == nil && (v < 0 || float64(v) > maxQuantity) {
			t.Errorf("ParseSize(%q) = %v, outside [0, 1 EiB]", s, v)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, tt := range rateTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err == nil && (v < 0 || float64(v) > maxQuantity) {
			t.Errorf("ParseRate(%q) = %v, outside [0, 1 EiB/s]", s, v)
		}
	})
}

func FuzzParseCount(f *testing.F) {
	for _, tt := range countTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCount(s)
		if err == nil && v < 0 {
			t.Errorf("ParseCount(%q) = %d, negative", s, v)
		}
	})
}
