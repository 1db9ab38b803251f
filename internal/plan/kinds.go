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

// Azure Files provisioned v1: IOPS and throughput follow the share size.

func azureFilesV1MiBps(t *Tier, g float64) float64 {
	return math.Min(t.p("mibpsBase")+ceil(t.p("mibpsIngressPerGiB")*g)+ceil(t.p("mibpsEgressPerGiB")*g), t.p("mibpsMax"))
}

func azureFilesV1IOPS(t *Tier, g float64) float64 {
	return math.Min(t.p("iopsBase")+ceil(t.p("iopsPerGiB")*g), t.p("iopsMax"))
}

func solveAzureFilesV1(t *Tier, n Need) (Provision, []string) {
	lo, hi := minCapacity(n, t.p("minGiB")), t.p("maxGiB")
	if lo > hi {
		return Provision{}, []string{fmt.Sprintf("capacity %s is over the largest share (%s)", fmtGiB(lo), fmtGiB(hi))}
	}
	need := n.Throughput.MiBps()
	g, ok := smallest(lo, hi, func(g float64) bool {
		return azureFilesV1MiBps(t, g) >= need && azureFilesV1IOPS(t, g) >= float64(n.IOPS)
	})
	if !ok {
		return Provision{}, overLargest(need, azureFilesV1MiBps(t, hi), float64(n.IOPS), azureFilesV1IOPS(t, hi), "share", hi)
	}
	return Provision{Unit: "share", CapacityGiB: g}, nil
}

func atAzureFilesV1(t *Tier, g float64, _ Access) (Provision, error) {
	if err := inRange(g, t.p("minGiB"), t.p("maxGiB"), "share"); err != nil {
		return Provision{}, err
	}
	return Provision{Unit: "share", CapacityGiB: ceil(g)}, nil
}

func deliverAzureFilesV1(t *Tier, p Provision, _ Access) Perf {
	g := p.CapacityGiB
	iops := azureFilesV1IOPS(t, g)
	burst := math.Min(math.Max(t.p("burstIopsPerGiB")*g, t.p("burstIopsFloor")), t.p("burstIopsMax"))
	mibps := azureFilesV1MiBps(t, g)
	limit := "share size"
	if mibps >= t.p("mibpsMax") {
		limit = "share maximum"
	}
	perf := Perf{
		MiBps: mibps, IOPS: ptr(iops), BurstIOPS: ptr(math.Max(burst, iops)),
		ClientMiBps: t.p("clientMiBps"), ClientNconnectMiBps: t.p("clientNconnectMiBps"), Nconnect: int(t.p("nconnect")),
		Limit: limit,
		Notes: []string{
			fmt.Sprintf("storage account limit %s shared by all its shares", fmtMiBps(t.p("accountMiBps"))),
			azureFilesPerFile(t),
		},
	}
	if burst > iops {
		perf.Notes = append(perf.Notes, fmt.Sprintf("burst IOPS are best effort from a credit bucket of %s IO",
			group((burst-iops)*t.p("burstCreditSeconds"))))
	}
	return perf
}

func azureFilesPerFile(t *Tier) string {
	return fmt.Sprintf("one file gets at most about %s IOPS, %s of reads and %s of writes: spread load over files",
		group(t.p("fileIops")), fmtMiBps(t.p("fileReadMiBps")), fmtMiBps(t.p("fileWriteMiBps")))
}

// Azure Files provisioned v2: storage, IOPS and throughput are bought separately.

func azureFilesV2Rec(t *Tier, g float64) (iops, mibps float64) {
	iops = math.Min(math.Max(t.p("recIopsBase")+ceil(t.p("recIopsPerGiB")*g), t.p("iopsMin")), t.p("iopsMax"))
	mibps = math.Min(math.Max(t.p("recMiBpsBase")+ceil(t.p("recMiBpsPerGiB")*g), t.p("mibpsMin")), t.p("mibpsMax"))
	return iops, mibps
}

