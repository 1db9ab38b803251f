package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Binary and decimal byte multiples. Cloud NFS services size shares in GiB and TiB
// (1 TiB = 1024 GiB) and quote throughput in MiB/s; NICs are quoted in bits per second.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
	TiB = 1 << 40
	PiB = 1 << 50

	KB = 1e3
	MB = 1e6
	GB = 1e9
	TB = 1e12
	PB = 1e15
)

// maxQuantity bounds parsed values so that arithmetic on them stays finite and exact
// enough: 1 EiB, or 1 EiB/s, is far beyond any NFS service.
const maxQuantity = 1 << 60

// Size is a capacity in bytes.
type Size float64

// GiB returns s in gibibytes.
func (s Size) GiB() float64 { return float64(s) / GiB }

// TiB returns s in tebibytes.
func (s Size) TiB() float64 { return float64(s) / TiB }

// Rate is a throughput in bytes per second.
type Rate float64

// MiBps returns r in MiB/s.
func (r Rate) MiBps() float64 { return float64(r) / MiB }

// sizeUnits are the size suffixes ParseSize accepts, exactly as spelled.
var sizeUnits = []unit{
	{"B", 1}, {"KiB", KiB}, {"MiB", MiB}, {"GiB", GiB}, {"TiB", TiB}, {"PiB", PiB},
	{"KB", KB}, {"kB", KB}, {"MB", MB}, {"GB", GB}, {"TB", TB}, {"PB", PB},
}

// rateUnits are the throughput suffixes ParseRate accepts, exactly as spelled.
// Byte rates use B, bit rates spell out "bps" or "bit/s".
var rateUnits = []unit{
	{"B/s", 1}, {"KiB/s", KiB}, {"MiB/s", MiB}, {"GiB/s", GiB}, {"TiB/s", TiB},
	{"MiBps", MiB}, {"GiBps", GiB},
	{"KB/s", KB}, {"kB/s", KB}, {"MB/s", MB}, {"GB/s", GB}, {"TB/s", TB},
	{"MBps", MB}, {"GBps", GB},
	{"Kbps", KB / 8}, {"kbps", KB / 8}, {"Mbps", MB / 8}, {"Gbps", GB / 8}, {"Tbps", TB / 8},
	{"Kbit/s", KB / 8}, {"kbit/s", KB / 8}, {"Mbit/s", MB / 8}, {"Gbit/s", GB / 8}, {"Tbit/s", TB / 8},
}

type unit struct {
	name string
	mult float64
}

const (
	acceptedSizes = "B, KiB, MiB, GiB, TiB, PiB (powers of 1024) or KB, MB, GB, TB, PB (powers of 1000)"
	acceptedRates = "MiB/s, GiB/s (also MiBps, GiBps), MB/s, GB/s (powers of 1000 bytes) or Mbps, Gbps, Mbit/s, Gbit/s (bits)"
)

// ParseSize parses a capacity such as "10TiB", "500 GiB" or "1.5TB". The unit is
// required and case-sensitive; ambiguous units such as "T" or "G" are rejected with
// an error naming both readings.
func ParseSize(s string) (Size, error) {
	v, err := parseQuantity(s, sizeUnits, "size", acceptedSizes)
	return Size(v), err
}

// ParseRate parses a throughput such as "2GiB/s", "500 MiB/s" or "12.5Gbps".
func ParseRate(s string) (Rate, error) {
	v, err := parseQuantity(s, rateUnits, "throughput", acceptedRates)
	return Rate(v), err
}

// ParseCount parses a plain non-negative integer count such as IOPS or clients.
// Digits may be grouped with underscores or commas ("100_000", "100,000").
func ParseCount(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty count")
	}
	clean := strings.NewReplacer("_", "", ",", "").Replace(t)
	if clean == "" || strings.HasPrefix(t, "_") || strings.HasPrefix(t, ",") {
		return 0, fmt.Errorf("invalid count %q: want a whole number such as 20000", s)
	}
	for _, r := range clean {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("invalid count %q: want a whole number such as 20000 (no units or suffixes)", s)
		}
	}
	n, err := strconv.ParseInt(clean, 10, 64)
	if err != nil || n > maxQuantity {
		return 0, fmt.Errorf("count %q is out of range", s)
	}
	return n, nil
}

func parseQuantity(s string, units []unit, kind, accepted string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty %s: want a number and a unit, one of %s", kind, accepted)
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, suffix := t[:i], strings.TrimPrefix(t[i:], " ")
	if num == "" {
		return 0, fmt.Errorf("invalid %s %q: want a number and a unit, one of %s", kind, s, accepted)
	}
	if strings.Count(num, ".") > 1 || strings.HasPrefix(num, ".") || strings.HasSuffix(num, ".") {
		return 0, fmt.Errorf("invalid number %q in %s %q", num, kind, s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid number %q in %s %q", num, kind, s)
	}
	if suffix == "" {
		return 0, fmt.Errorf("%s %q has no unit: want one of %s", kind, s, accepted)
	}
	for _, u := range units {
		if suffix == u.name {
			q := v * u.mult
			if q > maxQuantity || math.IsInf(q, 0) {
				return 0, fmt.Errorf("%s %q is out of range", kind, s)
			}
			return q, nil
		}
	}
	return 0, unitError(s, suffix, kind, accepted)
}

// unitError explains why suffix is not accepted, naming the readings of an
// ambiguous prefix ("T" could be TiB or TB) and pointing at a mixed-up kind.
func unitError(s, suffix, kind, accepted string) error {
	prefixes := map[string]string{"K": "Ki", "k": "Ki", "M": "Mi", "G": "Gi", "T": "Ti", "P": "Pi"}
	trimmed := strings.TrimSuffix(strings.TrimSuffix(suffix, "/s"), "ps")
	if bin, ok := prefixes[strings.TrimSuffix(trimmed, "i")]; ok && len(trimmed) <= 2 {
		dec := strings.ToUpper(trimmed[:1])
		if kind == "size" {
			return fmt.Errorf("ambiguous unit %q in %q: write %sB (powers of 1024) or %sB (powers of 1000)", suffix, s, bin, dec)
		}
		return fmt.Errorf("ambiguous unit %q in %q: write %sB/s, %sB/s or %sbps", suffix, s, bin, dec, dec)
	}
	if kind == "size" && (strings.HasSuffix(suffix, "/s") || strings.HasSuffix(suffix, "ps")) {
		return fmt.Errorf("%q is a throughput, want a size in %s", s, accepted)
	}
	if kind == "throughput" && !strings.HasSuffix(suffix, "/s") && !strings.HasSuffix(suffix, "ps") {
		return fmt.Errorf("%q is not a throughput (missing /s), want one of %s", s, accepted)
	}
	if p := strings.TrimSuffix(suffix, "b/s"); kind == "throughput" && p != suffix && len(p) == 1 && strings.Contains("kKMGT", p) {
		return fmt.Errorf("ambiguous unit %q in %q: lower-case b means bits, write %sbit/s (bits) or %sB/s (bytes)", suffix, s, p, strings.ToUpper(p))
	}
	return fmt.Errorf("unknown %s unit %q in %q: want one of %s", kind, suffix, s, accepted)
}
