package plan

import (
	"fmt"
	"math"
)

// anf-flexible, Azure NetApp Files Flexible: throughput is bought apart from capacity, 128 MiB/s included
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