func solveAzureFilesV2(t *Tier, n Need) (Provision, []string) {
	g := minCapacity(n, t.p("minGiB"))
	var why []string
	if g > t.p("maxGiB") {
		why = append(why, fmt.Sprintf("capacity %s is over the largest share (%s)", fmtGiB(g), fmtGiB(t.p("maxGiB"))))
	}
	mibps := math.Max(ceil(n.Throughput.MiBps()), t.p("mibpsMin"))
	if mibps > t.p("mibpsMax") {
		why = append(why, fmt.Sprintf("needs %s, a share can be provisioned with at most %s", fmtMiBps(mibps), fmtMiBps(t.p("mibpsMax"))))
	}
	recIOPS, _ := azureFilesV2Rec(t, g)
	iops := recIOPS
	if n.IOPS > 0 {
		iops = math.Max(float64(n.IOPS), t.p("iopsMin"))
	}
	if iops > t.p("iopsMax") {
		why = append(why, fmt.Sprintf("needs %s IOPS, a share can be provisioned with at most %s", group(iops), group(t.p("iopsMax"))))
	}
	if len(why) > 0 {
		return Provision{}, why
	}
	return Provision{Unit: "share", CapacityGiB: g, IOPS: iops, MiBps: mibps}, nil
}

func atAzureFilesV2(t *Tier, g float64, _ Access) (Provision, error) {
	if err := inRange(g, t.p("minGiB"), t.p("maxGiB"), "share"); err != nil {
		return Provision{}, err
	}
	g = ceil(g)
	iops, mibps := azureFilesV2Rec(t, g)
	return Provision{Unit: "share", CapacityGiB: g, IOPS: iops, MiBps: mibps}, nil
}

func deliverAzureFilesV2(t *Tier, p Provision, _ Access) Perf {
	burst := math.Min(math.Max(t.p("burstIopsFactor")*p.IOPS, t.p("burstIopsFloor")), t.p("burstIopsMax"))
	return Perf{
		MiBps: p.MiBps, IOPS: ptr(p.IOPS), BurstIOPS: ptr(math.Max(burst, p.IOPS)),
		ClientMiBps: t.p("clientMiBps"), ClientNconnectMiBps: t.p("clientNconnectMiBps"), Nconnect: int(t.p("nconnect")),
		Limit: "provisioned throughput",
		Notes: []string{
			fmt.Sprintf("classic storage account limit %s shared by its shares", fmtMiBps(t.p("accountMiBps"))),
			azureFilesPerFile(t),
			"decreases are allowed 24 hours after the last increase",
		},
	}
}

// Azure NetApp Files Standard, Premium and Ultra with auto QoS: the volume quota sets the
// volume's throughput; the capacity pool, billed whole TiB, holds the quota.

func anfPool(t *Tier, quotaGiB, mibps, perTiBMax float64) float64 {
	pool := math.Max(t.p("poolMinTiB"), ceil(quotaGiB/1024))
	if perTiBMax > 0 {
		pool = math.Max(pool, ceil(mibps/perTiBMax))
	}
	return pool * 1024
}

func anfLevelMiBps(t *Tier, quota float64, large bool) float64 {
	limit := t.p("volumeMaxMiBps")
	if large {
		limit = t.p("largeMaxMiBps")
	}
	return math.Min(quota/1024*t.p("mibpsPerTiB"), limit)
}

func solveANFLevel(t *Tier, n Need) (Provision, []string) {
	need := n.Throughput.MiBps()
	quota := math.Max(minCapacity(n, t.p("minVolumeGiB")), ceil(need*1024/t.p("mibpsPerTiB")))
	if quota <= t.p("maxVolumeGiB") && need <= t.p("volumeMaxMiBps") {
		return Provision{Unit: "pool", CapacityGiB: anfPool(t, quota, 0, 0), VolumeGiB: quota}, nil
	}
	quota = math.Max(quota, t.p("largeMinGiB"))
	var why []string
	if need > t.p("largeMaxMiBps") {
		why = append(why, fmt.Sprintf("needs %s, one large volume gives at most %s", fmtMiBps(need), fmtMiBps(t.p("largeMaxMiBps"))))
	} else if quota > t.p("largeMaxGiB") {
		why = append(why, fmt.Sprintf("needs a %s volume, over the largest large volume (%s)", fmtGiB(quota), fmtGiB(t.p("largeMaxGiB"))))
	}
	if len(why) > 0 {
		return Provision{}, why
	}
	return Provision{Unit: "pool", CapacityGiB: anfPool(t, quota, 0, 0), VolumeGiB: quota, LargeVolume: true}, nil
}

// anfVolume picks regular or large for a given quota, preferring whichever delivers more.
func anfVolume(t *Tier, g float64, deliver func(large bool) float64) (large bool, err error) {
	regular := g >= t.p("minVolumeGiB") && g <= t.p("maxVolumeGiB")
	largeOK := g >= t.p("largeMinGiB") && g <= t.p("largeMaxGiB")
	switch {
	case regular && largeOK:
		return deliver(true) > deliver(false), nil
	case regular:
		return false, nil
	case largeOK:
		return true, nil
	}
	if g < t.p("minVolumeGiB") {
		return false, fmt.Errorf("%s is below the smallest volume (%s)", fmtGiB(g), fmtGiB(t.p("minVolumeGiB")))
	}
	return false, fmt.Errorf("%s is over the largest volume (%s)", fmtGiB(g), fmtGiB(t.p("largeMaxGiB")))
}

