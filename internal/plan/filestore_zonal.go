package plan

import "fmt"

// filestore-zonal, Google Filestore zonal: performance per TiB of instance capacity.

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
