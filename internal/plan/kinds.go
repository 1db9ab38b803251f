package plan

import (
	"fmt"
	"math"
)

// Access is the direction of the workload's throughput. Services that publish different
// read and write limits (Amazon EFS, Blob NFS, Filestore) are sized for it.
type Access string

// Access values.
const (
	Read  Access = "read"
	Write Access = "write"
)

// Provision is what to create: capacity, and for services that sell them apart, IOPS and
// throughput.
type Provision struct {
	// Unit names what CapacityGiB is: "share", "pool", "file system" or "account".
	Unit string `json:"unit"`
	// CapacityGiB is the billed capacity: share size, capacity pool size, or the data
	// stored for services billed by use.
	CapacityGiB float64 `json:"capacityGiB"`
	// VolumeGiB is the Azure NetApp Files volume quota inside the pool, which sets the
	// volume's throughput under auto QoS; zero for other services.
	VolumeGiB float64 `json:"volumeGiB,omitempty"`
	// LargeVolume is set for Azure NetApp Files large volumes (50 TiB and more).
	LargeVolume bool `json:"largeVolume,omitempty"`
	// IOPS and MiBps are provisioned separately from capacity (Azure Files provisioned v2,
	// ANF Flexible, EFS provisioned); zero elsewhere.
	IOPS  float64 `json:"iops,omitempty"`
	MiBps float64 `json:"mibps,omitempty"`
	// ByUse is set when the service bills stored data, not provisioned capacity.
	ByUse bool `json:"byUse,omitempty"`
}

// Perf is what a provisioning delivers according to the published model.
type Perf struct {
	MiBps float64 // aggregate throughput for the access direction, MiB/s
	// IOPS and BurstIOPS are nil when the service publishes no IOPS model.
	IOPS      *float64
	BurstIOPS *float64
	// ClientMiBps and ClientNconnectMiBps are the published per-client limits with one
	// connection and with nconnect (or efs-proxy); zero when none is published.
	ClientMiBps         float64
	ClientNconnectMiBps float64
	Nconnect            int    // recommended nconnect, zero when none
	Multi               string // how one client uses several connections: "nconnect=4", "efs-proxy"
	Limit               string // what caps the aggregate throughput at this size
	Notes               []string
}

// modelKind holds a model's formulas; the constants come from the tier's params.
type modelKind struct {
	params []string
	// solve returns the smallest provisioning that meets n, or the reasons none does.
	solve func(t *Tier, n Need) (Provision, []string)
	// at returns the provisioning `plan show` describes for a capacity.
	at func(t *Tier, gib float64, a Access) (Provision, error)
	// deliver returns the performance of p.
	deliver func(t *Tier, p Provision, a Access) Perf
	// largest names the parameter holding the largest capacity one unit can have; empty
	// when there is no limit. grows is set when throughput grows with capacity.
	largest string
	grows   bool
	// several names several units, for scale-out hints: "shares", "volumes".
	several string
}

// kindOf returns the formulas of a model named in models.yaml.
func kindOf(model string) (modelKind, bool) {
	m, ok := modelKindTable()[model]
	return m, ok
}

// modelKindTable maps each model of models.yaml to its formulas. Each model's formulas live
// in a file named after it: efs-elastic in efs_elastic.go.
func modelKindTable() map[string]modelKind {
	return map[string]modelKind{
		"azurefiles-v1": {
			params: []string{"minGiB", "maxGiB", "iopsBase", "iopsPerGiB", "iopsMax", "burstIopsPerGiB", "burstIopsFloor",
				"burstIopsMax", "burstCreditSeconds", "mibpsBase", "mibpsIngressPerGiB", "mibpsEgressPerGiB", "mibpsMax",
				"accountMiBps", "clientMiBps", "clientNconnectMiBps", "nconnect", "fileIops", "fileReadMiBps", "fileWriteMiBps"},
			solve: solveAzureFilesV1, at: atAzureFilesV1, deliver: deliverAzureFilesV1,
			largest: "maxGiB", grows: true, several: "shares in separate storage accounts",
		},
		"azurefiles-v2": {
			params: []string{"minGiB", "maxGiB", "iopsMin", "iopsMax", "mibpsMin", "mibpsMax", "recIopsBase", "recIopsPerGiB",
				"recMiBpsBase", "recMiBpsPerGiB", "burstIopsFactor", "burstIopsFloor", "burstIopsMax", "accountMiBps",
				"clientMiBps", "clientNconnectMiBps", "nconnect", "fileIops", "fileReadMiBps", "fileWriteMiBps"},
			solve: solveAzureFilesV2, at: atAzureFilesV2, deliver: deliverAzureFilesV2,
			largest: "maxGiB", grows: true, several: "shares in separate storage accounts",
		},
		"anf-level": {
			params: []string{"mibpsPerTiB", "minVolumeGiB", "maxVolumeGiB", "volumeMaxMiBps", "largeMinGiB", "largeMaxGiB",
				"largeMaxMiBps", "poolMinTiB", "nconnect"},
			solve: solveANFLevel, at: atANFLevel, deliver: deliverANFLevel,
			largest: "largeMaxGiB", grows: true, several: "large volumes",
		},
		"anf-flexible": {
			params: []string{"poolMinMiBps", "poolMaxMiBpsPerTiB", "minVolumeGiB", "maxVolumeGiB", "volumeMaxMiBps",
				"largeMinGiB", "largeMaxGiB", "largeMaxMiBps", "poolMinTiB", "nconnect"},
			solve: solveANFFlexible, at: atANFFlexible, deliver: deliverANFFlexible,
			largest: "largeMaxGiB", grows: true, several: "large volumes",
		},
		"blob-account": {
			params: []string{"ingressGbps", "egressGbps", "requestsPerSecond", "maxGiB", "nconnect"},
			solve:  solveBlob, at: atBlob, deliver: deliverBlob,
			largest: "maxGiB", several: "storage accounts",
		},
		"efs-elastic": {
			params: []string{"readMiBps", "writeMiBps", "readIops", "writeIops", "clientMiBps", "clientProxyMiBps"},
			solve:  solveEFSElastic, at: atByUse, deliver: deliverEFSElastic,
			several: "file systems",
		},
		"efs-provisioned": {
			params: []string{"provMinMiBps", "provMaxMiBps", "readMeterFactor", "readMiBps", "writeMiBps", "readIops",
				"writeIops", "clientMiBps"},
			solve: solveEFSProvisioned, at: atEFSProvisioned, deliver: deliverEFSProvisioned,
			several: "file systems",
		},
		"filestore-zonal": {
			params: []string{"minGiB", "smallMaxGiB", "smallStepGiB", "largeMinGiB", "largeStepGiB", "maxGiB",
				"readMiBpsPerTiB", "writeMiBpsPerTiB", "readIopsPerTiB", "writeIopsPerTiB", "nconnectSmall", "nconnectLarge"},
			solve: solveFilestoreZonal, at: atFilestoreZonal, deliver: deliverFilestoreZonal,
			largest: "maxGiB", grows: true, several: "instances",
		},
	}
}