func atANFLevel(t *Tier, g float64, _ Access) (Provision, error) {
	g = ceil(g)
	large, err := anfVolume(t, g, func(large bool) float64 { return anfLevelMiBps(t, g, large) })
	if err != nil {
		return Provision{}, err
	}
	return Provision{Unit: "pool", CapacityGiB: anfPool(t, g, 0, 0), VolumeGiB: g, LargeVolume: large}, nil
}

func deliverANFLevel(t *Tier, p Provision, _ Access) Perf {
	mibps := anfLevelMiBps(t, p.VolumeGiB, p.LargeVolume)
	limit := fmt.Sprintf("volume quota x %g MiB/s per TiB", t.p("mibpsPerTiB"))
	switch {
	case p.LargeVolume && mibps >= t.p("largeMaxMiBps"):
		limit = "large volume maximum"
	case !p.LargeVolume && mibps >= t.p("volumeMaxMiBps"):
		limit = "regular volume maximum"
	}
	notes := []string{"no published IOPS model per size; one regular volume measured about 460k 4 KiB random reads/s"}
	if pool := p.CapacityGiB / 1024 * t.p("mibpsPerTiB"); pool > mibps {
		notes = append(notes, fmt.Sprintf("with manual QoS the pool's %s can go to this volume", fmtMiBps(pool)))
	}
	return Perf{MiBps: mibps, Limit: limit, Nconnect: int(t.p("nconnect")), Notes: notes}
}

// Azure NetApp Files Flexible: throughput is bought apart from capacity, 128 MiB/s included
// per pool and at most 640 MiB/s per TiB of pool.

func flexibleVolumeMax(t *Tier, large bool) float64 {
	if large {
		return t.p("largeMaxMiBps")
	}
	return t.p("volumeMaxMiBps")
}

func solveANFFlexible(t *Tier, n Need) (Provision, []string) {
	quota := minCapacity(n, t.p("minVolumeGiB"))
	mibps := math.Max(ceil(n.Throughput.MiBps()), t.p("poolMinMiBps"))
	large := quota > t.p("maxVolumeGiB") || mibps > t.p("volumeMaxMiBps")
	if large {
		quota = math.Max(quota, t.p("largeMinGiB"))
	}
	switch {
	case mibps > t.p("largeMaxMiBps"):
		return Provision{}, []string{fmt.Sprintf("needs %s, one large volume gives at most %s", fmtMiBps(mibps), fmtMiBps(t.p("largeMaxMiBps")))}
	case quota > t.p("largeMaxGiB"):
		return Provision{}, []string{fmt.Sprintf("capacity %s is over the largest large volume (%s)", fmtGiB(quota), fmtGiB(t.p("largeMaxGiB")))}
	}
	return Provision{Unit: "pool", CapacityGiB: anfPool(t, quota, mibps, t.p("poolMaxMiBpsPerTiB")), VolumeGiB: quota,
		LargeVolume: large, MiBps: mibps}, nil
}

func atANFFlexible(t *Tier, g float64, _ Access) (Provision, error) {
	g = ceil(g)
	pool := anfPool(t, g, 0, 0)
	maxFor := func(large bool) float64 {
		return math.Min(pool/1024*t.p("poolMaxMiBpsPerTiB"), flexibleVolumeMax(t, large))
	}
	large, err := anfVolume(t, g, maxFor)
	if err != nil {
		return Provision{}, err
	}
	return Provision{Unit: "pool", CapacityGiB: pool, VolumeGiB: g, LargeVolume: large, MiBps: maxFor(large)}, nil
}

func deliverANFFlexible(t *Tier, p Provision, _ Access) Perf {
	pool := p.CapacityGiB / 1024
	return Perf{
		MiBps: math.Min(p.MiBps, flexibleVolumeMax(t, p.LargeVolume)),
		Limit: "provisioned throughput", Nconnect: int(t.p("nconnect")),
		Notes: []string{
			fmt.Sprintf("pool of %g TiB: %s included, up to %s purchasable", pool, fmtMiBps(t.p("poolMinMiBps")),
				fmtMiBps(math.Min(pool*t.p("poolMaxMiBpsPerTiB"), flexibleVolumeMax(t, p.LargeVolume)))),
			"no published IOPS model per size",
		},
	}
}

