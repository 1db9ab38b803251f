package plan

import "fmt"

// efs-elastic, Amazon EFS with elastic throughput: elastic capacity, billed by use; throughput per file system.

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
