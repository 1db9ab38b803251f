//go:build lab

package labtest

// nfstune bench against the lab's nfsd with the real fio, run in-process through the bench
// package: a profile end to end, a sweep that remounts a client group, and the load curve
// of two tunings.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/fio"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

func benchRunner() *bench.Runner {
	root := hostfs.Root("/")
	return &bench.Runner{
		Root:       root,
		Exec:       fio.Exec,
		Inventory:  func() (*inventory.Inventory, error) { return inventory.Read(root, inventory.ReadOptions{}) },
		DropCaches: true,
		Tool:       "nfstune lab",
	}
}

// TestBenchRunSeqRead runs the read-ahead-sensitive profile end to end on an NFSv3 mount with
// a client of its own: the figures, the tuning and the mountstats delta must describe what
// the kernel did. NFSv3 and another server address (127.0.0.4) keep it apart from the
// scenario's clients; over NFSv4.1 the kernel finds that 127.0.0.4 is the same server as
// 127.0.0.1 (session trunking) and joins the scenario's client and superblock.
func TestBenchRunSeqRead(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Server: "127.0.0.4", Version: "3", Options: "nconnect=2"})
	const size = 8 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := benchRunner().Run(ctx, bench.RunOptions{Mount: m.Dir, Profile: "seq-read", Repeat: 2, Size: size, Runtime: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("runs = %d, want 2", len(res.Runs))
	}
	if res.Provenance.FioVersion == "" || res.Provenance.Kernel == "" {
		t.Errorf("provenance = %+v", res.Provenance)
	}
	for _, r := range res.Runs {
		if r.ReadMiBs <= 0 || r.ReadIOPS <= 0 || r.LatP99ms <= 0 || !r.CacheDropped {
			t.Errorf("run %d: %+v", r.Repeat, r)
		}
		tu := r.Tuning
		if tu == nil || tu.FSType != "nfs" || tu.Device != m.Device || tu.Connections != 2 || tu.ReadAheadKB == nil ||
			*tu.ReadAheadKB != ReadAheadKB(t, m.Device) {
			t.Errorf("run %d tuning = %+v", r.Repeat, tu)
		}
		// The page cache was dropped: the whole file came from the server, in READs.
		d := r.Mountstats
		if d == nil || d.ServerReadBytes < size {
			t.Fatalf("run %d mountstats delta = %+v, want at least %d bytes read from the server", r.Repeat, d, size)
		}
		var reads uint64
		for _, op := range d.Ops {
			if op.Op == "READ" {
				reads = op.Requests
			}
		}
		if reads == 0 {
			t.Errorf("run %d: no READ requests in %+v", r.Repeat, d.Ops)
		}
	}
	if _, err := os.Stat(res.Provenance.Directory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bench directory %s left behind: %v", res.Provenance.Directory, err)
	}
}

