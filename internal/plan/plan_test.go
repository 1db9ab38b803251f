package plan

import (
	"strings"
	"testing"
)

func option(r *Result, service, tier string) *Option {
	for i := range r.Options {
		if r.Options[i].Service == service && r.Options[i].Tier == tier {
			return &r.Options[i]
		}
	}
	return nil
}

func rejection(r *Result, service, tier string) *Rejection {
	for i := range r.Rejected {
		if r.Rejected[i].Service == service && r.Rejected[i].Tier == tier {
			return &r.Rejected[i]
		}
	}
	return nil
}

func mustPlan(t *testing.T, c *Catalog, p *Prices, n Need) *Result {
	t.Helper()
	if n.Access == "" {
		n.Access = Read
	}
	r, err := Plan(c, p, n)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return r
}

// The size a plan picks meets the need, and one unit less does not (or is the minimum).
func TestPlanPicksSmallestSize(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, mibps := range []float64{1, 110, 150, 151, 203, 500, 999, 2048, 4500, 5220, 10339, 10340} {
		r := mustPlan(t, c, nil, Need{Throughput: Rate(mibps * MiB)})
		for _, tier := range []struct{ service, tier, unit string }{
			{"azure-files", "provisioned-v1", "share"},
			{"azure-netapp-files", "premium", "volume"},
			{"azure-netapp-files", "ultra", "volume"},
			{"gcp-filestore", "zonal", "instance"},
		} {
			o := option(r, tier.service, tier.tier)
			if o == nil {
				if rej := rejection(r, tier.service, tier.tier); rej == nil || len(rej.Reasons) == 0 {
					t.Errorf("%v MiB/s: %s/%s neither fits nor says why", mibps, tier.service, tier.tier)
				}
				continue
			}
			if o.MiBps < mibps {
				t.Errorf("%v MiB/s: %s/%s delivers %v", mibps, tier.service, tier.tier, o.MiBps)
			}
			g := o.Provision.CapacityGiB
			if o.Provision.VolumeGiB > 0 {
				g = o.Provision.VolumeGiB
			}
			step := 1.0
			if tier.service == "gcp-filestore" {
				step = 256
				if g > 10240 {
					step = 2560
				}
			}
			smaller, err := Show(c, nil, tier.service, tier.tier, Size((g-step)*GiB), Need{Access: Read})
			if err != nil {
				t.Fatal(err)
			}
			if len(smaller.Options) == 1 && smaller.Options[0].MiBps >= mibps && !o.Provision.LargeVolume {
				t.Errorf("%v MiB/s: %s/%s picked %v GiB but %v GiB gives %v", mibps, tier.service, tier.tier, g, g-step, smaller.Options[0].MiBps)
			}
		}
	}
}

func TestPlanAzureFilesTwoGiBps(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	r := mustPlan(t, c, nil, Need{Throughput: 2 * GiB, Capacity: 10 * TiB, ClientNIC: 12.5 * GB / 8})
	o := option(r, "azure-files", "provisioned-v1")
	if o == nil {
		t.Fatalf("azure-files v1 missing; rejected: %+v", r.Rejected)
	}
	// 100 + ceil(0.04 g) + ceil(0.06 g) >= 2048 first holds at 19,467 GiB.
	if o.Provision.CapacityGiB != 19467 || o.MiBps != 2048 {
		t.Errorf("provision %v GiB giving %v MiB/s, want 19467 GiB giving 2048", o.Provision.CapacityGiB, o.MiBps)
	}
	// 512 MiB/s per client without nconnect; with nconnect the 12.5 Gbit/s NIC (1,490 MiB/s) binds.
	if *o.ClientsNeeded != 4 || *o.ClientsNeededNconnect != 2 {
		t.Errorf("clients = %d / %d, want 4 / 2", *o.ClientsNeeded, *o.ClientsNeededNconnect)
	}
	if !near(o.ClientNconnectMiBps, 12.5e9/8/MiB) {
		t.Errorf("per-client with nconnect = %v, want the NIC's %v", o.ClientNconnectMiBps, 12.5e9/8/MiB)
	}
	if got := strings.Join(o.LimitedBy, "; "); !strings.Contains(got, "NIC with nconnect") {
		t.Errorf("limitedBy = %q, want the NIC named", got)
	}
	if r.RankedBy != RankedByCapacity {
		t.Errorf("rankedBy = %q, want %q", r.RankedBy, RankedByCapacity)
	}
	// v2 buys throughput apart: 10 TiB of storage and 2,048 MiB/s.
	v2 := option(r, "azure-files", "provisioned-v2")
	if v2 == nil || v2.Provision.CapacityGiB != 10240 || v2.Provision.MiBps != 2048 || v2.Provision.IOPS != 13240 {
		t.Errorf("v2 = %+v, want 10240 GiB, 2048 MiB/s, 13240 IOPS", v2)
	}
	// ANF Premium needs 32 TiB of quota for 2,048 MiB/s.
	if p := option(r, "azure-netapp-files", "premium"); p == nil || p.Provision.VolumeGiB != 32768 || p.Provision.CapacityGiB != 32768 {
		t.Errorf("anf premium = %+v, want a 32 TiB volume and pool", p)
	}
	// EFS provisioned: 2,048 MiB/s of reads needs 683 MiB/s provisioned.
	if e := option(r, "aws-efs", "provisioned"); e == nil || e.Provision.MiBps != 683 {
		t.Errorf("efs provisioned = %+v, want 683 MiB/s provisioned", e)
	}
	// ranked by capacity: Azure Files v2 (10 TiB) before v1 (19,467 GiB).
	if i, j := index(r, "azure-files", "provisioned-v2"), index(r, "azure-files", "provisioned-v1"); i > j {
		t.Errorf("v2 ranked %d after v1 %d", i, j)
	}
}

