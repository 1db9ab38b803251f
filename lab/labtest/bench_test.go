//go:build lab

package labtest

// nfstune bench against the lab's nfsd with the real fio, run in-process through the bench
// package: a profile end to end, a sweep that remounts a client group, and the load curve
// of two tunings.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// labCurveBound is the curves' latency bound in the lab. The guest is emulated (TCG): a
// stall of the emulator puts tens of milliseconds into the p99 of the lightest load, so
// the bound is set far above the default and the knee is where the mount stops keeping up
// with the offered load.
const labCurveBound = 500 * time.Millisecond

// labCurve measures the load curve opts asks for on m, each step 5 s after opts.Ramp, and
// checks what every curve must be: a step per run, each under the mount's tuning as want
// accepts it, the knee at the first step past it and nowhere earlier, and no files left
// behind. It logs the table.
func labCurve(t *testing.T, m Mounted, name string, opts bench.CurveOptions, want func(*bench.Tuning) bool) *bench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts.Mount, opts.Runtime, opts.LatencyBound = m.Dir, 5*time.Second, labCurveBound
	res, err := benchRunner().Curve(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Curve
	if c == nil || len(c.Steps) == 0 || len(c.Steps) != len(res.Runs) {
		t.Fatalf("%s: curve %+v with %d runs", name, c, len(res.Runs))
	}
	for i, r := range res.Runs {
		if r.Tuning == nil || !want(r.Tuning) || c.Steps[i].IOPS <= 0 || c.Steps[i].P99ms <= 0 {
			t.Errorf("%s step %d: tuning %+v, figures %+v", name, i+1, r.Tuning, c.Steps[i])
		}
	}
	if c.Knee != nil {
		if c.Knee.Step != len(c.Steps)-1 || bench.FindKnee(c.Steps[:c.Knee.Step], c.LatencyBoundms) != nil {
			t.Errorf("%s: knee %+v is not the first step past the knee of %+v", name, c.Knee, c.Steps)
		}
	}
	if _, err := os.Stat(res.Provenance.Directory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bench directory %s left behind: %v", res.Provenance.Directory, err)
	}
	var table bytes.Buffer
	if err := bench.WriteCurveTable(&table, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s:\n%s", name, table.String())
	saveCurve(t, name, res)
	return res
}

// EnvCurveOut names a directory where labCurve saves each result, for bench report and
// bench compare on the host; the lab's tree is the guest's /lab.
const EnvCurveOut = "NFSTUNE_LAB_CURVE_OUT"

// saveCurve writes res to $NFSTUNE_LAB_CURVE_OUT/<test>-<name>-<n>.json, n counting the
// test's runs (-test.count), when the variable is set.
func saveCurve(t *testing.T, name string, res *bench.Result) {
	t.Helper()
	dir := os.Getenv(EnvCurveOut)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	base := t.Name() + "-" + strings.NewReplacer(",", "-", "=", "").Replace(name)
	for n := 1; ; n++ {
		p := filepath.Join(dir, base+"-"+strconv.Itoa(n)+".json")
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Write(data)
		if err = errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
		t.Logf("saved %s", p)
		return
	}
}

// logCurveComparison logs bench compare's table of a against b.
func logCurveComparison(t *testing.T, title string, a, b *bench.Result) {
	t.Helper()
	cc, err := bench.CompareCurves(a, b, float64(bench.DefaultLatencyBound/time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := bench.WriteCurveComparisonTable(&table, cc); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s:\n%s", title, table.String())
}

// TestBenchCurveNConnect measures the load curve on two NFSv3 mounts of the same export,
// each with a client of its own (server addresses 127.0.0.5 and 127.0.0.6): nconnect=1
// and nconnect=4. Which tuning is better is logged, not asserted, since it depends on the
// machine.
func TestBenchCurveNConnect(t *testing.T) {
	RequireGuest(t)
	results := map[int]*bench.Result{}
	for _, tc := range []struct {
		server string
		conns  int
	}{{"127.0.0.5", 1}, {"127.0.0.6", 4}} {
		m := Mount(t, MountSpec{Server: tc.server, Version: "3", Options: "nconnect=" + strconv.Itoa(tc.conns)})
		opts := bench.CurveOptions{Rates: []int{25, 50, 100, 200, 400, 800, 1600, 3200}, Ramp: time.Second}
		results[tc.conns] = labCurve(t, m, "nconnect="+strconv.Itoa(tc.conns), opts,
			func(tu *bench.Tuning) bool { return tu.Connections == tc.conns })
	}
	logCurveComparison(t, "nconnect=1 (A) against nconnect=4 (B)", results[1], results[4])
}

// toolsCurveDelay is the link's delay each way in TestBenchCurveToolsNocto: a 5 ms round
// trip, the cloud-like link of make demo. Over the bare loopback a GETATTR costs the
// emulated machine little next to fio's own work, and both mounts stop at the emulated
// CPUs' ceiling, which moves from run to run; over a link an open under close-to-open
// waits a round trip, as it does on a cloud NFS service.
const toolsCurveDelay = 2500 * time.Microsecond

// TestBenchCurveToolsNocto measures the read-only tree's curve (eda-tools) on two NFSv3
// mounts of the same export with clients of their own, over a 5 ms round trip: the
// default cache coherence and the seed's options for static datasets, nocto,actimeo=600.
// The kernel's part is asserted on the mountstats of each step: with close-to-open every
// open of a file asks the server for its attributes (GETATTR), with nocto an open of a
// cached file sends nothing, so the nocto mount must send far fewer GETATTRs per
// operation. Which curve is better is logged, not asserted.
func TestBenchCurveToolsNocto(t *testing.T) {
	RequireGuest(t)
	Link(t, toolsCurveDelay, "", 0)
	// The ramp is long enough for a first pass over the files after the step's cache drop:
	// 200 files a process, a LOOKUP and a READ each, at 5 ms a round trip.
	opts := bench.CurveOptions{Profile: bench.CurveToolsProfile, Rates: []int{100, 200, 400, 800, 1600, 3200, 6400, 12800},
		Ramp: 3 * time.Second}
	results := map[string]*bench.Result{}
	getattrPerOp := map[string]float64{}
	for _, tc := range []struct {
		name, server, options string
	}{{"default", "127.0.0.5", ""}, {"nocto,actimeo=600", "127.0.0.6", "nocto,actimeo=600"}} {
		m := Mount(t, MountSpec{Server: tc.server, Version: "3", Options: tc.options})
		res := labCurve(t, m, tc.name, opts, func(tu *bench.Tuning) bool {
			_, nocto := tu.Options["nocto"]
			return nocto == (tc.options != "")
		})
		var getattrs, ops float64
		for i, r := range res.Runs {
			if r.Mountstats == nil {
				t.Fatalf("%s: a step without a mountstats delta", tc.name)
			}
			var rpcs []string
			for _, o := range r.Mountstats.Ops {
				if o.Op == "GETATTR" {
					getattrs += float64(o.Requests)
				}
				rpcs = append(rpcs, fmt.Sprintf("%s %d (%.1f ms)", o.Op, o.Requests, o.AvgExecms))
			}
			// The delta spans the ramp too, on both mounts alike.
			ops += (r.ReadIOPS + r.WriteIOPS) * float64(res.Provenance.RuntimeS)
			// ReadIOPS counts the stats too; the reads are the bytes over the 16 KiB of each.
			reads := r.ReadMiBs * 1024 / 16
			t.Logf("%s step %d: reads %.0f/s, stats %.0f/s; requests over ramp and runtime: %s",
				tc.name, i+1, reads, r.ReadIOPS-reads, strings.Join(rpcs, ", "))
		}
		getattrPerOp[tc.name] = getattrs / ops
		t.Logf("%s: %.0f GETATTR over %.0f operations, %.3f per operation", tc.name, getattrs, ops, getattrs/ops)
		results[tc.name] = res
	}
	if d, n := getattrPerOp["default"], getattrPerOp["nocto,actimeo=600"]; d < 0.2 || n > d/5 {
		t.Errorf("GETATTR per operation: default %.3f, nocto %.3f; want the default's at least 0.2 (one per open) and nocto's under a fifth of it", d, n)
	}
	logCurveComparison(t, "default (A) against nocto,actimeo=600 (B)", results["default"], results["nocto,actimeo=600"])
}
