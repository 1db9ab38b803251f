package plan

import (
	"math"
	"strings"
	"testing"
)

func catalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := LoadCatalog()
	if err != nil {
		t.Fatalf("LoadCatalog: %v", err)
	}
	return c
}

// showOne returns what service/tier delivers at gib GiB for access a.
func showOne(t *testing.T, c *Catalog, service, tier string, gib float64, a Access) (Option, error) {
	t.Helper()
	r, err := Show(c, nil, service, tier, Size(gib*GiB), Need{Access: a})
	if err != nil {
		t.Fatalf("Show(%s/%s, %v GiB): %v", service, tier, gib, err)
	}
	if len(r.Rejected) > 0 {
		return Option{}, &rejectedError{r.Rejected[0].Reasons}
	}
	return r.Options[0], nil
}

type rejectedError struct{ reasons []string }

func (e *rejectedError) Error() string { return strings.Join(e.reasons, "; ") }

// publishedTests are the vendors' published figures (research notes section 7) and the
// SAS Viya comparison table for Azure Files premium.
var publishedTests = []struct {
	name          string
	service, tier string
	gib           float64
	access        Access
	mibps         float64
	iops          float64 // 0: not checked
	burstIOPS     float64 // 0: not checked
	wantErr       string
}{
	// Azure Files provisioned v1, billing doc examples.
	{name: "afs v1 100GiB", service: "azure-files", tier: "provisioned-v1", gib: 100, mibps: 110, iops: 3100, burstIOPS: 10000},
	{name: "afs v1 1024GiB", service: "azure-files", tier: "provisioned-v1", gib: 1024, mibps: 203, iops: 4024, burstIOPS: 10000},
	{name: "afs v1 10240GiB", service: "azure-files", tier: "provisioned-v1", gib: 10240, mibps: 1125, iops: 13240, burstIOPS: 30720},
	{name: "afs v1 51200GiB", service: "azure-files", tier: "provisioned-v1", gib: 51200, mibps: 5220, iops: 54200, burstIOPS: 102400},
	{name: "afs v1 102400GiB", service: "azure-files", tier: "provisioned-v1", gib: 102400, mibps: 10340, iops: 102400, burstIOPS: 102400},
	// SAS Viya table: 500/1000/1500/2000/4000 GiB give 150/200/250/300/500 MiB/s.
	{name: "afs v1 500GiB", service: "azure-files", tier: "provisioned-v1", gib: 500, mibps: 150, iops: 3500},
	{name: "afs v1 1000GiB", service: "azure-files", tier: "provisioned-v1", gib: 1000, mibps: 200},
	{name: "afs v1 1500GiB", service: "azure-files", tier: "provisioned-v1", gib: 1500, mibps: 250},
	{name: "afs v1 2000GiB", service: "azure-files", tier: "provisioned-v1", gib: 2000, mibps: 300},
	{name: "afs v1 4000GiB", service: "azure-files", tier: "provisioned-v1", gib: 4000, mibps: 500, burstIOPS: 12000},
	{name: "afs v1 below minimum", service: "azure-files", tier: "provisioned-v1", gib: 99, wantErr: "below the smallest share (100 GiB)"},
	{name: "afs v1 over maximum", service: "azure-files", tier: "provisioned-v1", gib: 102401, wantErr: "over the largest share (102,400 GiB"},
	{name: "afs v1 fractional GiB rounds up", service: "azure-files", tier: "provisioned-v1", gib: 499.5, mibps: 150, iops: 3500},

	// Azure Files provisioned v2: recommended IOPS and throughput for the size.
	{name: "afs v2 32GiB", service: "azure-files", tier: "provisioned-v2", gib: 32, mibps: 104, iops: 3032, burstIOPS: 10000},
	{name: "afs v2 1024GiB", service: "azure-files", tier: "provisioned-v2", gib: 1024, mibps: 203, iops: 4024, burstIOPS: 12072},
	{name: "afs v2 262144GiB caps", service: "azure-files", tier: "provisioned-v2", gib: 262144, mibps: 10340, iops: 102400, burstIOPS: 102400},
	{name: "afs v2 below minimum", service: "azure-files", tier: "provisioned-v2", gib: 31, wantErr: "below the smallest share (32 GiB)"},
	{name: "afs v2 over maximum", service: "azure-files", tier: "provisioned-v2", gib: 262145, wantErr: "over the largest share"},

	// Azure NetApp Files, 1 TiB = 1024 GiB: 4000 GiB gives 62.5/250/500, 4 TiB gives 64/256/512.
	{name: "anf standard 4000GiB", service: "azure-netapp-files", tier: "standard", gib: 4000, mibps: 62.5},
	{name: "anf premium 4000GiB", service: "azure-netapp-files", tier: "premium", gib: 4000, mibps: 250},
	{name: "anf ultra 4000GiB", service: "azure-netapp-files", tier: "ultra", gib: 4000, mibps: 500},
	{name: "anf standard 4TiB", service: "azure-netapp-files", tier: "standard", gib: 4096, mibps: 64},
	{name: "anf premium 4TiB", service: "azure-netapp-files", tier: "premium", gib: 4096, mibps: 256},
	{name: "anf ultra 4TiB", service: "azure-netapp-files", tier: "ultra", gib: 4096, mibps: 512},
	{name: "anf premium 2TiB", service: "azure-netapp-files", tier: "premium", gib: 2048, mibps: 128},
	{name: "anf premium 100GiB", service: "azure-netapp-files", tier: "premium", gib: 100, mibps: 6.25},
	{name: "anf ultra 10TiB", service: "azure-netapp-files", tier: "ultra", gib: 10240, mibps: 1280},
	{name: "anf ultra regular cap", service: "azure-netapp-files", tier: "ultra", gib: 40960, mibps: 4500},
	{name: "anf standard large 50TiB", service: "azure-netapp-files", tier: "standard", gib: 51200, mibps: 800},
	{name: "anf premium large 50TiB", service: "azure-netapp-files", tier: "premium", gib: 51200, mibps: 3200},
	{name: "anf ultra large 50TiB", service: "azure-netapp-files", tier: "ultra", gib: 51200, mibps: 6400},
	{name: "anf ultra large 100TiB", service: "azure-netapp-files", tier: "ultra", gib: 102400, mibps: 12800},
	{name: "anf premium large 1024TiB cap", service: "azure-netapp-files", tier: "premium", gib: 1048576, mibps: 12800},
	{name: "anf standard 200TiB large", service: "azure-netapp-files", tier: "standard", gib: 204800, mibps: 3200},
	{name: "anf below minimum", service: "azure-netapp-files", tier: "premium", gib: 99, wantErr: "below the smallest volume (100 GiB)"},
	{name: "anf over maximum", service: "azure-netapp-files", tier: "premium", gib: 1048577, wantErr: "over the largest volume"},
	{name: "anf flexible 1TiB", service: "azure-netapp-files", tier: "flexible", gib: 1024, mibps: 640},
	{name: "anf flexible 100GiB pool minimum", service: "azure-netapp-files", tier: "flexible", gib: 100, mibps: 640},
	{name: "anf flexible 10TiB volume cap", service: "azure-netapp-files", tier: "flexible", gib: 10240, mibps: 4500},
	{name: "anf flexible 50TiB large", service: "azure-netapp-files", tier: "flexible", gib: 51200, mibps: 12800},

	// Blob NFS account limits, lowest published region values (50/25 Gbit/s).
	{name: "blob read", service: "azure-blob-nfs", tier: "gpv2", gib: 1, access: Read, mibps: 50e9 / 8 / MiB, iops: 20000},
	{name: "blob write", service: "azure-blob-nfs", tier: "gpv2", gib: 1, access: Write, mibps: 25e9 / 8 / MiB, iops: 20000},
	{name: "blob over 5PiB", service: "azure-blob-nfs", tier: "gpv2", gib: 5*1048576 + 1, wantErr: "over the account limit"},

	// Amazon EFS per file system, lowest published region values.
	{name: "efs elastic read", service: "aws-efs", tier: "elastic", gib: 1, access: Read, mibps: 20480, iops: 900000},
	{name: "efs elastic write", service: "aws-efs", tier: "elastic", gib: 1, access: Write, mibps: 1024, iops: 500000},
	{name: "efs provisioned read", service: "aws-efs", tier: "provisioned", gib: 1, access: Read, mibps: 3072, iops: 55000},
	{name: "efs provisioned write", service: "aws-efs", tier: "provisioned", gib: 1, access: Write, mibps: 1024, iops: 25000},

	// Filestore zonal: 260/88 MiB/s and 9,200/2,600 IOPS per TiB; 650/220 per 2.5 TiB from 10 TiB.
	{name: "filestore 1TiB read", service: "gcp-filestore", tier: "zonal", gib: 1024, access: Read, mibps: 260, iops: 9200},
	{name: "filestore 1TiB write", service: "gcp-filestore", tier: "zonal", gib: 1024, access: Write, mibps: 88, iops: 2600},
	{name: "filestore 1100GiB steps to 1280GiB", service: "gcp-filestore", tier: "zonal", gib: 1100, access: Read, mibps: 325},
	{name: "filestore 10TiB read", service: "gcp-filestore", tier: "zonal", gib: 10240, access: Read, mibps: 2600, iops: 92000},
	{name: "filestore 12.5TiB write", service: "gcp-filestore", tier: "zonal", gib: 12800, access: Write, mibps: 1100, iops: 32500},
	{name: "filestore 9.8TiB steps to 10TiB", service: "gcp-filestore", tier: "zonal", gib: 10035, access: Read, mibps: 2600},
	{name: "filestore 100TiB", service: "gcp-filestore", tier: "zonal", gib: 102400, access: Read, mibps: 26000},
	{name: "filestore below minimum", service: "gcp-filestore", tier: "zonal", gib: 1000 - 1, access: Read, wantErr: "below the smallest instance"},
	{name: "filestore over maximum", service: "gcp-filestore", tier: "zonal", gib: 102401, access: Read, wantErr: "over the largest instance"},
}