func index(r *Result, service, tier string) int {
	for i, o := range r.Options {
		if o.Service == service && o.Tier == tier {
			return i
		}
	}
	return -1
}

func TestPlanLimits(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	tests := []struct {
		name          string
		need          Need
		service, tier string
		fits          bool
		reason        string // substring of a rejection reason
		largeVolume   bool
	}{
		{name: "afs v1 at cap", need: Need{Throughput: 10340 * MiB}, service: "azure-files", tier: "provisioned-v1", fits: true},
		{name: "afs v1 over cap", need: Need{Throughput: 10341 * MiB}, service: "azure-files", tier: "provisioned-v1",
			reason: "the largest share (102,400 GiB (100 TiB)) gives 10,340 MiB/s"},
		{name: "afs v1 capacity over", need: Need{Capacity: 101 * TiB}, service: "azure-files", tier: "provisioned-v1",
			reason: "over the largest share"},
		{name: "afs v1 iops over", need: Need{Throughput: MiB, IOPS: 102401}, service: "azure-files", tier: "provisioned-v1",
			reason: "needs 102,401 IOPS, the largest share (102,400 GiB (100 TiB)) gives 102,400"},
		{name: "afs v2 iops at cap", need: Need{Throughput: MiB, IOPS: 102400}, service: "azure-files", tier: "provisioned-v2", fits: true},
		{name: "afs v2 throughput over", need: Need{Throughput: 10341 * MiB}, service: "azure-files", tier: "provisioned-v2",
			reason: "at most 10,340 MiB/s"},
		{name: "afs v2 capacity over", need: Need{Capacity: 257 * TiB}, service: "azure-files", tier: "provisioned-v2",
			reason: "over the largest share"},
		{name: "anf ultra regular at 4500", need: Need{Throughput: 4500 * MiB}, service: "azure-netapp-files", tier: "ultra", fits: true},
		{name: "anf ultra large above 4500", need: Need{Throughput: 4501 * MiB}, service: "azure-netapp-files", tier: "ultra",
			fits: true, largeVolume: true},
		{name: "anf over 12800", need: Need{Throughput: 12801 * MiB}, service: "azure-netapp-files", tier: "ultra",
			reason: "one large volume gives at most 12,800 MiB/s"},
		{name: "anf capacity over", need: Need{Capacity: 1025 * TiB}, service: "azure-netapp-files", tier: "standard",
			reason: "over the largest large volume"},
		{name: "anf flexible over 12800", need: Need{Throughput: 12801 * MiB}, service: "azure-netapp-files", tier: "flexible",
			reason: "at most 12,800 MiB/s"},
		{name: "blob over egress", need: Need{Throughput: 6000 * MiB}, service: "azure-blob-nfs", tier: "gpv2",
			reason: "the account egress limit is 5,960.46 MiB/s"},
		{name: "blob write over ingress", need: Need{Throughput: 3000 * MiB, Access: Write}, service: "azure-blob-nfs", tier: "gpv2",
			reason: "the account ingress limit is 2,980.23 MiB/s"},
		{name: "blob requests", need: Need{Throughput: MiB, IOPS: 20001}, service: "azure-blob-nfs", tier: "gpv2",
			reason: "needs 20,001 IOPS, the account serves 20,000 requests/s"},
		{name: "efs provisioned read cap", need: Need{Throughput: 3073 * MiB}, service: "aws-efs", tier: "provisioned",
			reason: "at most 3,072 MiB/s of reads"},
		{name: "efs provisioned write cap", need: Need{Throughput: 1025 * MiB, Access: Write}, service: "aws-efs", tier: "provisioned",
			reason: "at most 1,024 MiB/s of writes"},
		{name: "efs elastic write", need: Need{Throughput: 1024 * MiB, Access: Write}, service: "aws-efs", tier: "elastic", fits: true},
		{name: "filestore over largest", need: Need{Throughput: 26001 * MiB}, service: "gcp-filestore", tier: "zonal",
			reason: "the largest instance (102,400 GiB (100 TiB)) gives 26,000 MiB/s"},
		{name: "clients too few", need: Need{Throughput: 2 * GiB, Clients: 1}, service: "azure-files", tier: "provisioned-v1",
			reason: "1 client reaches 1,536 MiB/s at most"},
		{name: "clients enough with nconnect", need: Need{Throughput: 2 * GiB, Clients: 2}, service: "azure-files", tier: "provisioned-v1", fits: true},
		{name: "nic binds", need: Need{Throughput: 2 * GiB, Clients: 2, ClientNIC: 8 * GB / 8}, service: "azure-files", tier: "provisioned-v1",
			reason: "2 clients reach 1,907.35 MiB/s at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := mustPlan(t, c, nil, tt.need)
			o, rej := option(r, tt.service, tt.tier), rejection(r, tt.service, tt.tier)
			if tt.fits {
				if o == nil {
					t.Fatalf("does not fit: %+v", rej)
				}
				if o.Provision.LargeVolume != tt.largeVolume {
					t.Errorf("largeVolume = %v, want %v", o.Provision.LargeVolume, tt.largeVolume)
				}
				return
			}
			if rej == nil {
				t.Fatalf("fits with %+v, want rejected", o)
			}
			if got := strings.Join(rej.Reasons, "; "); !strings.Contains(got, tt.reason) {
				t.Errorf("reasons = %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestPlanNothingFits(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	r := mustPlan(t, c, nil, Need{Throughput: 100 * GiB})
	if len(r.Options) != 0 {
		t.Errorf("options = %d, want none", len(r.Options))
	}
	tiers := 0
	for _, s := range c.Services {
		tiers += len(s.Tiers)
	}
	if len(r.Rejected) != tiers {
		t.Errorf("rejected %d tiers, want all %d", len(r.Rejected), tiers)
	}
	for _, rej := range r.Rejected {
		if len(rej.Reasons) == 0 {
			t.Errorf("%s/%s rejected without a reason", rej.Service, rej.Tier)
		}
	}
}

func TestPlanRejectsBadNeed(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	if _, err := Plan(c, nil, Need{Access: Read}); err == nil {
		t.Error("empty need accepted")
	}
	if _, err := Plan(c, nil, Need{Throughput: MiB, Access: "sideways"}); err == nil {
		t.Error("bad access accepted")
	}
	if _, err := Show(c, nil, "nfs-on-a-floppy", "", GiB, Need{Access: Read}); err == nil || !strings.Contains(err.Error(), "azure-files") {
		t.Errorf("unknown service error = %v, want it to list services", err)
	}
	if _, err := Show(c, nil, "anf", "gold", TiB, Need{Access: Read}); err == nil || !strings.Contains(err.Error(), "standard, premium, ultra, flexible") {
		t.Errorf("unknown tier error = %v, want it to list tiers", err)
	}
}

func TestGroup(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 102400: "102,400", 62.5: "62.5",
		1490.116119: "1,490.12", 1234567.891: "1,234,567.89", -1500: "-1,500"} {
		if got := group(in); got != want {
			t.Errorf("group(%v) = %q, want %q", in, got, want)
		}
	}
}

// Every option a plan returns meets the need it was given, whatever the need.
func FuzzPlanMeetsNeed(f *testing.F) {
	f.Add(2048.0, 10240.0, uint32(0), false)
	f.Add(10340.0, 0.0, uint32(102400), false)
	f.Add(4501.0, 51200.0, uint32(0), true)
	f.Add(0.5, 99.5, uint32(1), true)
	c, err := LoadCatalog()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, mibps, gib float64, iops uint32, write bool) {
		if !(mibps >= 0 && mibps < 1e6 && gib >= 0 && gib < 1e8) || mibps+gib+float64(iops) == 0 {
			return
		}
		n := Need{Throughput: Rate(mibps * MiB), Capacity: Size(gib * GiB), IOPS: int64(iops), Access: Read}
		if write {
			n.Access = Write
		}
		r, err := Plan(c, nil, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range r.Options {
			if o.MiBps < mibps-1e-9 {
				t.Errorf("%s/%s gives %v MiB/s for a need of %v", o.Service, o.Tier, o.MiBps, mibps)
			}
			if got := max(o.Provision.CapacityGiB, o.Provision.VolumeGiB); got < gib-1e-9 {
				t.Errorf("%s/%s provisions %v GiB for %v GiB of data", o.Service, o.Tier, got, gib)
			}
			if o.IOPS != nil && *o.IOPS < float64(iops) {
				t.Errorf("%s/%s gives %v IOPS for a need of %d", o.Service, o.Tier, *o.IOPS, iops)
			}
		}
		if len(r.Options)+len(r.Rejected) != 10 {
			t.Errorf("%d options + %d rejections, want 10 tiers", len(r.Options), len(r.Rejected))
		}
	})
}

func TestPlanScaleOut(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	r := mustPlan(t, c, nil, Need{Throughput: 30 * GiB, Capacity: 2 * PiB})
	want := map[string]int{
		"azure-files/provisioned-v1":  21, // 2 PiB over 100 TiB shares
		"azure-files/provisioned-v2":  8,  // 2 PiB over 256 TiB shares
		"azure-netapp-files/standard": 3,  // 30,720 MiB/s over 12,800 per large volume
		"azure-netapp-files/flexible": 3,
		"azure-blob-nfs/gpv2":         6, // 30,720 over 5,960.46 MiB/s of egress
		"aws-efs/elastic":             2, // 30,720 over 20,480
		"aws-efs/provisioned":         10,
		"gcp-filestore/zonal":         21,
	}
	for _, rej := range r.Rejected {
		w, ok := want[rej.Service+"/"+rej.Tier]
		if !ok {
			continue
		}
		if rej.ScaleOut == nil || rej.ScaleOut.Count != w {
			t.Errorf("%s/%s scale-out = %+v, want %d", rej.Service, rej.Tier, rej.ScaleOut, w)
		}
	}
	// Too wide a split, an IOPS-only shortfall the tier cannot model, and too few clients give no hint.
	for _, n := range []Need{
		{Throughput: 10000 * GiB},
		{Throughput: MiB, IOPS: 1e9},
		{Throughput: 2 * GiB, Clients: 1},
	} {
		r := mustPlan(t, c, nil, n)
		for _, rej := range r.Rejected {
			if rej.ScaleOut != nil {
				t.Errorf("need %+v: %s/%s has scale-out %+v", n, rej.Service, rej.Tier, rej.ScaleOut)
			}
		}
	}
}

// TestTierAt: Azure NetApp Files premium gives 64 MiB/s per TiB, 640 MiB/s at 10 TiB; without
// a tier the service is ambiguous; an Azure Files share cannot be 20 GiB (100 GiB minimum).
func TestTierAt(t *testing.T) {
	t.Parallel()
	c, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	o, err := TierAt(c, "anf", "premium", 10*TiB, Read)
	if err != nil {
		t.Fatal(err)
	}
	if o.Service != "azure-netapp-files" || o.Tier != "premium" || o.MiBps != 640 {
		t.Errorf("anf premium at 10 TiB = %s %s %v MiB/s, want azure-netapp-files premium 640", o.Service, o.Tier, o.MiBps)
	}
	for _, tt := range []struct {
		service, tier string
		capacity      Size
		want          string
	}{
		{"anf", "", 10 * TiB, "tiers standard, premium, ultra, flexible can be provisioned: name one with --tier"},
		{"afs", "provisioned-v1", 20 * GiB, "100"},
		{"s3", "", TiB, "unknown service"},
	} {
		if _, err := TierAt(c, tt.service, tt.tier, tt.capacity, Read); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("TierAt(%s, %q, %v GiB) err = %v, want one containing %q", tt.service, tt.tier, tt.capacity.GiB(), err, tt.want)
		}
	}
}
