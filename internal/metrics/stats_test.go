package metrics

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/inventory"
)

// snapshots returns a read function that yields each inventory in turn, then the last again.
func snapshots(invs ...*inventory.Inventory) func() (*inventory.Inventory, error) {
	return func() (*inventory.Inventory, error) {
		inv := invs[0]
		if len(invs) > 1 {
			invs = invs[1:]
		}
		return inv, nil
	}
}

// TestWatchStatsIntervals: the first report covers the 120 s since mount, the second the
// interval between the reads, with the 2403 sends made in it (all four xprt: lines).
func TestWatchStatsIntervals(t *testing.T) {
	t.Parallel()
	var got []StatsReport
	read := snapshots(loadStats(t, "t0"), loadStats(t, "t1"))
	opts := StatsOptions{Interval: 10 * time.Millisecond, Count: 2, MountPoints: []string{"/mnt/data"}}
	err := WatchStats(context.Background(), read, opts, func(r StatsReport) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0].Mounts) != 1 || len(got[1].Mounts) != 1 {
		t.Fatalf("got %d reports (%+v), want 2 of one mount each", len(got), got)
	}
	if first := got[0].Mounts[0]; first.Seconds != 120 || !near(first.OpsPerSec, 32) {
		t.Errorf("first report = %v s, %v ops/s; want 120 s, 32 ops/s", first.Seconds, first.OpsPerSec)
	}
	second := got[1].Mounts[0]
	if second.Seconds <= 0 || second.Seconds > 5 {
		t.Errorf("second report interval = %v s", second.Seconds)
	}
	if sends := second.OpsPerSec * second.Seconds; sends < 2402.9 || sends > 2403.1 {
		t.Errorf("sends in interval = %v, want 2403", sends)
	}
	if !got[1].Time.After(got[0].Time) || got[0].Time.Location() != time.UTC {
		t.Errorf("report times %v, %v: want increasing, in UTC", got[0].Time, got[1].Time)
	}
}

func TestWatchStatsStops(t *testing.T) {
	t.Parallel()
	inv := loadStats(t, "t1")
	count := func(ctx context.Context, opts StatsOptions, stop func(n int)) (int, error) {
		n := 0
		err := WatchStats(ctx, snapshots(inv), opts, func(StatsReport) error {
			n++
			stop(n)
			return nil
		})
		return n, err
	}
	// Without an interval there is one report, whatever the count.
	if n, err := count(context.Background(), StatsOptions{}, func(int) {}); n != 1 || err != nil {
		t.Errorf("no interval: %d reports, err %v; want 1, nil", n, err)
	}
	// Without a count, reports go on until the context ends: here after the third, however
	// slowly a busy machine delivers them.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopAt3 := func(n int) {
		if n == 3 {
			cancel()
		}
	}
	if n, err := count(ctx, StatsOptions{Interval: 5 * time.Millisecond}, stopAt3); n != 3 || err != nil {
		t.Errorf("until cancelled: %d reports, err %v; want 3, nil", n, err)
	}
}

func TestWatchStatsErrors(t *testing.T) {
	t.Parallel()
	withStats := loadStats(t, "t1")
	errRead := errors.New("mountinfo gone")
	errWrite := errors.New("broken pipe")
	ok := func(StatsReport) error { return nil }
	for _, tt := range []struct {
		name   string
		read   func() (*inventory.Inventory, error)
		opts   StatsOptions
		report func(StatsReport) error
		is     error
		want   string
	}{
		{name: "no NFS mount", read: snapshots(&inventory.Inventory{}), report: ok, is: ErrNoStats, want: "no NFS mounts with statistics"},
		{name: "unknown mount point", read: snapshots(withStats), opts: StatsOptions{MountPoints: []string{"/nowhere"}}, report: ok, want: "no NFS mount with statistics at [/nowhere]"},
		{name: "read fails", read: func() (*inventory.Inventory, error) { return nil, errRead }, report: ok, is: errRead, want: "reading NFS statistics: mountinfo gone"},
		{name: "report fails", read: snapshots(withStats), report: func(StatsReport) error { return errWrite }, is: errWrite, want: "broken pipe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := WatchStats(context.Background(), tt.read, tt.opts, tt.report)
			if err == nil || err.Error() != tt.want || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("err = %v, want %q (is %v)", err, tt.want, tt.is)
			}
			if tt.is == nil && errors.Is(err, ErrNoStats) {
				t.Errorf("err = %v is ErrNoStats; a named mount point that is missing is a usage error", err)
			}
		})
	}
}

func TestWriteStatsTable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := WriteStatsTable(&out, Rates(nil, loadStats(t, "t0"), 0)); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"10.0.0.5:/export/data mounted on /mnt/data (0:82, NFS 4.2, 4 connections, over 120.0 s):",
		"ops/s  avg backlog  read MB/s  write MB/s  retrans",
		"32.000",
		"operation   ops/s     kB/op   retrans  avg RTT (ms)  avg exe (ms)  avg queue (ms)  errors",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
}

// TestRatesReadAhead checks that each interval carries the read-ahead evidence of the same
// interval (package readahead), and that the table shows it. Between t0 and t1, 10 s apart:
// 5242880000 - 3145728000 = 2097152000 bytes read by applications and by the server
// (over-read 1), in 5000 - 3000 = 2000 READs of 1048576 bytes; RTT (28000 - 12000) ms = 16 s,
// so 1.6 READs in flight; a 15360 KiB window holds 15 READs: window-bound 1.6 / 15.
func TestRatesReadAhead(t *testing.T) {
	t.Parallel()
	t0, t1 := loadStats(t, "t0"), loadStats(t, "t1")
	ra := 15360
	t1.Mounts[0].ReadAheadKB = &ra
	r := Rates(t0, t1, 10*time.Second)[0].ReadAhead
	if r.Seconds != 10 || r.AppReadBytes != 2097152000 || r.Reads != 2000 || !near(r.OverRead, 1) ||
		!near(r.AvgReadBytes, 1048576) || !near(r.InFlight, 1.6) || !near(r.WindowReads, 15) || !near(r.WindowBound, 1.6/15) {
		t.Errorf("read-ahead evidence = %+v", r)
	}
	var out bytes.Buffer
	if err := WriteStatsTable(&out, Rates(t0, t1, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"read-ahead kB  app read MB/s  over-read  avg READ kB  rsize kB  READs in flight  window READs  window-bound",
		"15360        209.715      1.000     1024.000",
		"1.600        15.000         0.107",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