func TestPublishedNumbers(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, tt := range publishedTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := tt.access
			if a == "" {
				a = Read
			}
			o, err := showOne(t, c, tt.service, tt.tier, tt.gib, a)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !near(o.MiBps, tt.mibps) {
				t.Errorf("throughput = %v MiB/s, want %v", o.MiBps, tt.mibps)
			}
			if tt.iops != 0 && (o.IOPS == nil || !near(*o.IOPS, tt.iops)) {
				t.Errorf("IOPS = %v, want %v", deref(o.IOPS), tt.iops)
			}
			if tt.burstIOPS != 0 && (o.BurstIOPS == nil || !near(*o.BurstIOPS, tt.burstIOPS)) {
				t.Errorf("burst IOPS = %v, want %v", deref(o.BurstIOPS), tt.burstIOPS)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// The SAS Viya table divides by 1000 (4000 GB = 4 TB); the planner divides by 1024. The
// two agree exactly when the table's capacities are read as multiples of 1.024.
func TestANFDecimalTableConvention(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	table := []struct {
		gb                     float64
		standard, premium, ult float64
	}{
		{500, 8, 32, 64}, {1000, 16, 64, 128}, {1500, 24, 96, 192}, {2000, 32, 128, 256}, {4000, 64, 256, 512},
	}
	for _, row := range table {
		for tier, want := range map[string]float64{"standard": row.standard, "premium": row.premium, "ultra": row.ult} {
			binary, err := showOne(t, c, "azure-netapp-files", tier, row.gb, Read)
			if err != nil {
				t.Fatal(err)
			}
			if !near(binary.MiBps, want*1000/1024) {
				t.Errorf("%s %v GiB = %v MiB/s, want %v (table %v x 1000/1024)", tier, row.gb, binary.MiBps, want*1000/1024, want)
			}
			decimal, err := showOne(t, c, "azure-netapp-files", tier, row.gb*1.024, Read)
			if err != nil {
				t.Fatal(err)
			}
			if !near(decimal.MiBps, want) {
				t.Errorf("%s %v GiB = %v MiB/s, want the table's %v", tier, row.gb*1.024, decimal.MiBps, want)
			}
		}
	}
}

func TestCatalogValidates(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	if len(c.Services) != 5 {
		t.Errorf("services = %d, want 5", len(c.Services))
	}
	bad := []struct {
		name, yaml, want string
	}{
		{"unknown field", "apiVersion: nfstune.io/v1alpha1\nkind: PlanModels\nbogus: 1\n", `models.yaml:3: bogus: unknown key (did you mean "kind"?)`},
		{"wrong kind", "apiVersion: nfstune.io/v1alpha1\nkind: Other\n", "kind PlanModels"},
		{"missing param", `apiVersion: nfstune.io/v1alpha1
kind: PlanModels
sources: {s: {doc: d, url: u, date: "2026-11"}}
services:
  - name: x
    tiers:
      - name: y
        model: efs-elastic
        params: {readMiBps: {v: 1, src: s}}
`, `needs parameter "writeMiBps"`},
		{"unknown source", `apiVersion: nfstune.io/v1alpha1
kind: PlanModels
sources: {}
services:
  - name: x
    tiers:
      - name: y
        model: blob-account
        params: {ingressGbps: {v: 1, src: nowhere}}
`, `unknown source "nowhere"`},
		{"unknown model", `apiVersion: nfstune.io/v1alpha1
kind: PlanModels
services: [{name: x, tiers: [{name: y, model: magic}]}]
`, `unknown model "magic"`},
	}
	for _, tt := range bad {
		if _, err := parseCatalog([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// Every constant cites a source with a document, URL and date.
func TestEveryNumberHasASource(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, s := range c.Services {
		for _, tier := range s.Tiers {
			for name, n := range tier.Params {
				src, ok := c.Sources[n.Src]
				if !ok || src.URL == "" || src.Date == "" || src.Doc == "" {
					t.Errorf("%s/%s %s: source %q incomplete", s.Name, tier.Name, name, n.Src)
				}
			}
		}
	}
}

// The per-client and connection figures in the research notes.
func TestPublishedClientFigures(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	tests := []struct {
		name               string
		service, tier      string
		gib                float64
		clients, clientsNC int // to saturate the size; -1 when unknown
		multi              string
		note               string // substring of a note
	}{
		// About 20 clients reach the 10 GiB/s share limit without nconnect, 6-7 with nconnect=4.
		{name: "afs largest share", service: "azure-files", tier: "provisioned-v1", gib: 102400, clients: 21, clientsNC: 7,
			multi: "nconnect=4", note: "about 8,000 IOPS, 300 MiB/s of reads and 200 MiB/s of writes"},
		{name: "afs burst credits", service: "azure-files", tier: "provisioned-v1", gib: 10240, clients: 3, clientsNC: 1,
			multi: "nconnect=4", note: "credit bucket of 62,928,000 IO"},
		{name: "afs v2 account", service: "azure-files", tier: "provisioned-v2", gib: 1024, clients: 1, clientsNC: 1,
			multi: "nconnect=4", note: "classic storage account limit 10,340 MiB/s"},
		// EFS: 500 MiB/s per client, 1,500 with efs-proxy on Elastic.
		{name: "efs elastic", service: "aws-efs", tier: "elastic", gib: 1, clients: 41, clientsNC: 14, multi: "efs-proxy"},
		{name: "efs provisioned", service: "aws-efs", tier: "provisioned", gib: 1, clients: 7, clientsNC: 7},
		// Filestore: nconnect=2 below 10 TiB, 7 from 10 TiB; no per-client figure.
		{name: "filestore small", service: "gcp-filestore", tier: "zonal", gib: 9984, clients: -1, clientsNC: -1, multi: "nconnect=2"},
		{name: "filestore large", service: "gcp-filestore", tier: "zonal", gib: 10240, clients: -1, clientsNC: -1, multi: "nconnect=7"},
		// ANF: nconnect=8 performed best; no per-client figure.
		{name: "anf", service: "azure-netapp-files", tier: "premium", gib: 1024, clients: -1, clientsNC: -1, multi: "nconnect=8",
			note: "no published per-client limit"},
		{name: "blob", service: "azure-blob-nfs", tier: "gpv2", gib: 1, clients: -1, clientsNC: -1, multi: "nconnect=16",
			note: "enable_azure_nconnect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := showOne(t, c, tt.service, tt.tier, tt.gib, Read)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := count(o.ClientsNeeded), tt.clients; got != want {
				t.Errorf("clients = %d, want %d", got, want)
			}
			if got, want := count(o.ClientsNeededNconnect), tt.clientsNC; got != want {
				t.Errorf("clients with %s = %d, want %d", o.MultiConnection, got, want)
			}
			if o.MultiConnection != tt.multi {
				t.Errorf("multiConnection = %q, want %q", o.MultiConnection, tt.multi)
			}
			if notes := strings.Join(o.Notes, "\n"); !strings.Contains(notes, tt.note) {
				t.Errorf("notes lack %q:\n%s", tt.note, notes)
			}
		})
	}
}

func count(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// Flexible pools include 128 MiB/s and allow at most 640 MiB/s per TiB.
func TestANFFlexiblePool(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	for _, tt := range []struct {
		mibps, gib        float64
		poolTiB, provided float64
	}{
		{mibps: 10, gib: 100, poolTiB: 1, provided: 128},
		{mibps: 640, gib: 100, poolTiB: 1, provided: 640},
		{mibps: 641, gib: 100, poolTiB: 2, provided: 641},
		{mibps: 4500, gib: 100, poolTiB: 8, provided: 4500},
		{mibps: 1000, gib: 20480, poolTiB: 20, provided: 1000},
	} {
		r := mustPlan(t, c, nil, Need{Throughput: Rate(tt.mibps * MiB), Capacity: Size(tt.gib * GiB)})
		o := option(r, "azure-netapp-files", "flexible")
		if o == nil {
			t.Fatalf("%v MiB/s: flexible does not fit", tt.mibps)
		}
		if o.Provision.CapacityGiB != tt.poolTiB*1024 || o.Provision.MiBps != tt.provided || o.Provision.LargeVolume {
			t.Errorf("%v MiB/s, %v GiB: provision %+v, want a %v TiB pool with %v MiB/s", tt.mibps, tt.gib, o.Provision, tt.poolTiB, tt.provided)
		}
	}
}

// A service is found by its canonical name and by every alias of package backend's table.
func TestServiceAliases(t *testing.T) {
	t.Parallel()
	c, err := LoadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for alias, want := range map[string]string{"amazon-efs": "aws-efs", "efs": "aws-efs", "google-filestore": "gcp-filestore",
		"filestore": "gcp-filestore", "anf": "azure-netapp-files", "afs": "azure-files", "blob": "azure-blob-nfs"} {
		if s, err := c.Service(alias); err != nil || s.Name != want {
			t.Errorf("Service(%q) = %v, %v; want %s", alias, s, err, want)
		}
	}
}
