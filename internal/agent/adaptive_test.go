package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/hostfs/hostfstest"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/readahead"
	"github.com/nfstune/nfstune/internal/tune"
)

// adaptivePolicy hands /mnt/scratch (0:53 in the fixture, 1 MiB rsize, 16384 KiB of
// read-ahead) to the adaptive controller, and gives the other mounts the workload's fixed
// value (the default adaptive read-ahead off).
const adaptivePolicy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults:
  workload: sequential-read
  readAheadAdaptive: false
rules:
  - match: {mountpoint: /mnt/scratch}
    readAheadAdaptive: {interval: 5s%s}
`

// traffic is what the applications on /mnt/scratch have read so far, as mountstats counts it.
type traffic struct {
	mu                               sync.Mutex
	age                              time.Duration
	app, server, reads, rttMS, opens uint64
}

// run adds seconds of reads at rateMiB MiB/s with the given over-read, in READs of 1 MiB,
// with readers keeping windowBound of a raKB window's READs in flight, and opening a file
// each second (a change of read-ahead reaches only files opened after it).
func (tr *traffic) run(seconds float64, raKB int, rateMiB, overRead, windowBound float64) {
	app := uint64(rateMiB * seconds * (1 << 20))
	server := uint64(float64(app) * overRead)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.age += time.Duration(seconds * float64(time.Second))
	tr.app += app
	tr.server += server
	tr.reads += server >> 20
	inFlight := windowBound * float64(raKB) / 1024
	tr.rttMS += uint64(inFlight * seconds * 1000)
	tr.opens += uint64(seconds)
}

// adaptiveAgent returns an agent on a copy of the fixture root whose reads show tr as the
// traffic of 0:53, under adaptivePolicy with extra rule settings.
func adaptiveAgent(t *testing.T, tr *traffic, extra string) (*Agent, hostfs.Root) {
	t.Helper()
	return adaptiveAgentAt(t, tr, extra, copyTree(t, "testdata/root"))
}

// adaptiveAgentAt is adaptiveAgent on a host root already laid out (a restart).
func adaptiveAgentAt(t *testing.T, tr *traffic, extra string, root hostfs.Root) (*Agent, hostfs.Root) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(adaptivePolicy, "%s", extra, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(context.Context) (*inventory.Inventory, error) {
		inv, err := inventory.Read(root, inventory.ReadOptions{PID: 1})
		if err != nil {
			return nil, err
		}
		for i := range inv.Mounts {
			if m := &inv.Mounts[i]; m.Device == "0:53" {
				st := *m.Stats
				tr.mu.Lock()
				st.Age = tr.age
				st.Bytes = procfs.NFSBytesStats{Read: tr.app, ReadTotal: tr.server}
				st.Operations = []procfs.NFSOperationStats{{Operation: "READ", Requests: tr.reads, CumulativeTotalResponseMilliseconds: tr.rttMS}}
				st.Events.VFSOpen = tr.opens
				tr.mu.Unlock()
				m.Stats = &st
			}
		}
		return inv, nil
	}
	a, err := New(Config{Root: root, PID: 1, Read: read, Load: func() (*Policy, error) { return LoadPolicy(cfg, "", false) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	return a, root
}

func readAheadKB(t *testing.T, root hostfs.Root, dev string) int {
	t.Helper()
	p := readReadAhead(root, dev)
	if p == nil {
		t.Fatalf("read_ahead_kb of %s unreadable", dev)
	}
	return *p
}

// TestAdaptWastefulThenRevert: a new superblock above the cap is moved into the bounds at
// the start; readers that waste half of what the server sends have their window halved
// every other interval (each change settles for one) down to one rsize, and no further; every change is counted; revert
// restores the value from before the first change.
func TestAdaptWastefulThenRevert(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, "")
	now := time.Now() // the start's step is taken at the reconcile's end
	a.Reconcile(context.Background(), TriggerStart, now)
	if got := readAheadKB(t, root, "0:53"); got != 15360 {
		t.Fatalf("after the start: %d KiB, want the cap 15360", got)
	}
	var path []int
	for range 9 {
		ra := readAheadKB(t, root, "0:53")
		tr.run(5, ra, 40, 2.0, 0.5)
		now = now.Add(5 * time.Second)
		a.Adapt(context.Background(), now)
		path = append(path, readAheadKB(t, root, "0:53"))
	}
	want := []int{15360, 7680, 7680, 3840, 3840, 1920, 1920, 1024, 1024}
	for i := range want {
		if path[i] != want[i] {
			t.Fatalf("read-ahead after each interval %v, want %v", path, want)
		}
	}
	// The move into the bounds is the new superblock's reconcile write, as for a fixed value.
	if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("new")); got != 3 {
		t.Errorf("repairs{new} = %v, want 3 (0:53 into the bounds, the others to the workload's value)", got)
	}
	m := a.cfg.Metrics.AdaptiveChanges
	if got := testutil.ToFloat64(m.WithLabelValues("down", "over_read")); got != 4 {
		t.Errorf("changes{down,over_read} = %v, want 4", got)
	}
	if got := a.adaptiveTargets()["0:53"]; got != 1024 {
		t.Errorf("target %d, want 1024", got)
	}
	if _, ok := a.adaptiveTargets()["0:52"]; ok {
		t.Error("a target for a mount no adaptive rule matches")
	}
	if _, err := tune.Revert(root); err != nil {
		t.Fatal(err)
	}
	if got := readAheadKB(t, root, "0:53"); got != 16384 {
		t.Errorf("after revert: %d KiB, want the original 16384", got)
	}
}

// TestAdaptGrowsStreaming: a sequential reader (READs of one rsize) without waste whose
// rate follows its window gets the window doubled every other interval (the change, its
// settling; the verdict's interval makes the next); ticks closer than the interval change
// nothing.
func TestAdaptGrowsStreaming(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, ", minKB: 1024")
	if _, err := hostfs.SetReadAhead(root, "0:53", 1024); err != nil {
		t.Fatal(err)
	}
	now := time.Now() // the start's step is taken at the reconcile's end
	a.Reconcile(context.Background(), TriggerStart, now)
	var path []int
	for range 11 {
		ra := readAheadKB(t, root, "0:53")
		rate := 100 * float64(ra) / 1024 // window-bound: a window twice as large reads twice as fast
		tr.run(1, ra, rate, 1.0, 0.9)
		now = now.Add(time.Second)
		a.Adapt(context.Background(), now) // too soon: nothing
		tr.run(4, ra, rate, 1.0, 0.9)
		now = now.Add(4 * time.Second)
		a.Adapt(context.Background(), now)
		path = append(path, readAheadKB(t, root, "0:53"))
	}
	want := []int{2048, 2048, 4096, 4096, 8192, 8192, 15360, 15360, 15360, 15360, 15360}
	for i := range want {
		if path[i] != want[i] {
			t.Fatalf("read-ahead after each interval %v, want %v", path, want)
		}
	}
}

// TestAdaptObserve: in observe mode nothing is written or journaled; the target says what
// the controller would set (16384 KiB is above the cap).
func TestAdaptObserve(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, ", observe: true")
	now := time.Now() // the start's step is taken at the reconcile's end
	a.Reconcile(context.Background(), TriggerStart, now)
	tr.run(5, 16384, 40, 2.0, 0.5)
	a.Adapt(context.Background(), now.Add(5*time.Second))
	if got := readAheadKB(t, root, "0:53"); got != 16384 {
		t.Errorf("observe mode wrote %d KiB", got)
	}
	if got := a.adaptiveTargets()["0:53"]; got != 15360 {
		t.Errorf("target %d, want the cap 15360", got)
	}
	if pending, err := tune.Pending(root); err != nil || pending {
		t.Errorf("journal in observe mode: %v, %v", pending, err)
	}
}

// TestAdaptNoJournalNoWrite: when the value before the change cannot be journaled, the
// change is not made.
func TestAdaptNoJournalNoWrite(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, "")
	// The journal's directory cannot be made: a file stands where it goes.
	if err := os.MkdirAll(root.Path("var/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Path("var/lib/nfstune"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a.Reconcile(context.Background(), TriggerStart, time.Unix(1_700_000_000, 0))
	if got := readAheadKB(t, root, "0:53"); got != 16384 {
		t.Errorf("changed to %d KiB without a journal", got)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.Errors.WithLabelValues("journal")); got != 1 {
		t.Errorf("errors{journal} = %v, want 1", got)
	}
}

// TestAdaptOverwriteBeforeReadBack: another writer changing the value between the
// controller's write and its read-back (a FIFO stands in for read_ahead_kb) is no failed
// write and no change of the controller's; the next step starts from that writer's value.
func TestAdaptOverwriteBeforeReadBack(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, "")
	// Journaled first, and the FIFO put in place after the step's inventory is read, so that
	// only the write and the read-back open the attribute while it is a FIFO.
	if err := tune.JournalReadAhead(root, "0:53"); err != nil {
		t.Fatal(err)
	}
	attr := root.Sys("class", "bdi", "0:53", "read_ahead_kb")
	var written func() string
	read := a.cfg.Read
	a.cfg.Read = func(ctx context.Context) (*inventory.Inventory, error) {
		inv, err := read(ctx)
		written = hostfstest.OverwriteAfterWrite(t, attr, "128\n")
		return inv, err
	}
	now := time.Unix(1_700_000_000, 0)
	a.Adapt(context.Background(), now)
	if written == nil {
		t.Fatal("the step read no inventory")
	}
	if w := written(); w != "15360\n" {
		t.Errorf("the controller wrote %q, want 15360 (16384 moved into the bounds)", w)
	}
	m := a.cfg.Metrics
	if got := testutil.ToFloat64(m.Errors.WithLabelValues("write")); got != 0 {
		t.Errorf(`errors{stage="write"} = %v, want 0`, got)
	}
	if got := testutil.ToFloat64(m.AdaptiveChanges.WithLabelValues("down", "bounds")); got != 0 {
		t.Errorf("changes{down, bounds} = %v, want 0: the change did not hold", got)
	}
	// The next step finds the other writer's 128 and moves it into the bounds.
	a.cfg.Read = read
	if err := os.Remove(attr); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(attr, []byte("128\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Adapt(context.Background(), now.Add(5*time.Second))
	if got := readAheadKB(t, root, "0:53"); got != 1024 {
		t.Errorf("read_ahead_kb after the next step = %d, want 1024 (one rsize)", got)
	}
}

// TestRunAdaptsAndForgets: Run steps adaptive read-ahead on its own ticker, and a reload to
// a policy without an adaptive rule stops it and drops its targets from the metrics.
func TestRunAdaptsAndForgets(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, "")
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(strings.Replace(adaptivePolicy, "interval: 5s", "interval: 1s", 1), "%s", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	adaptive, err := LoadPolicy(cfg, "", false)
	if err != nil {
		t.Fatal(err)
	}
	fixedCfg := filepath.Join(t.TempDir(), "fixed.yaml")
	if err := os.WriteFile(fixedCfg, []byte("apiVersion: nfstune.io/v1alpha1\nkind: Policy\ndefaults: {readAheadAdaptive: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	builtin, err := LoadPolicy(fixedCfg, "", false)
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	a.cfg.Load = func() (*Policy, error) {
		loads++
		if loads == 1 {
			return adaptive, nil
		}
		return builtin, nil
	}
	// Traffic that wastes: the first step moves 16384 into the bounds (15360), the next
	// ones halve it.
	stopTraffic := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopTraffic:
				return
			case <-time.After(100 * time.Millisecond):
				tr.run(0.1, 8192, 400, 2.0, 0.5)
			}
		}
	}()
	defer close(stopTraffic)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hangup := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, hangup) }()
	// The fixture's read_ahead_kb is a regular file, which the agent's write truncates
	// before it writes: a read in between finds it empty.
	deadline := time.Now().Add(20 * time.Second)
	for p := readReadAhead(root, "0:53"); p == nil || *p > 7680; p = readReadAhead(root, "0:53") {
		if time.Now().After(deadline) {
			t.Fatalf("read-ahead %d KiB after 20 s, want halved by the ticker", readAheadKB(t, root, "0:53"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	hangup <- struct{}{}
	for len(a.adaptiveTargets()) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("targets kept after a reload without adaptive rules")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestAdaptLearnsPerVolume: a controller that settles (here at the cap, learned_limit) keeps
// the value for the mount's volume; the next agent, after a restart, starts the same
// volume's superblock, back at the kernel's 128 KiB, at that value at once (learned),
// not at the bound. In observe mode nothing is kept.
func TestAdaptLearnsPerVolume(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, ", minKB: 1024")
	if _, err := hostfs.SetReadAhead(root, "0:53", 15360); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a.Reconcile(context.Background(), TriggerStart, now)
	for range 2 {
		tr.run(5, 15360, 100, 1.0, 0.5)
		now = now.Add(5 * time.Second)
		a.Adapt(context.Background(), now)
	}
	b, err := os.ReadFile(root.Path(tune.LearnedPath))
	if err != nil {
		t.Fatalf("nothing learned at the cap: %v", err)
	}
	var f struct{ Volumes []tune.LearnedValue }
	if err := json.Unmarshal(b, &f); err != nil || len(f.Volumes) != 1 || f.Volumes[0].ReadAheadKB != 15360 {
		t.Fatalf("learned %s (%v), want one volume at 15360 KiB", b, err)
	}

	// The volume mounted again, after a restart.
	if _, err := hostfs.SetReadAhead(root, "0:53", 128); err != nil {
		t.Fatal(err)
	}
	a2, _ := adaptiveAgentAt(t, tr, ", minKB: 1024", root)
	a2.Reconcile(context.Background(), TriggerStart, time.Now())
	if got := readAheadKB(t, root, "0:53"); got != 15360 {
		t.Errorf("the volume's next superblock starts at %d KiB, want the learned 15360", got)
	}
	if s := a2.status(nil, nil, time.Now()); len(s.Learned) != 1 || s.Learned[0].ReadAheadKB != 15360 {
		t.Errorf("/status lists %+v as learned, want the volume at 15360 KiB", s.Learned)
	}
	// The start is written by the reconcile that found the superblock, journaled first.
	if got := testutil.ToFloat64(a2.cfg.Metrics.Repairs.WithLabelValues("new")); got < 1 {
		t.Errorf("repairs{new} = %v: the learned start is not counted as the new superblock's write", got)
	}
	if _, err := tune.Revert(root); err != nil {
		t.Fatal(err)
	}
	if got := readAheadKB(t, root, "0:53"); got != 128 {
		t.Errorf("after revert: %d KiB, want the 128 from before the learned start", got)
	}

	// Observe mode keeps nothing.
	obs, obsRoot := adaptiveAgent(t, tr, ", minKB: 1024, observe: true")
	if _, err := hostfs.SetReadAhead(obsRoot, "0:53", 15360); err != nil {
		t.Fatal(err)
	}
	now = time.Now()
	obs.Reconcile(context.Background(), TriggerStart, now)
	for range 2 {
		tr.run(5, 15360, 100, 1.0, 0.5)
		now = now.Add(5 * time.Second)
		obs.Adapt(context.Background(), now)
	}
	if _, err := os.Stat(obsRoot.Path(tune.LearnedPath)); !os.IsNotExist(err) {
		t.Errorf("observe mode kept a learned value: %v", err)
	}
}

// TestAdaptMappedRandom: readers of a mapped file at random offsets, which mountstats shows
// only as READs nobody read(2), are seen through the per-pod collector: each 64 KiB read
// fault came with 15 MiB of READs. The agent takes the window from the cap to the kernel's
// 128 KiB, below the rule's floor of one rsize, journaled, and revert restores it.
func TestAdaptMappedRandom(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, "")
	var mu sync.Mutex
	var faultBytes, faults uint64
	a.cfg.PodIO = func(time.Time) podio.Snapshot {
		mu.Lock()
		defer mu.Unlock()
		return podio.Snapshot{Loaded: true, Pods: []podio.PodIO{{PodUID: "0f3c2a4e-1b2d-4c5e-8f90-a1b2c3d4e5f6", Device: "0:53",
			Counters: podio.Counters{ServerReadBytes: faultBytes, FaultReadBytes: faultBytes, MapFaults: faults}}}}
	}
	mapped := func(seconds float64, serverMiB float64) {
		tr.run(seconds, 15360, serverMiB, 1.0, 0.5)
		tr.mu.Lock()
		tr.app -= uint64(serverMiB * seconds * (1 << 20)) // no read(2): mapped
		tr.mu.Unlock()
		mu.Lock()
		faultBytes += uint64(serverMiB * seconds * (1 << 20))
		faults += uint64(serverMiB * seconds / 15) // one per 15 MiB window
		mu.Unlock()
	}
	now := time.Now()
	a.Reconcile(context.Background(), TriggerStart, now)
	mapped(5, 100)
	now = now.Add(5 * time.Second)
	a.Adapt(context.Background(), now)
	mapped(5, 100)
	now = now.Add(5 * time.Second)
	a.Adapt(context.Background(), now)
	if got := readAheadKB(t, root, "0:53"); got != 128 {
		t.Fatalf("after mapped random reads: %d KiB, want 128", got)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.AdaptiveChanges.WithLabelValues("down", "mapped_random")); got != 1 {
		t.Errorf("changes{down,mapped_random} = %v, want 1", got)
	}
	if _, err := tune.Revert(root); err != nil {
		t.Fatal(err)
	}
	if got := readAheadKB(t, root, "0:53"); got != 16384 {
		t.Errorf("after revert: %d KiB, want the original 16384", got)
	}
}

// TestAdaptHoldsRiseForUnseenFaults: without the per-pod collector, a pod that mounts the
// superblock and takes hundreds of major faults an interval (its cgroup's pgmajfault) may
// be reading its files through mmap at random: the streaming reader's window does not rise
// until its faults stop, and the hold says why.
func TestAdaptHoldsRiseForUnseenFaults(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, ", minKB: 1024")
	if _, err := hostfs.SetReadAhead(root, "0:53", 1024); err != nil {
		t.Fatal(err)
	}
	read := a.cfg.Read
	a.cfg.Read = func(ctx context.Context) (*inventory.Inventory, error) {
		inv, err := read(ctx)
		for i := range inv.Mounts { // the pod's volume: a bind mount of the superblock
			if m := &inv.Mounts[i]; m.Device == "0:53" {
				m.MountPoints = append(m.MountPoints, trafficVolPath)
			}
		}
		return inv, err
	}
	writeCgroup(t, root, 0, 0, 0)
	stat := root.Sys("fs", "cgroup", trafficPodDir, "memory.stat")
	majorFaults := func(n int) {
		text := "file 60000000\nfile_mapped 0\nworkingset_refault_file 0\npgmajfault " + strconv.Itoa(n) + "\n"
		if err := os.WriteFile(stat, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := debugLog(a)
	now := time.Now()
	a.Reconcile(context.Background(), TriggerStart, now)
	for i, tt := range []struct {
		majorFaults int
		wantKB      int
		wantReason  readahead.Reason
	}{
		{10, 1024, ""},                         // the first reading of the mount and the pod
		{410, 1024, readahead.HoldMapped},      // 400 major faults nothing places
		{810, 1024, readahead.HoldMapped},      // still
		{810, 2048, readahead.ReasonStreaming}, // none
	} {
		majorFaults(tt.majorFaults)
		now = adaptStreaming(t, a, tr, root, logs, now, 10*time.Second)
		checkStep(t, i, root, logs, tt.wantKB, tt.wantReason)
	}
}

// debugLog sends the agent's log, debug lines included, to the buffer it returns.
func debugLog(a *Agent) *bytes.Buffer {
	var logs bytes.Buffer
	a.cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &logs
}

// adaptStreaming runs d of a window-bound streaming reader on 0:53 (a window twice as large
// reads twice as fast) and the agent's Adapt at its end, with logs emptied first; it returns
// the interval's end.
func adaptStreaming(t *testing.T, a *Agent, tr *traffic, root hostfs.Root, logs *bytes.Buffer, now time.Time, d time.Duration) time.Time {
	t.Helper()
	logs.Reset()
	ra := readAheadKB(t, root, "0:53")
	tr.run(d.Seconds(), ra, 100*float64(ra)/1024, 1.0, 0.9)
	now = now.Add(d)
	a.Adapt(context.Background(), now)
	return now
}

// checkStep fails the test unless interval i left 0:53 at wantKB and, when wantReason is
// set, the interval's log gives it.
func checkStep(t *testing.T, i int, root hostfs.Root, logs *bytes.Buffer, wantKB int, wantReason readahead.Reason) {
	t.Helper()
	if got := readAheadKB(t, root, "0:53"); got != wantKB {
		t.Fatalf("interval %d: %d KiB, want %d\n%s", i, got, wantKB, logs.String())
	}
	if wantReason != "" && !strings.Contains(logs.String(), "reason="+string(wantReason)) {
		t.Fatalf("interval %d: want reason %s in the log:\n%s", i, wantReason, logs.String())
	}
}

// TestAdaptHoldsRiseUntilFaultsSeen: with the per-pod collector on, a streaming reader's
// window rises only on an interval the collector measured: not on the one in which it
// loaded, nor on one it could not be read at; and an interval measured from a failed read
// does not count every fault since the load as the interval's.
func TestAdaptHoldsRiseUntilFaultsSeen(t *testing.T) {
	t.Parallel()
	tr := &traffic{age: time.Minute}
	a, root := adaptiveAgent(t, tr, ", minKB: 1024")
	if _, err := hostfs.SetReadAhead(root, "0:53", 1024); err != nil {
		t.Fatal(err)
	}
	logs := debugLog(a)
	pod := "0f3c2a4e-1b2d-4c5e-8f90-a1b2c3d4e5f6"
	var mu sync.Mutex
	var snap podio.Snapshot
	a.cfg.PodIO = func(time.Time) podio.Snapshot {
		mu.Lock()
		defer mu.Unlock()
		return snap
	}
	loading := podio.Snapshot{Why: "podio: the nfs module is not loaded"}
	loaded := func(majorFaults uint64) podio.Snapshot {
		return podio.Snapshot{Loaded: true, Pods: []podio.PodIO{{PodUID: pod, Device: "0:53",
			Counters: podio.Counters{MajorFaults: majorFaults, MapFaults: majorFaults}}}}
	}
	now := time.Now()
	a.Reconcile(context.Background(), TriggerStart, now)
	for i, tt := range []struct {
		snap       podio.Snapshot
		wantKB     int
		wantReason readahead.Reason
	}{
		{loading, 1024, ""},                             // the controller's first reading of the mount
		{loaded(500), 1024, readahead.HoldFaultsUnseen}, // loaded during the interval
		{loaded(500), 2048, readahead.ReasonStreaming},  // measured, no fault
		{loaded(500), 2048, ""},                         // the rise's settling
		{podio.Snapshot{Loaded: true, Why: "reading a map"}, 2048, readahead.HoldFaultsUnseen}, // unread
		{loaded(501), 2048, readahead.HoldFaultsUnseen},                                        // from the failed read
		{loaded(502), 4096, readahead.ReasonStreaming},                                         // measured: 1 major fault
	} {
		mu.Lock()
		snap = tt.snap
		mu.Unlock()
		now = adaptStreaming(t, a, tr, root, logs, now, 5*time.Second)
		checkStep(t, i, root, logs, tt.wantKB, tt.wantReason)
	}
}
