package inventory

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nfstune/nfstune/internal/hostfs"
)

func TestReadMountStatsFile(t *testing.T) {
	t.Parallel()
	inv, err := ReadMountStatsFile("testdata/saved/after.mountstats")
	if err != nil {
		t.Fatal(err)
	}
	type mount struct {
		Device, Server, ServerAddr, Export, Version, Group string
		MountPoints                                        []string
		RSize, Connections                                 int
		Age                                                float64
	}
	var got []mount
	for _, m := range inv.Mounts {
		if m.Stats == nil {
			t.Fatalf("%v: no statistics", m.MountPoints)
		}
		got = append(got, mount{m.Device, m.Server, m.ServerAddr, m.Export, m.Version, m.ClientGroup,
			m.MountPoints, m.RSize, m.Connections, m.Stats.Age.Seconds()})
	}
	// Both stacked entries, in the file's order, without a device; rootfs and proc left out.
	want := []mount{
		{"", "10.0.0.7", "10.0.0.7", "/home", "3", "tcp://10.0.0.7/v3", []string{"/mnt/home"}, 1048576, 1, 160},
		{"", "10.0.0.8", "10.0.0.8", "/data", "4.2", "tcp://10.0.0.8/v4.2", []string{"/mnt/home"}, 1048576, 1, 100},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if len(inv.Warnings) != 0 {
		t.Errorf("warnings = %v", inv.Warnings)
	}
}

func TestReadMountStatsFileRefuses(t *testing.T) {
	t.Parallel()
	if _, err := ReadMountStatsFile("/dev/zero"); !errors.Is(err, hostfs.ErrNotRegular) {
		t.Errorf("ReadMountStatsFile(/dev/zero) = %v, want ErrNotRegular", err)
	}
	if _, err := ReadMountStatsFile("testdata/saved/missing"); err == nil {
		t.Error("a missing file read without error")
	}
}
