package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
)

var statsArgTests = []struct {
	name     string
	args     []string
	interval time.Duration
	count    int
	mounts   []string
	wantErr  bool
}{
	{name: "none", args: nil, count: 1},
	{name: "interval", args: []string{"5"}, interval: 5 * time.Second},
	{name: "interval and count", args: []string{"0.5", "3"}, interval: 500 * time.Millisecond, count: 3},
	{name: "mounts after numbers", args: []string{"2", "4", "/mnt/data/", "/srv"}, interval: 2 * time.Second, count: 4, mounts: []string{"/mnt/data", "/srv"}},
	{name: "mount only", args: []string{"/mnt/data"}, count: 1, mounts: []string{"/mnt/data"}},
	{name: "zero interval", args: []string{"0"}, wantErr: true},
	{name: "negative count", args: []string{"1", "-2"}, wantErr: true},
}

func TestParseStatsArgs(t *testing.T) {
	t.Parallel()
	for _, tt := range statsArgTests {
		t.Run(tt.name, func(t *testing.T) {
			interval, count, mounts, err := parseStatsArgs(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if interval != tt.interval || count != tt.count {
				t.Errorf("interval, count = %v, %d; want %v, %d", interval, count, tt.interval, tt.count)
			}
			if diff := cmp.Diff(tt.mounts, mounts); diff != "" {
				t.Errorf("mounts (-want +got):\n%s", diff)
			}
		})
	}
}

// twoSnapshots returns a read function that yields testdata/stats/t0, then t1.
func twoSnapshots(t *testing.T) func() (*inventory.Inventory, error) {
	t.Helper()
	var invs []*inventory.Inventory
	for _, dir := range []string{"t0", "t1"} {
		inv, err := inventory.Read(hostfs.Root("testdata/stats/"+dir), inventory.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		invs = append(invs, inv)
	}
	return func() (*inventory.Inventory, error) {
		inv := invs[0]
		if len(invs) > 1 {
			invs = invs[1:]
		}
		return inv, nil
	}
}

func TestStatsJSON(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := runStats(context.Background(), &out, twoSnapshots(t), metrics.StatsOptions{Interval: 10 * time.Millisecond, Count: 2, MountPoints: []string{"/mnt/data"}}, OutputJSON)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d JSON lines, want one per interval (2):\n%s", len(lines), out.String())
	}
	var first, second metrics.StatsReport
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if len(first.Mounts) != 1 || len(second.Mounts) != 1 {
		t.Fatalf("mounts per report = %d, %d; want 1, 1", len(first.Mounts), len(second.Mounts))
	}
	// The first report covers the 120 s since mount: 3840 sends over four transports.
	if got := first.Mounts[0]; got.Seconds != 120 || got.OpsPerSec != 32 || got.Connections != 4 {
		t.Errorf("first report = %+v, want 120 s, 32 ops/s, 4 connections", got)
	}
	// The second covers the (short) real interval; 2403 more sends in it, READ first.
	got := second.Mounts[0]
	if got.Seconds <= 0 || got.Seconds > 5 {
		t.Errorf("second report interval = %v s", got.Seconds)
	}
	if sends := got.OpsPerSec * got.Seconds; sends < 2402.9 || sends > 2403.1 {
		t.Errorf("sends in interval = %v, want 2403 (all four xprt: lines)", sends)
	}
	if len(got.Ops) == 0 || got.Ops[0].Operation != "READ" || got.Ops[0].Ops != 2000 || got.Ops[0].AvgRTTMs != 8 {
		t.Errorf("ops = %+v, want READ first with 2000 ops at 8 ms RTT", got.Ops)
	}
}

// TestStatsJSONIdle checks that an interval without operations prints "ops": [], which a
// consumer can iterate, not null.
func TestStatsJSONIdle(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("testdata/stats/t1"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same := func() (*inventory.Inventory, error) { return inv, nil }
	var out bytes.Buffer
	if err := runStats(context.Background(), &out, same, metrics.StatsOptions{Interval: 10 * time.Millisecond, Count: 2}, OutputJSON); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d JSON lines, want 2:\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[1], `"ops":[]`) || strings.Contains(lines[1], `"ops":null`) {
		t.Errorf("idle interval = %s, want \"ops\":[]", lines[1])
	}
}

// stackedRoot is the inventory's lab tree with two superblocks stacked on one mount point:
// NFSv3 below (1 MiB written, 16 RPCs, 33 s old), NFSv4.1 with nconnect=2 above (3 MiB
// written, 40 RPCs, 19 s old).
const stackedRoot = "../inventory/testdata/lab-6.1.0-50-amd64-stacked"

// TestStatsLabStacked wants each stacked superblock's own figures, not the upper one's twice.
func TestStatsLabStacked(t *testing.T) {
	t.Parallel()
	read := func() (*inventory.Inventory, error) {
		return inventory.Read(hostfs.Root(stackedRoot), inventory.ReadOptions{})
	}
	var out bytes.Buffer
	if err := runStats(context.Background(), &out, read, metrics.StatsOptions{MountPoints: []string{"/mnt/lab/stacked"}}, OutputJSON); err != nil {
		t.Fatal(err)
	}
	var rep metrics.StatsReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	type figures struct {
		Device, Version        string
		Connections            int
		Seconds, Sends, Writes float64
	}
	var got []figures
	for _, m := range rep.Mounts {
		got = append(got, figures{m.Device, m.Version, m.Connections, m.Seconds, m.OpsPerSec * m.Seconds, m.WriteMBps * m.Seconds * 1e6})
	}
	want := []figures{{"0:63", "3", 1, 33, 16, 1 << 20}, {"0:65", "4.1", 2, 19, 40, 3 << 20}}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func TestStatsTable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := runStats(context.Background(), &out, twoSnapshots(t), metrics.StatsOptions{}, OutputTable); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"10.0.0.5:/export/data mounted on /mnt/data (0:52, NFS 4.2, 4 connections, over 120.0 s):",
		"ops/s  avg backlog  read MB/s  write MB/s  retrans",
		"32.000", // 3840 sends / 120 s
		"operation   ops/s     kB/op   retrans  avg RTT (ms)  avg exe (ms)  avg queue (ms)  errors",
		"READ  25.000  1024.250  0 (0.0%)         4.000         6.000           1.000       0",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}

func TestStatsUnknownMount(t *testing.T) {
	t.Parallel()
	err := runStats(context.Background(), &bytes.Buffer{}, twoSnapshots(t), metrics.StatsOptions{MountPoints: []string{"/nowhere"}}, OutputTable)
	if err == nil || !strings.Contains(err.Error(), "/nowhere") {
		t.Errorf("err = %v, want one naming /nowhere", err)
	}
}

func TestStatsTableEscapes(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	rates := []metrics.MountRates{{Server: "srv\x1b[2J", Export: "/e", MountPoint: "/mnt/a\nforged line", Device: "0:53",
		Ops: []metrics.OpRates{{Operation: "READ\r\x07", Ops: 1}}}}
	if err := metrics.WriteStatsTable(&b, rates); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "\nforged line") || strings.ContainsAny(out, "\x1b\r\x07") {
		t.Errorf("host text printed raw:\n%q", out)
	}
}

