package audit

import (
	"io"
	"runtime"
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
	"github.com/nfstune/nfstune/internal/policy"
)

// auditTree runs what `nfstune audit` does on a host root: read (without the per-op rows
// unless --op-stats), audit, render the table.
func auditTree(tb testing.TB, root hostfs.Root, pol *policy.Policy) Report {
	inv, err := inventory.Read(root, inventory.ReadOptions{SkipOperations: true})
	if err != nil {
		tb.Fatal(err)
	}
	rep := Run(inv, pol)
	if err := WriteTable(io.Discard, rep); err != nil {
		tb.Fatal(err)
	}
	return rep
}

// BenchmarkAudit1000 audits a synthetic host with 1,000 NFS mounts; the goal is 50 ms per
// audit (docs/benchmarks.md), the memory it keeps is TestAudit1000MemoryBudget's.
func BenchmarkAudit1000(b *testing.B) {
	dir, pol := synthHost(b)
	b.ReportAllocs()
	for b.Loop() {
		if rep := auditTree(b, hostfs.Root(dir), pol); len(rep.Mounts) != 1000 {
			b.Fatalf("mounts = %d", len(rep.Mounts))
		}
	}
}

// BenchmarkAudit10000 audits a synthetic host with 10,000 NFS mounts (an EDA node with a
// volume per project); the budget is 0.5 s per audit.
func BenchmarkAudit10000(b *testing.B) {
	dir, pol := synthHostN(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		if rep := auditTree(b, hostfs.Root(dir), pol); len(rep.Mounts) != 10000 {
			b.Fatalf("mounts = %d", len(rep.Mounts))
		}
	}
}

// BenchmarkRun1000 measures the audit rules and the table alone, on an inventory read once.
func BenchmarkRun1000(b *testing.B) {
	dir, pol := synthHost(b)
	inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rep := Run(inv, pol)
		if err := WriteTable(io.Discard, rep); err != nil {
			b.Fatal(err)
		}
	}
}

// synthConfig maps the synthetic servers (10.20.x.y) to Azure NetApp Files with a
// sequential workload, so that most rules have something to say about every mount.
const synthConfig = `apiVersion: nfstune.io/v1alpha1
kind: Policy
rules:
  - match: {cidr: 10.20.0.0/16}
    backend: azure-netapp-files
    workload: sequential-read
`

func synthHost(tb testing.TB) (string, *policy.Policy) { return synthHostN(tb, 1000) }

// synthHostN is a synthetic host with n NFS mounts (inventorytest.GenerateTree) and the
// policy that has most rules speak about each.
func synthHostN(tb testing.TB, n int) (string, *policy.Policy) {
	tb.Helper()
	dir := tb.TempDir()
	if err := inventorytest.GenerateTree(dir, n); err != nil {
		tb.Fatal(err)
	}
	pol, err := policy.Parse("synth.yaml", []byte(synthConfig))
	if err != nil {
		tb.Fatal(err)
	}
	return dir, pol
}

// TestAudit1000MemoryBudget checks the 50 MiB budget on the memory an audit of 1,000
// mounts keeps (inventory and report), which unlike time does not depend on the load.
func TestAudit1000MemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 1,000-mount tree")
	}
	dir, pol := synthHost(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep := auditTree(t, hostfs.Root(dir), pol)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(rep.Mounts) != 1000 || len(rep.Findings) < 1000 {
		t.Fatalf("mounts %d findings %d", len(rep.Mounts), len(rep.Findings))
	}
	const budget = 50 << 20
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("live heap %d KiB, allocated %d KiB, %d findings", live>>10, (after.TotalAlloc-before.TotalAlloc)>>10, len(rep.Findings))
	if live > budget {
		t.Errorf("audit of 1,000 mounts keeps %d MiB, budget %d MiB", live>>20, budget>>20)
	}
	runtime.KeepAlive(rep)
}
