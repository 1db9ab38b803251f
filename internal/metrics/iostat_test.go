package metrics

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/inventory"
)

// loadStats parses testdata/iostat/<dir>/1/mountstats (kernel 6.1 format, nconnect=4) into
// an inventory with one mount per NFS entry, as inventory.Read would join it.
func loadStats(t *testing.T, dir string) *inventory.Inventory {
	t.Helper()
	fs, err := procfs.NewFS("testdata/iostat/" + dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fs.Proc(1)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := p.MountStats()
	if err != nil {
		t.Fatal(err)
	}
	inv := &inventory.Inventory{}
	for i, m := range ms {
		nfs, ok := m.Stats.(*procfs.MountStatsNFS)
		if !ok {
			continue
		}
		inv.Mounts = append(inv.Mounts, inventory.Mount{
			Device:      "0:" + string(rune('5'+i)) + "2",
			MountPoints: []string{m.Mount},
			Server:      "10.0.0.5",
			Export:      "/export/data",
			Version:     nfs.Opts["vers"],
			Connections: len(nfs.Transport),
			Stats: &inventory.Stats{
				StatVersion: nfs.StatVersion,
				Age:         nfs.Age,
				Bytes:       nfs.Bytes,
				Events:      nfs.Events,
				Operations:  nfs.Operations,
				Transports:  nfs.Transport,
			},
		})
	}
	if len(inv.Mounts) != 1 {
		t.Fatalf("fixture %s: got %d NFS mounts, want 1", dir, len(inv.Mounts))
	}
	return inv
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

func TestRatesNConnect(t *testing.T) {
	t.Parallel()
	t0, t1 := loadStats(t, "t0"), loadStats(t, "t1")
	got := Rates(t0, t1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("got %d mounts, want 1", len(got))
	}
	r := got[0]
	// Sends over all four xprt lines went from 3840 to 6243. nfsiostat reads only the last
	// line (960 -> 1560) and would print 60 ops/s.
	checks := []struct {
		name      string
		got, want float64
	}{
		{"ops/s", r.OpsPerSec, 240.3},
		{"backlog", r.Backlog, 3121.0 / 2403.0},
		{"read MB/s", r.ReadMBps, 2000 * 1048576 / 10.0 / 1e6},
		{"write MB/s", r.WriteMBps, 0},
		{"retrans", float64(r.Retrans), 3},
		{"connections", float64(r.Connections), 4},
		{"seconds", r.Seconds, 10},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if len(r.Ops) != 2 {
		t.Fatalf("ops = %+v, want READ and GETATTR only", r.Ops)
	}
	read, getattr := r.Ops[0], r.Ops[1]
	if read.Operation != "READ" || getattr.Operation != "GETATTR" {
		t.Fatalf("op order = %s, %s; want READ, GETATTR", read.Operation, getattr.Operation)
	}
	opChecks := []struct {
		name      string
		got, want float64
	}{
		{"READ ops/s", read.OpsPerSec, 200},
		{"READ avg RTT", read.AvgRTTMs, 8},
		{"READ avg exe", read.AvgExeMs, 12},
		{"READ avg queue", read.AvgQueueMs, 3},
		{"READ retrans", float64(read.Retrans), 3},
		{"READ kB/op", read.KBPerOp, (136 + 1048576 + 120) / 1024.0},
		{"GETATTR ops/s", getattr.OpsPerSec, 40},
		{"GETATTR avg RTT", getattr.AvgRTTMs, 1},
		{"GETATTR avg exe", getattr.AvgExeMs, 2},
	}
	for _, c := range opChecks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestRatesSinceMount(t *testing.T) {
	t.Parallel()
	t0 := loadStats(t, "t0")
	for _, tt := range []struct {
		name string
		prev *inventory.Inventory
	}{
		{name: "no previous snapshot", prev: nil},
		{name: "counters went back", prev: loadStats(t, "t1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Rates(tt.prev, t0, 10*time.Second)[0]
			if r.Seconds != 120 {
				t.Errorf("seconds = %v, want the mount's age 120", r.Seconds)
			}
			if !near(r.OpsPerSec, 3840.0/120) {
				t.Errorf("ops/s = %v, want %v", r.OpsPerSec, 3840.0/120)
			}
		})
	}
}

func TestSumTransports(t *testing.T) {
	t.Parallel()
	got := SumTransports([]procfs.NFSTransportStats{
		{Sends: 10, Receives: 9, BadTransactionIDs: 1, CumulativeBacklog: 5, Connect: 1},
		{Sends: 20, Receives: 20, CumulativeBacklog: 7, Connect: 2},
	})
	want := TransportTotals{Connections: 2, Sends: 30, Receives: 29, BadTransactionIDs: 1, CumulativeBacklog: 12, Connect: 3}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
