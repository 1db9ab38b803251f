package plan

import (
	"fmt"
	"math"
)

// azurefiles-v2, Azure Files provisioned v2: storage, IOPS and throughput are bought separately.

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
