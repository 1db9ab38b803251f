package plan

import "fmt"

// blob-account, Azure Blob NFS 3.0: no provisioning; the storage account's bandwidth is the limit.

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
