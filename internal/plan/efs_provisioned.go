package plan

import (
	"fmt"
	"math"
)

// efs-provisioned, Amazon EFS with provisioned throughput: throughput is bought apart from
// the data stored, which is billed by use; reads are metered at one third of the rate of writes.

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