// ceil rounds up, ignoring floating-point noise such as 0.04*500 = 20.000000000000004.
func ceil(x float64) float64 { return math.Ceil(x - 1e-9) }

func ptr(v float64) *float64 { return &v }

// gbpsToMiBps converts a bandwidth in Gbit/s (10^9 bits) to MiB/s.
func gbpsToMiBps(g float64) float64 { return g * 1e9 / 8 / MiB }

// minCapacity is the smallest capacity the need allows, rounded up to whole GiB.
func minCapacity(n Need, floor float64) float64 {
	return math.Max(floor, ceil(n.Capacity.GiB()))
}

// smallest returns the smallest whole number g in [lo, hi] for which ok holds, assuming
// ok is monotonic (false then true).
func smallest(lo, hi float64, ok func(float64) bool) (float64, bool) {
	if lo > hi || !ok(hi) {
		return 0, false
	}
	for lo < hi {
		mid := math.Floor((lo + hi) / 2)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// overLargest explains why even the largest size falls short.
func overLargest(needMiBps, gotMiBps, needIOPS, gotIOPS float64, unit string, maxGiB float64) []string {
	var why []string
	if needMiBps > gotMiBps {
		why = append(why, fmt.Sprintf("needs %s, the largest %s (%s) gives %s", fmtMiBps(needMiBps), unit, fmtGiB(maxGiB), fmtMiBps(gotMiBps)))
	}
	if needIOPS > gotIOPS {
		why = append(why, fmt.Sprintf("needs %s IOPS, the largest %s (%s) gives %s", group(needIOPS), unit, fmtGiB(maxGiB), group(gotIOPS)))
	}
	return why
}

func inRange(g, lo, hi float64, unit string) error {
	if g < lo {
		return fmt.Errorf("%s is below the smallest %s (%s)", fmtGiB(g), unit, fmtGiB(lo))
	}
	if g > hi {
		return fmt.Errorf("%s is over the largest %s (%s)", fmtGiB(g), unit, fmtGiB(hi))
	}
	return nil
}

// String describes what to create, for tables.
func (p Provision) String() string {
	var s string
	switch {
	case p.ByUse && p.CapacityGiB > 0:
		s = "by use: " + shortGiB(p.CapacityGiB) + " stored"
	case p.ByUse:
		s = "by use"
	case p.Unit == "pool":
		kind := "volume"
		if p.LargeVolume {
			kind = "large volume"
		}
		s = fmt.Sprintf("pool %s TiB, %s %s", group(p.CapacityGiB/1024), kind, shortGiB(p.VolumeGiB))
	default:
		s = p.Unit + " " + shortGiB(p.CapacityGiB)
	}
	if p.IOPS > 0 {
		s += fmt.Sprintf(" + %s IOPS", group(p.IOPS))
	}
	if p.MiBps > 0 {
		s += " + " + fmtMiBps(p.MiBps)
	}
	return s
}

// shortGiB formats whole TiB as TiB and anything else as GiB.
func shortGiB(g float64) string {
	if g >= 1024 && math.Mod(g, 1024) == 0 {
		return group(g/1024) + " TiB"
	}
	return group(g) + " GiB"
}

// FormatGiB formats a capacity in GiB with thousands separators, adding TiB from 1 TiB.
func FormatGiB(g float64) string { return fmtGiB(g) }

// FormatMiBps formats a throughput in MiB/s with thousands separators.
func FormatMiBps(m float64) string { return fmtMiBps(m) }