// Azure Blob NFS 3.0: no provisioning; the storage account's bandwidth is the limit.

func blobMiBps(t *Tier, a Access) (float64, string) {
	if a == Write {
		return gbpsToMiBps(t.p("ingressGbps")), "account ingress"
	}
	return gbpsToMiBps(t.p("egressGbps")), "account egress"
}

func solveBlob(t *Tier, n Need) (Provision, []string) {
	var why []string
	if g := n.Capacity.GiB(); g > t.p("maxGiB") {
		why = append(why, fmt.Sprintf("capacity %s is over the account limit (%s)", fmtGiB(g), fmtGiB(t.p("maxGiB"))))
	}
	need := n.Throughput.MiBps()
	if limit, what := blobMiBps(t, n.Access); need > limit {
		why = append(why, fmt.Sprintf("needs %s, the %s limit is %s", fmtMiBps(need), what, fmtMiBps(limit)))
	}
	if float64(n.IOPS) > t.p("requestsPerSecond") {
		why = append(why, fmt.Sprintf("needs %s IOPS, the account serves %s requests/s", group(float64(n.IOPS)), group(t.p("requestsPerSecond"))))
	}
	if len(why) > 0 {
		return Provision{}, why
	}
	return Provision{Unit: "account", CapacityGiB: ceil(n.Capacity.GiB()), ByUse: true}, nil
}

func atBlob(t *Tier, g float64, _ Access) (Provision, error) {
	if g > t.p("maxGiB") {
		return Provision{}, fmt.Errorf("%s is over the account limit (%s)", fmtGiB(g), fmtGiB(t.p("maxGiB")))
	}
	return Provision{Unit: "account", CapacityGiB: ceil(g), ByUse: true}, nil
}

func deliverBlob(t *Tier, _ Provision, a Access) Perf {
	mibps, what := blobMiBps(t, a)
	return Perf{
		MiBps: mibps, IOPS: ptr(t.p("requestsPerSecond")), Limit: what, Nconnect: int(t.p("nconnect")),
		Notes: []string{
			"scales with the number of clients up to the account limits; higher limits by support request",
			"nconnect only on kernels with Azure nconnect support (enable_azure_nconnect)",
		},
	}
}

// Amazon EFS: elastic capacity, billed by use; throughput per file system.

func atByUse(_ *Tier, g float64, _ Access) (Provision, error) {
	return Provision{Unit: "file system", CapacityGiB: ceil(g), ByUse: true}, nil
}

func efsDirection(t *Tier, a Access) (mibps, iops float64) {
	if a == Write {
		return t.p("writeMiBps"), t.p("writeIops")
	}
	return t.p("readMiBps"), t.p("readIops")
}

func solveEFSElastic(t *Tier, n Need) (Provision, []string) {
	mibps, iops := efsDirection(t, n.Access)
	var why []string
	if need := n.Throughput.MiBps(); need > mibps {
		why = append(why, fmt.Sprintf("needs %s, a file system gives %s of %ss", fmtMiBps(need), fmtMiBps(mibps), n.Access))
	}
	if float64(n.IOPS) > iops {
		why = append(why, fmt.Sprintf("needs %s IOPS, a file system gives %s %s IOPS", group(float64(n.IOPS)), group(iops), n.Access))
	}
	if len(why) > 0 {
		return Provision{}, why
	}
	return Provision{Unit: "file system", CapacityGiB: ceil(n.Capacity.GiB()), ByUse: true}, nil
}

func deliverEFSElastic(t *Tier, _ Provision, a Access) Perf {
	mibps, iops := efsDirection(t, a)
	return Perf{
		MiBps: mibps, IOPS: ptr(iops), Limit: "file system " + string(a) + " limit",
		ClientMiBps: t.p("clientMiBps"), ClientNconnectMiBps: t.p("clientProxyMiBps"), Multi: "efs-proxy",
		Notes: []string{"the nconnect column assumes efs-proxy (efs-utils >= 2.0), which spreads one mount over several connections"},
	}
}

func efsProvisionedMiBps(t *Tier, prov float64, a Access) float64 {
	if a == Write {
		return math.Min(prov, t.p("writeMiBps"))
	}
	return math.Min(prov*t.p("readMeterFactor"), t.p("readMiBps"))
}

