package plan

import (
	"fmt"
	"math"
)

// anf-level, Azure NetApp Files Standard, Premium and Ultra with auto QoS: the volume quota sets the
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