// savedDir holds two saved mountstats files 60 s apart (README.md there).
const savedDir = "../inventory/testdata/saved/"

// TestStatsSavedFiles runs stats on saved files: the difference between two (mountstats -S)
// with the attribute cache view in JSON, and the usage errors.
func TestStatsSavedFiles(t *testing.T) {
	t.Parallel()
	out, errOut, code := runVerb(t, "stats", "--file", savedDir+"after.mountstats", "--since", savedDir+"before.mountstats",
		"--view", "attr", "-o", "json", "/mnt/home")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep metrics.StatsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Mounts) != 2 || rep.Mounts[0].Attr == nil || rep.Mounts[0].Dir != nil {
		t.Fatalf("report = %s, want two mounts with the attr view only", out)
	}
	if m := rep.Mounts[0]; m.Seconds != 60 || m.Attr.InodeRevalidates != 100 || m.Attr.VFSOpens != 100 {
		t.Errorf("first mount = %v s, %+v; want 60 s, 100 opens, 100 forced GETATTRs", m.Seconds, m.Attr)
	}
	if strings.Contains(out, `"time"`) || strings.Contains(out, `"device"`) {
		t.Errorf("a saved file has no time and no devices: %s", out)
	}

	out, _, code = runVerb(t, "stats", "-f", savedDir+"after.mountstats", "--view", "page")
	if code != ExitOK || !strings.Contains(out, "page cache (nfsiostat -p):") || !strings.Contains(out, "over 160.0 s") {
		t.Errorf("table since mount, exit %d:\n%s", code, out)
	}

	for _, args := range [][]string{
		{"stats", "--file", savedDir + "after.mountstats", "5"},
		{"stats", "--file", savedDir + "after.mountstats", "--pid", "1"},
		{"stats", "--file", "/dev/zero"},
		{"stats", "--view", "cache"},
	} {
		if _, errOut, code := runVerb(t, args...); code != ExitError2 {
			t.Errorf("%v: exit %d (%s), want %d", args, code, errOut, ExitError2)
		}
	}
}

// TestStatsSinceHost: --since alone compares the host's mountstats now with a saved copy.
func TestStatsSinceHost(t *testing.T) {
	t.Parallel()
	out, errOut, code := runVerb(t, "--root", "testdata/stats/t1", "stats", "--since", "testdata/stats/t0/proc/self/mountstats", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep metrics.StatsReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// t0 and t1 are 10 s apart with 2403 sends between them.
	if len(rep.Mounts) != 1 || rep.Mounts[0].Seconds != 10 || rep.Mounts[0].OpsPerSec != 240.3 {
		t.Errorf("report = %s, want 10 s at 240.3 ops/s", out)
	}
}
