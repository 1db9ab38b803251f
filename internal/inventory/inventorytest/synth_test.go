package inventorytest

import (
	"testing"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

func TestGenerateTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 120
	if err := GenerateTree(dir, n); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings: %q", inv.Warnings)
	}
	if len(inv.Mounts) != n {
		t.Fatalf("mounts = %d, want %d", len(inv.Mounts), n)
	}
	for _, m := range inv.Mounts {
		want := 4
		if m.Version == "3" {
			want = 1
		}
		if m.Stats == nil || m.Connections != want || m.ReadAheadKB == nil || m.Requested == nil {
			t.Fatalf("mount %s: stats %v, connections %d (want %d), read-ahead %v, requested %v",
				m.Device, m.Stats != nil, m.Connections, want, m.ReadAheadKB, m.Requested)
		}
	}
	// 3 servers x 2 versions.
	if len(inv.Groups) != 6 {
		t.Errorf("groups = %d, want 6", len(inv.Groups))
	}
	if err := GenerateTree(t.TempDir(), -1); err == nil {
		t.Errorf("GenerateTree(-1): want error")
	}
}

// BenchmarkRead1000 reads a synthetic host with 1,000 NFS mounts (750 NFSv4.1 with
// nconnect=4, 250 NFSv3), the size the audit must handle in under 200 ms and 50 MiB.
func BenchmarkRead1000(b *testing.B) {
	dir := b.TempDir()
	if err := GenerateTree(dir, 1000); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Mounts) != 1000 {
			b.Fatalf("mounts = %d", len(inv.Mounts))
		}
	}
}

// BenchmarkRead1000SkipOperations is BenchmarkRead1000 without the per-op rows, as the
// audit reads it.
func BenchmarkRead1000SkipOperations(b *testing.B) {
	dir := b.TempDir()
	if err := GenerateTree(dir, 1000); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{SkipOperations: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Mounts) != 1000 || inv.Mounts[0].Stats == nil {
			b.Fatalf("mounts = %d", len(inv.Mounts))
		}
	}
}