func solveEFSProvisioned(t *Tier, n Need) (Provision, []string) {
	need := n.Throughput.MiBps()
	mibps, iops := efsDirection(t, n.Access)
	prov := ceil(need)
	if n.Access == Read {
		prov = ceil(need / t.p("readMeterFactor"))
	}
	prov = math.Max(prov, t.p("provMinMiBps"))
	var why []string
	switch {
	case need > mibps:
		why = append(why, fmt.Sprintf("needs %s, a file system gives at most %s of %ss", fmtMiBps(need), fmtMiBps(mibps), n.Access))
	case prov > t.p("provMaxMiBps"):
		why = append(why, fmt.Sprintf("needs %s provisioned, the maximum is %s", fmtMiBps(prov), fmtMiBps(t.p("provMaxMiBps"))))
	}
	if float64(n.IOPS) > iops {
		why = append(why, fmt.Sprintf("needs %s IOPS, a file system gives %s %s IOPS", group(float64(n.IOPS)), group(iops), n.Access))
	}
	if len(why) > 0 {
		return Provision{}, why
	}
	return Provision{Unit: "file system", CapacityGiB: ceil(n.Capacity.GiB()), ByUse: true, MiBps: prov}, nil
}

func atEFSProvisioned(t *Tier, g float64, _ Access) (Provision, error) {
	return Provision{Unit: "file system", CapacityGiB: ceil(g), ByUse: true, MiBps: t.p("provMaxMiBps")}, nil
}

func deliverEFSProvisioned(t *Tier, p Provision, a Access) Perf {
	mibps := efsProvisionedMiBps(t, p.MiBps, a)
	_, iops := efsDirection(t, a)
	limit := "provisioned throughput"
	if fsMax, _ := efsDirection(t, a); mibps >= fsMax {
		limit = "file system " + string(a) + " limit"
	}
	return Perf{
		MiBps: mibps, IOPS: ptr(iops), Limit: limit, ClientMiBps: t.p("clientMiBps"), ClientNconnectMiBps: t.p("clientMiBps"),
		Notes: []string{"reads are metered at one third of the rate of writes"},
	}
}

// Google Filestore zonal: performance per TiB of instance capacity.

func filestoreSizes(t *Tier) []float64 {
	var sizes []float64
	for g := t.p("minGiB"); g <= t.p("smallMaxGiB"); g += t.p("smallStepGiB") {
		sizes = append(sizes, g)
	}
	for g := t.p("largeMinGiB"); g <= t.p("maxGiB"); g += t.p("largeStepGiB") {
		sizes = append(sizes, g)
	}
	return sizes
}

func filestorePerf(t *Tier, g float64, a Access) (mibps, iops float64) {
	if a == Write {
		return g / 1024 * t.p("writeMiBpsPerTiB"), g / 1024 * t.p("writeIopsPerTiB")
	}
	return g / 1024 * t.p("readMiBpsPerTiB"), g / 1024 * t.p("readIopsPerTiB")
}

func solveFilestoreZonal(t *Tier, n Need) (Provision, []string) {
	lo := n.Capacity.GiB()
	for _, g := range filestoreSizes(t) {
		mibps, iops := filestorePerf(t, g, n.Access)
		if g >= lo && mibps >= n.Throughput.MiBps() && iops >= float64(n.IOPS) {
			return Provision{Unit: "instance", CapacityGiB: g}, nil
		}
	}
	hi := t.p("maxGiB")
	if lo > hi {
		return Provision{}, []string{fmt.Sprintf("capacity %s is over the largest instance (%s)", fmtGiB(lo), fmtGiB(hi))}
	}
	mibps, iops := filestorePerf(t, hi, n.Access)
	return Provision{}, overLargest(n.Throughput.MiBps(), mibps, float64(n.IOPS), iops, "instance", hi)
}

func atFilestoreZonal(t *Tier, g float64, _ Access) (Provision, error) {
	if err := inRange(g, t.p("minGiB"), t.p("maxGiB"), "instance"); err != nil {
		return Provision{}, err
	}
	for _, s := range filestoreSizes(t) {
		if s >= g {
			return Provision{Unit: "instance", CapacityGiB: s}, nil
		}
	}
	return Provision{}, fmt.Errorf("%s is between the instance sizes", fmtGiB(g))
}

func deliverFilestoreZonal(t *Tier, p Provision, a Access) Perf {
	mibps, iops := filestorePerf(t, p.CapacityGiB, a)
	nc := t.p("nconnectSmall")
	if p.CapacityGiB >= t.p("largeMinGiB") {
		nc = t.p("nconnectLarge")
	}
	return Perf{MiBps: mibps, IOPS: ptr(iops), Limit: "instance size", Nconnect: int(nc)}
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