// TestBenchSweepRemount sweeps read-ahead and nconnect on an NFSv3 mount with a client of
// its own (server address 127.0.0.3): every variant must really be in effect during its
// runs, and the mount must end as it started.
func TestBenchSweepRemount(t *testing.T) {
	RequireGuest(t)
	m := Mount(t, MountSpec{Server: "127.0.0.3", Version: "3", Options: "nconnect=2"})
	origRA := ReadAheadKB(t, m.Device)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := benchRunner().Sweep(ctx, bench.SweepOptions{
		RunOptions:  bench.RunOptions{Mount: m.Dir, Profile: "seq-read", Repeat: 1, Size: 4 << 20, Runtime: 60 * time.Second},
		ReadAheadKB: []int{256, 2048},
		NConnect:    []int{1, 3},
		Remount:     true,
		Remountable: []string{m.Dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		variant  string
		ra, conn int
	}{{"ra=256,nconnect=1", 256, 1}, {"ra=2048,nconnect=1", 2048, 1}, {"ra=256,nconnect=3", 256, 3}, {"ra=2048,nconnect=3", 2048, 3}}
	if len(res.Runs) != len(want) {
		t.Fatalf("runs = %d, want %d", len(res.Runs), len(want))
	}
	for i, w := range want {
		r := res.Runs[i]
		if r.Variant != w.variant || r.Tuning == nil || r.Tuning.ReadAheadKB == nil || *r.Tuning.ReadAheadKB != w.ra || r.Tuning.Connections != w.conn {
			t.Errorf("run %d: variant %q tuning %+v, want %s with %d transports", i, r.Variant, r.Tuning, w.variant, w.conn)
		}
	}
	// Mounted again with nconnect=2 and the starting read-ahead, on a new superblock.
	inv, err := inventory.Read(hostfs.Root("/"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mt := range inv.Mounts {
		for _, mp := range mt.MountPoints {
			if mp != m.Dir {
				continue
			}
			found = true
			if mt.Connections != 2 || mt.ReadAheadKB == nil || *mt.ReadAheadKB != origRA {
				t.Errorf("after the sweep: connections %d, read_ahead_kb %v; want 2 and %d", mt.Connections, mt.ReadAheadKB, origRA)
			}
		}
	}
	if !found {
		t.Fatalf("%s is not mounted after the sweep", m.Dir)
	}
	if res.Policy == "" || len(res.Best) != 1 {
		t.Errorf("best %+v, policy %q", res.Best, res.Policy)
	}
}

// TestBenchCurveNConnect measures the load curve on two NFSv3 mounts of the same export,
// each with a client of its own (server addresses 127.0.0.5 and 127.0.0.6): nconnect=1
// and nconnect=4. Every step must run under its tuning, stop at the knee and nowhere
// earlier, and leave no files; which tuning is better is logged, not asserted, since it
// depends on the machine.
func TestBenchCurveNConnect(t *testing.T) {
	// The guest is emulated (TCG): a stall of the emulator puts tens of milliseconds into
	// the p99 of the lightest load, so the bound is set far above the default and the knee
	// is where the mount stops keeping up with the offered load.
	const labCurveBound = 500 * time.Millisecond
	RequireGuest(t)
	results := map[int]*bench.Result{}
	for _, tc := range []struct {
		server string
		conns  int
	}{{"127.0.0.5", 1}, {"127.0.0.6", 4}} {
		m := Mount(t, MountSpec{Server: tc.server, Version: "3", Options: "nconnect=" + strconv.Itoa(tc.conns)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		res, err := benchRunner().Curve(ctx, bench.CurveOptions{Mount: m.Dir, Rates: []int{25, 50, 100, 200, 400, 800, 1600, 3200},
			Runtime: 5 * time.Second, Ramp: time.Second, LatencyBound: labCurveBound})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		c := res.Curve
		if c == nil || len(c.Steps) == 0 || len(c.Steps) != len(res.Runs) {
			t.Fatalf("nconnect=%d: curve %+v with %d runs", tc.conns, c, len(res.Runs))
		}
		for i, r := range res.Runs {
			if r.Tuning == nil || r.Tuning.Connections != tc.conns || c.Steps[i].IOPS <= 0 || c.Steps[i].P99ms <= 0 {
				t.Errorf("nconnect=%d step %d: tuning %+v, figures %+v", tc.conns, i+1, r.Tuning, c.Steps[i])
			}
		}
		if c.Knee != nil {
			if c.Knee.Step != len(c.Steps)-1 || bench.FindKnee(c.Steps[:c.Knee.Step], c.LatencyBoundms) != nil {
				t.Errorf("nconnect=%d: knee %+v is not the first step past the knee of %+v", tc.conns, c.Knee, c.Steps)
			}
		}
		if _, err := os.Stat(res.Provenance.Directory); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("bench directory %s left behind: %v", res.Provenance.Directory, err)
		}
		var table bytes.Buffer
		if err := bench.WriteCurveTable(&table, res); err != nil {
			t.Fatal(err)
		}
		t.Logf("nconnect=%d:\n%s", tc.conns, table.String())
		results[tc.conns] = res
	}
	cc, err := bench.CompareCurves(results[1], results[4], float64(bench.DefaultLatencyBound/time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := bench.WriteCurveComparisonTable(&table, cc); err != nil {
		t.Fatal(err)
	}
	t.Logf("nconnect=1 (A) against nconnect=4 (B):\n%s", table.String())
}
