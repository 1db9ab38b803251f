package plan

import (
	"fmt"
	"math"
)

// azurefiles-v1, Azure Files provisioned v1: IOPS and throughput follow the share size.

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
