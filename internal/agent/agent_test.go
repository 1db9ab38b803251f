package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/hostfs/hostfstest"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

// volumesHeader is the header of /proc/fs/nfsfs/volumes on kernel 6.1 (fs/nfs/client.c).
const volumesHeader = "NV SERVER   PORT DEV          FSID                              FSC\n"

// fakeHost is a fixture root holding bdi attributes and nfsfs volumes for a set of NFS
// superblocks; its read function builds the inventory from the files, as inventory.Read
// would.
type fakeHost struct {
	t    *testing.T
	root hostfs.Root
	mu   sync.Mutex
	devs []string
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	h := &fakeHost{t: t, root: hostfs.Root(t.TempDir())}
	if err := os.MkdirAll(h.root.Proc("1", "net", "nfsfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.root.Proc("1", "mountinfo"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.writeVolumes()
	return h
}

// mount adds an NFS superblock with the kernel's default read-ahead (128 KiB since 5.4).
func (h *fakeHost) mount(dev string, listed bool) {
	h.t.Helper()
	dir := h.root.Sys("class", "bdi", dev)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	h.setRA(dev, 128)
	h.mu.Lock()
	h.devs = append(h.devs, dev)
	h.mu.Unlock()
	if listed {
		h.writeVolumes()
	}
}

func (h *fakeHost) umount(dev string) {
	h.mu.Lock()
	for i, d := range h.devs {
		if d == dev {
			h.devs = append(h.devs[:i], h.devs[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	os.RemoveAll(h.root.Sys("class", "bdi", dev))
	h.writeVolumes()
}

func (h *fakeHost) writeVolumes() {
	h.t.Helper()
	var b strings.Builder
	b.WriteString(volumesHeader)
	h.mu.Lock()
	for _, d := range h.devs {
		b.WriteString("v4 0a000005  801 " + d + "         1f0b2c3d4e5f6071:8293a4b5c6d7e8f9  no\n")
	}
	h.mu.Unlock()
	if err := os.WriteFile(h.root.Proc("1", "net", "nfsfs", "volumes"), []byte(b.String()), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) setRA(dev string, kb int) {
	h.t.Helper()
	p := h.root.Sys("class", "bdi", dev, "read_ahead_kb")
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) ra(dev string) int {
	h.t.Helper()
	n, err := hostfs.ReadInt(h.root.Sys("class", "bdi", dev, "read_ahead_kb"))
	if err != nil {
		h.t.Fatal(err)
	}
	return int(n)
}

func (h *fakeHost) read(context.Context) (*inventory.Inventory, error) {
	h.mu.Lock()
	devs := append([]string(nil), h.devs...)
	h.mu.Unlock()
	inv := &inventory.Inventory{}
	for _, d := range devs {
		m := inventory.Mount{Device: d, MountPoints: []string{"/mnt/" + d}, Server: "files.example", Export: "/x", FSType: "nfs4", Version: "4.2", RSize: 262144}
		if n, err := hostfs.ReadInt(h.root.Sys("class", "bdi", d, "read_ahead_kb")); err == nil {
			v := int(n)
			m.ReadAheadKB = &v
		}
		inv.Mounts = append(inv.Mounts, m)
	}
	return inv, nil
}

func fixedPolicy(kb int, mode policy.Mode) LoadFunc {
	return func() (*Policy, error) {
		return &Policy{
			Resolve: func(*inventory.Mount) Desired { return Desired{ReadAheadKB: kb, Mode: mode} },
			Audit: func(inv *inventory.Inventory, _ audit.Options) audit.Report {
				rep := audit.Report{Mounts: inv.Mounts}
				for _, m := range inv.Mounts {
					if m.ReadAheadKB != nil && *m.ReadAheadKB < kb {
						rep.Findings = append(rep.Findings, audit.Finding{Device: m.Device, ID: "readahead-low", Severity: "warning"})
					}
				}
				return rep
			},
		}, nil
	}
}

func newTestAgent(t *testing.T, h *fakeHost, load LoadFunc, exact bool) *Agent {
	t.Helper()
	a, err := New(Config{
		Root: h.root, PID: 1, Read: h.read, Load: load, Exact: exact,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		mode   policy.Mode
		exact  bool
		listed bool
		// before is the value someone else wrote before the first reconcile, 0 for none.
		before   int
		wantRA   int
		repairs  float64
		errors   float64
		reaction bool
	}{
		{name: "new superblock enforced", mode: policy.ModeEnforce, listed: true, wantRA: 16384, repairs: 1, reaction: true},
		{name: "observe leaves it", mode: policy.ModeObserve, listed: true, wantRA: 128},
		{name: "not in nfsfs volumes", mode: policy.ModeEnforce, listed: false, wantRA: 128, errors: 1},
		{name: "higher value is a minimum", mode: policy.ModeEnforce, listed: true, before: 32768, wantRA: 32768},
		{name: "higher value lowered when exact", mode: policy.ModeEnforce, exact: true, listed: true, before: 32768, wantRA: 16384, repairs: 1, reaction: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newFakeHost(t)
			h.mount("0:52", tt.listed)
			if tt.before != 0 {
				h.setRA("0:52", tt.before)
			}
			a := newTestAgent(t, h, fixedPolicy(16384, tt.mode), tt.exact)
			a.Reconcile(ctx, TriggerMountinfo, time.Now())
			if got := h.ra("0:52"); got != tt.wantRA {
				t.Errorf("read_ahead_kb = %d, want %d", got, tt.wantRA)
			}
			if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("new")); got != tt.repairs {
				t.Errorf("repairs{new} = %v, want %v", got, tt.repairs)
			}
			if got := testutil.ToFloat64(a.cfg.Metrics.Errors.WithLabelValues("write")); got != tt.errors {
				t.Errorf("errors{write} = %v, want %v", got, tt.errors)
			}
			if got := histCount(t, a) == 1; got != tt.reaction {
				t.Errorf("reaction observed = %v, want %v", got, tt.reaction)
			}
		})
	}
}

func histCount(t *testing.T, a *Agent) uint64 {
	t.Helper()
	var m dto.Metric
	if err := a.cfg.Metrics.Reaction.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// With the built-in policy a generic mount's read-ahead is adaptive: the agent moves a new
// superblock at the kernel's 128 KiB to one rsize (the bounds' floor) at once, and leaves a
// value inside the bounds (one rsize to 15 x rsize) to the controller, --exact or not.
func TestReconcileBuiltInPolicy(t *testing.T) {
	t.Parallel()
	pol := policy.Default()
	load := func() (*Policy, error) {
		return &Policy{Resolve: func(m *inventory.Mount) Desired {
			r := pol.Resolve(m)
			return Desired{ReadAheadKB: r.ReadAheadKB, Mode: r.Mode, ReadAheadRSizes: r.ReadAheadRSizes, ReadAheadExact: r.ReadAheadExact, Adaptive: r.Adaptive}
		}}, nil
	}
	for _, exact := range []bool{false, true} {
		h := newFakeHost(t)
		h.mount("0:52", true)
		h.mount("0:53", true)
		h.setRA("0:53", 2048)
		a := newTestAgent(t, h, load, exact)
		a.Reconcile(context.Background(), TriggerMountinfo, time.Now())
		if got52, got53 := h.ra("0:52"), h.ra("0:53"); got52 != 256 || got53 != 2048 {
			t.Errorf("exact %v: read_ahead_kb 0:52 = %d, 0:53 = %d; want 256 (one rsize of 256 KiB), 2048", exact, got52, got53)
		}
	}
}

func TestReconcileDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		mode    policy.Mode
		wantRA  int
		repairs float64
	}{
		{name: "enforce restores", mode: policy.ModeEnforce, wantRA: 16384, repairs: 1},
		{name: "observe reports", mode: policy.ModeObserve, wantRA: 256, repairs: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newFakeHost(t)
			h.mount("0:52", true)
			h.setRA("0:52", 16384)
			a := newTestAgent(t, h, fixedPolicy(16384, tt.mode), false)
			a.Reconcile(ctx, TriggerStart, time.Now())
			h.setRA("0:52", 256) // someone else lowers it
			a.Reconcile(ctx, TriggerResync, time.Now())
			a.Reconcile(ctx, TriggerResync, time.Now()) // counted once, not per resync
			if got := h.ra("0:52"); got != tt.wantRA {
				t.Errorf("read_ahead_kb = %d, want %d", got, tt.wantRA)
			}
			if got := testutil.ToFloat64(a.cfg.Metrics.Drifts); got != 1 {
				t.Errorf("drifts = %v, want 1", got)
			}
			if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("drift")); got != tt.repairs {
				t.Errorf("repairs{drift} = %v, want %v", got, tt.repairs)
			}
		})
	}
}

func TestReconcileForgetsVanished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newFakeHost(t)
	a := newTestAgent(t, h, fixedPolicy(4096, policy.ModeEnforce), false)
	for i := range 200 {
		dev := "0:" + strconv.Itoa(60+i)
		h.mount(dev, true)
		a.Reconcile(ctx, TriggerMountinfo, time.Now())
		if got := h.ra(dev); got != 4096 {
			t.Fatalf("cycle %d: read_ahead_kb = %d, want 4096", i, got)
		}
		h.umount(dev)
		a.Reconcile(ctx, TriggerMountinfo, time.Now())
	}
	if n := a.Known(); n != 0 {
		t.Errorf("agent still tracks %d superblocks after every unmount", n)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("new")); got != 200 {
		t.Errorf("repairs{new} = %v, want 200", got)
	}
}

func TestReloadRaisesProfile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newFakeHost(t)
	h.mount("0:52", true)
	kb := 1024
	load := func() (*Policy, error) { return fixedPolicy(kb, policy.ModeEnforce)() }
	a := newTestAgent(t, h, load, false)
	a.Reconcile(ctx, TriggerStart, time.Now())
	kb = 8192
	a.reloadPolicy(ctx)
	if got := h.ra("0:52"); got != 8192 {
		t.Errorf("read_ahead_kb after reload = %d, want 8192", got)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("policy")); got != 1 {
		t.Errorf("repairs{policy} = %v, want 1", got)
	}
}

func TestReloadFailureKeepsPolicy(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	fail := false
	load := func() (*Policy, error) {
		if fail {
			return nil, errors.New("config.yaml: unknown key \"readahead\"")
		}
		return fixedPolicy(1024, policy.ModeEnforce)()
	}
	a := newTestAgent(t, h, load, false)
	fail = true
	a.reloadPolicy(context.Background())
	if a.policy == nil {
		t.Fatal("policy dropped after a failed reload")
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.Errors.WithLabelValues("policy")); got != 1 {
		t.Errorf("errors{policy} = %v, want 1", got)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.mount("0:52", true)
	a := newTestAgent(t, h, fixedPolicy(16384, policy.ModeObserve), false)
	hd, err := a.Handler(HandlerOptions{ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the first reconcile = %d, want 503", code)
	}
	a.Reconcile(context.Background(), TriggerStart, time.Now())
	for _, p := range []string{"/readyz", "/healthz"} {
		if code, body := get(p); code != http.StatusOK {
			t.Errorf("%s = %d %q, want 200", p, code, body)
		}
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`nfstune_mount_findings{backend="",device="0:52",export="/x",mountpoint="/mnt/0:52",rule="readahead-low",server="files.example",severity="warning",version="4.2"} 1`,
		`nfstune_mount_read_ahead_bytes{backend="",device="0:52",export="/x",mountpoint="/mnt/0:52",server="files.example",version="4.2"} 131072`,
		`nfstune_agent_reconciles_total{trigger="start"} 1`,
		"go_goroutines ",
		"process_open_fds ",
		"nfstune_scrape_success 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestScrapeDeadServer stands in for a hung read: the inventory read never returns, and
// /metrics must still answer within a second, then again without piling up reads.
func TestScrapeDeadServer(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	var reads sync.WaitGroup
	a, err := New(Config{
		Root: h.root,
		Read: func(ctx context.Context) (*inventory.Inventory, error) {
			reads.Add(1)
			defer reads.Done()
			<-block
			return nil, errors.New("unblocked")
		},
		Load:   fixedPolicy(1024, policy.ModeEnforce),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	hd, err := a.Handler(HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		start := time.Now()
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if took := time.Since(start); took >= time.Second {
			t.Errorf("scrape %d took %v, want < 1s", i, took)
		}
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "nfstune_scrape_success 0") {
			t.Errorf("scrape %d: code %d, want 200 with nfstune_scrape_success 0", i, rec.Code)
		}
	}
}

// TestRunShutdown runs the whole loop on a fixture root and checks that it reconciles at
// start and returns cleanly when its context ends.
func TestRunShutdown(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.mount("0:52", true)
	a := newTestAgent(t, h, fixedPolicy(2048, policy.ModeEnforce), false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	deadline := time.Now().Add(5 * time.Second)
	for !a.Ready() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := h.ra("0:52"); got != 2048 {
		t.Errorf("read_ahead_kb = %d, want 2048", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestSetReadAheadRefuses(t *testing.T) {
	t.Parallel()
	root := hostfs.Root(t.TempDir())
	vols := map[string]bool{"0:52": true, "8:0": true}
	for _, tt := range []struct {
		name string
		m    inventory.Mount
	}{
		{name: "block device", m: inventory.Mount{Device: "8:0", FSType: "nfs4"}},
		{name: "not nfs", m: inventory.Mount{Device: "0:52", FSType: "tmpfs"}},
		{name: "not listed", m: inventory.Mount{Device: "0:53", FSType: "nfs"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := setReadAhead(root, &tt.m, listing(t, vols), 1024); !errors.Is(err, errNotNFS) {
				t.Errorf("err = %v, want errNotNFS", err)
			}
		})
	}
	// A listed NFS device whose bdi is gone (unmounted meanwhile) is an error, not a file
	// created in /sys.
	if err := setReadAhead(root, &inventory.Mount{Device: "0:52", FSType: "nfs4"}, listing(t, vols), 1024); err == nil {
		t.Error("wrote to a missing bdi")
	}
	if _, err := os.Stat(filepath.Join(string(root), "sys")); !os.IsNotExist(err) {
		t.Errorf("setReadAhead created files under /sys: %v", err)
	}
}

// TestBoundedSourceServesLastSnapshot: a read that outlives the scrape timeout yields the
// last good snapshot, and a scrape during a still-running read does not start another.
func TestBoundedSourceServesLastSnapshot(t *testing.T) {
	t.Parallel()
	good := &inventory.Inventory{KernelRelease: "6.1.0-28-amd64"}
	release := make(chan struct{})
	var calls atomic.Int32
	src := boundedSource(func(ctx context.Context) (metrics.Snapshot, error) {
		if calls.Add(1) == 1 {
			return metrics.Snapshot{Inventory: good}, nil
		}
		<-release
		return metrics.Snapshot{}, errors.New("late")
	}, 0)
	if s, err := src(context.Background()); err != nil || s.Inventory != good {
		t.Fatalf("first read = %v, %v", s.Inventory, err)
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		s, err := src(ctx)
		cancel()
		if err != nil || s.Inventory != good {
			t.Errorf("slow read %d = %v, %v; want the last snapshot", i, s.Inventory, err)
		}
	}
	close(release)
	if n := calls.Load(); n != 2 {
		t.Errorf("source called %d times, want 2 (no read started while one was running)", n)
	}
}

// TestBoundedSourceBackToBack: a read that starts after the last one returned reads anew,
// never the last snapshot for a read it takes to be still running.
func TestBoundedSourceBackToBack(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	src := boundedSource(func(ctx context.Context) (int32, error) { return calls.Add(1), nil }, 0)
	for i := int32(1); i <= 100000; i++ {
		if got, err := src(context.Background()); err != nil || got != i {
			t.Fatalf("read %d returned %d, %v: a stale result", i, got, err)
		}
	}
}

// BenchmarkReactionWork is the agent's share of the reaction time, without the CPU
// contention of an emulated guest: one mountinfo-triggered reconcile on a host with 50 NFS
// superblocks (inventory.GenerateTree) that finds one new superblock below its profile,
// reads mountinfo, the bdi values and nfsfs volumes, and writes and reads back
// read_ahead_kb.
func BenchmarkReactionWork(b *testing.B) { benchReactionWork(b, 50) }

// BenchmarkReactionWork1000 and BenchmarkReactionWork10000 are BenchmarkReactionWork with
// 1,000 and 10,000 superblocks present.
func BenchmarkReactionWork1000(b *testing.B)  { benchReactionWork(b, 1000) }
func BenchmarkReactionWork10000(b *testing.B) { benchReactionWork(b, 10000) }

// BenchmarkReactionWorkAdaptive10000 is BenchmarkReactionWork10000 under the built-in policy,
// adaptive read-ahead: the new superblock starts at its floor, journaled first, in a journal
// that already holds the 10,000 superblocks the agent's start moved into their bounds.
func BenchmarkReactionWorkAdaptive10000(b *testing.B) { benchReactionWorkUnder(b, 10000, nil) }

// benchReactionWork reports the whole reconcile per op, and as reaction-ms the agent's own
// reaction metric: from the change to the new superblock's write, which comes before the
// known superblocks' checks (newFirst).
func benchReactionWork(b *testing.B, n int) {
	benchReactionWorkUnder(b, n, fixedPolicy(15360, policy.ModeEnforce))
}

// benchReactionWorkUnder is benchReactionWork under load (nil: the built-in policy, whose
// read-ahead is adaptive).
func benchReactionWorkUnder(b *testing.B, n int, load LoadFunc) {
	if load == nil {
		load = func() (*Policy, error) { return LoadPolicy("", "", false) }
	}
	dir := b.TempDir()
	if err := inventorytest.GenerateTree(dir, n); err != nil {
		b.Fatal(err)
	}
	root := hostfs.Root(dir)
	// As the agent runs: reconciles read the mount table and read-ahead themselves.
	read := NewMountTable(root, 0).Read
	a, err := New(Config{Root: root, PID: 0, Read: read, ReconcileRead: read, Load: load})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const dev = "0:100"
	p := root.Sys("class", "bdi", dev, "read_ahead_kb")
	if err := os.WriteFile(p, []byte("128\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	a.Reconcile(ctx, TriggerStart, time.Now())
	want, err := hostfs.ReadInt(p) // where the start put it: the value each op writes again
	if err != nil || want == 128 {
		b.Fatalf("read_ahead_kb after the start = %d (%v), want it moved from 128", want, err)
	}
	// Each op's mount table differs from the last in the new superblock's line (its
	// per-mount options), as a real one does after a mount: the read builds that
	// superblock again and reuses the others.
	infoPath := root.Proc("1", "mountinfo")
	info, err := os.ReadFile(infoPath)
	if err != nil {
		b.Fatal(err)
	}
	const line = "100 21 0:100 / "
	i := bytes.Index(info, []byte(line))
	if i < 0 {
		b.Fatalf("%s has no line %q", infoPath, line)
	}
	end := i + bytes.IndexByte(info[i:], '\n')
	tables := [2][]byte{info, slices.Concat(info[:i], bytes.Replace(info[i:end], []byte(" rw,relatime "), []byte(" rw,noatime "), 1), info[end:])}
	if bytes.Equal(tables[0], tables[1]) {
		b.Fatalf("line %q has no per-mount rw,relatime to change", line)
	}
	for op := 0; b.Loop(); op++ {
		// The superblock is new to the agent, with the kernel's default read-ahead, as
		// right after its mount.
		b.StopTimer()
		if err := os.WriteFile(infoPath, tables[op%2], 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := os.WriteFile(p, []byte("128\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		a.mu.Lock()
		delete(a.known, dev)
		a.mu.Unlock()
		if n := a.Reconcile(ctx, TriggerMountinfo, time.Now()); n != 1 {
			b.Fatalf("tuned %d new superblocks, want 1", n)
		}
	}
	if n, _ := hostfs.ReadInt(p); n != want {
		b.Fatalf("read_ahead_kb = %d, want %d", n, want)
	}
	var h dto.Metric
	if err := a.cfg.Metrics.Reaction.Write(&h); err != nil {
		b.Fatal(err)
	}
	if c := h.GetHistogram().GetSampleCount(); c > 0 {
		b.ReportMetric(h.GetHistogram().GetSampleSum()/float64(c)*1e3, "reaction-ms")
	}
}

// BenchmarkAgentHeap reports the heap the agent keeps (live-MiB, after a garbage
// collection) on hosts of 1,000 and 10,000 NFS superblocks, once it has reconciled and
// served a default-tier scrape under the default series cap: the known read-ahead values,
// the last snapshot its scrapes share, and the registries. Each op is one resync and one
// scrape.
func BenchmarkAgentHeap(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			if err := inventorytest.GenerateTree(dir, n); err != nil {
				b.Fatal(err)
			}
			root := hostfs.Root(dir)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			// The reads and policy of Run.
			a, err := New(Config{
				Root: root,
				Read: func(context.Context) (*inventory.Inventory, error) {
					return inventory.Read(root, inventory.ReadOptions{})
				},
				ReconcileRead: NewMountTable(root, 0).Read,
				StatisticsRead: func(context.Context) (*inventory.Inventory, error) {
					return inventory.Read(root, inventory.ReadOptions{StatisticsOnly: true})
				},
				Load: func() (*Policy, error) { return LoadPolicy("", "", false) },
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.loadPolicy(); err != nil {
				b.Fatal(err)
			}
			// The agent's defaults (nfstune agent --max-series), but a scrape timeout
			// long enough that the snapshot is read on a loaded machine too.
			hd, err := a.Handler(HandlerOptions{MaxSeries: 100000, ScrapeTimeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				a.Reconcile(ctx, TriggerResync, time.Now())
				rec := httptest.NewRecorder()
				hd.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "nfstune_mount_info{") {
					b.Fatalf("scrape: %d, no nfstune_mount_info", rec.Code)
				}
				rec.Body = nil // the response is the client's, not the agent's
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "live-MiB")
			runtime.KeepAlive(hd)
			runtime.KeepAlive(a)
		})
	}
}

// TestSettleCatchesLateOverwrite plays udev's nfsrahead: it writes the kernel default back
// right after the agent tuned a new superblock. The settle re-checks restore the profile
// long before the 30 s resync.
func TestSettleCatchesLateOverwrite(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	a := newTestAgent(t, h, fixedPolicy(15360, policy.ModeEnforce), false)
	ctx := context.Background()
	h.mount("0:52", true)
	// A fixture file never signals: the test drives the reconciles Run would start.
	if n := a.Reconcile(ctx, TriggerMountinfo, time.Now()); n != 1 {
		t.Fatalf("tuned %d new superblocks, want 1", n)
	}
	h.setRA("0:52", 128) // the late udev write
	a.Reconcile(ctx, TriggerSettle, time.Now())
	if got := h.ra("0:52"); got != 15360 {
		t.Errorf("read_ahead_kb after settle = %d, want 15360", got)
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("drift")); got != 1 {
		t.Errorf("repairs{drift} = %v, want 1", got)
	}
}

// TestOverwriteBeforeReadBack plays udev's nfsrahead writing between the agent's write and
// its read-back (a FIFO stands in for read_ahead_kb): that is no failed write and no retry,
// and the settle re-check writes the profile again as a drift.
func TestOverwriteBeforeReadBack(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	h.mount("0:52", true)
	// The inventory says 128 both times (the kernel's default, then udev's value) without
	// opening the attribute: while it is a FIFO only the write and the read-back may.
	read := func(context.Context) (*inventory.Inventory, error) {
		kb := 128
		return &inventory.Inventory{Mounts: []inventory.Mount{{Device: "0:52", MountPoints: []string{"/mnt/0:52"},
			FSType: "nfs4", Version: "4.2", RSize: 262144, ReadAheadKB: &kb}}}, nil
	}
	a, err := New(Config{Root: h.root, PID: 1, Read: read, Load: fixedPolicy(15360, policy.ModeEnforce),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	attr := h.root.Sys("class", "bdi", "0:52", "read_ahead_kb")
	written := hostfstest.OverwriteAfterWrite(t, attr, "128\n") // udev's, before the read-back
	ctx := context.Background()
	if n := a.Reconcile(ctx, TriggerMountinfo, time.Now()); n != 1 {
		t.Errorf("Reconcile wrote %d new superblocks, want 1 (its settle re-checks follow)", n)
	}
	if w := written(); w != "15360\n" {
		t.Errorf("the agent wrote %q, want 15360", w)
	}
	if err := os.Remove(attr); err != nil {
		t.Fatal(err)
	}
	h.setRA("0:52", 128)
	a.Reconcile(ctx, TriggerSettle, time.Now())
	if got := h.ra("0:52"); got != 15360 {
		t.Errorf("read_ahead_kb after settle = %d, want 15360", got)
	}
	m := a.cfg.Metrics
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{`errors_total{stage="write"}`, testutil.ToFloat64(m.Errors.WithLabelValues("write")), 0},
		{`repairs_total{reason="retry"}`, testutil.ToFloat64(m.Repairs.WithLabelValues("retry")), 0},
		{`repairs_total{reason="drift"}`, testutil.ToFloat64(m.Repairs.WithLabelValues("drift")), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// newMountTableAgent returns an agent whose reconciles read read-ahead themselves, as with
// ReadMountTable.
func newMountTableAgent(t *testing.T, h *fakeHost) *Agent {
	t.Helper()
	a, err := New(Config{
		Root: h.root, PID: 1, Read: h.read, Load: fixedPolicy(15360, policy.ModeEnforce),
		ReconcileRead: func(ctx context.Context) (*inventory.Inventory, error) {
			inv, err := h.read(ctx)
			for i := range inv.Mounts {
				inv.Mounts[i].ReadAheadKB = nil
			}
			return inv, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestSettleRechecksNewSuperblocksOnly: a settle reconcile reads the read-ahead of the
// superblocks it settles, not every mount's; the resync still catches the others.
func TestSettleRechecksNewSuperblocksOnly(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	ctx := context.Background()
	a := newMountTableAgent(t, h)
	h.mount("0:52", true)
	h.setRA("0:52", 15360) // tuned long ago
	if n := a.Reconcile(ctx, TriggerStart, time.Now()); n != 0 {
		t.Fatalf("tuned %d new superblocks, want 0", n)
	}
	h.mount("0:53", true)
	if n := a.Reconcile(ctx, TriggerMountinfo, time.Now()); n != 1 {
		t.Fatalf("tuned %d new superblocks, want 1", n)
	}
	h.setRA("0:52", 128)
	h.setRA("0:53", 128)
	a.Reconcile(ctx, TriggerSettle, time.Now())
	if got := h.ra("0:53"); got != 15360 {
		t.Errorf("settling 0:53: read_ahead_kb after settle = %d, want 15360", got)
	}
	if got := h.ra("0:52"); got != 128 {
		t.Errorf("old 0:52: read_ahead_kb after settle = %d, want 128 (left to the resync)", got)
	}
	a.Reconcile(ctx, TriggerResync, time.Now())
	if got := h.ra("0:52"); got != 15360 {
		t.Errorf("old 0:52: read_ahead_kb after resync = %d, want 15360", got)
	}
	// Unmounted superblocks stop settling.
	h.umount("0:53")
	a.Reconcile(ctx, TriggerMountinfo, time.Now())
	if n := len(a.settling); n != 0 {
		t.Errorf("%d superblocks still settling after unmount, want 0", n)
	}
}

// TestReconcileReadsLeftOutReadAhead runs reconciles on a read that leaves read-ahead out,
// as ReadMountTable does: the reconcile reads it, tunes new superblocks, and still sees a
// known device whose read-ahead changed, including a device number the kernel gave to a
// new superblock right after the old one was unmounted.
func TestReconcileReadsLeftOutReadAhead(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	ctx := context.Background()
	a := newMountTableAgent(t, h)
	h.mount("0:52", true)
	h.mount("0:53", true)
	if n := a.Reconcile(ctx, TriggerMountinfo, time.Now()); n != 2 {
		t.Fatalf("tuned %d new superblocks, want 2", n)
	}
	h.umount("0:52")
	h.mount("0:52", true) // the same anonymous device number, a new superblock at 128 KiB
	h.setRA("0:53", 4096)
	a.Reconcile(ctx, TriggerMountinfo, time.Now())
	for _, dev := range []string{"0:52", "0:53"} {
		if got := h.ra(dev); got != 15360 {
			t.Errorf("%s: read_ahead_kb = %d, want 15360", dev, got)
		}
	}
	if got := testutil.ToFloat64(a.cfg.Metrics.Repairs.WithLabelValues("drift")); got != 2 {
		t.Errorf("drift repairs = %v, want 2", got)
	}
	// A superblock whose bdi is gone while its mountinfo line remains is skipped quietly.
	if err := os.RemoveAll(h.root.Sys("class", "bdi", "0:53")); err != nil {
		t.Fatal(err)
	}
	a.Reconcile(ctx, TriggerMountinfo, time.Now())
	if got := testutil.ToFloat64(a.cfg.Metrics.Errors.WithLabelValues("write")); got != 0 {
		t.Errorf("write errors = %v, want 0", got)
	}
}

func TestNewFirst(t *testing.T) {
	t.Parallel()
	mounts := []inventory.Mount{{Device: "0:50"}, {Device: "0:51"}, {Device: "0:52"}, {Device: "0:53"}}
	known := map[string]int{"0:50": 15360, "0:52": 128}
	got := newFirst(mounts, known)
	if want := []int{1, 3, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("newFirst = %v, want %v", got, want)
	}
	if got := newFirst(mounts, nil); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("newFirst with nothing known = %v, want the table order", got)
	}
}

// TestSettleAfterAnyTrigger: a mount first seen by a resync (here the only way, since a
// fixture file never signals) gets its settle re-checks too; before, only a mount table
// event scheduled them, and udev's late write waited for the next resync.
func TestSettleAfterAnyTrigger(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	a, err := New(Config{
		Root: h.root, PID: 1, Read: h.read, Load: fixedPolicy(15360, policy.ModeEnforce),
		Resync: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !a.Ready() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	h.mount("0:52", true)
	settles := func() float64 {
		return testutil.ToFloat64(a.cfg.Metrics.Reconciles.WithLabelValues(string(TriggerSettle)))
	}
	for settles() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if settles() == 0 {
		t.Fatal("no settle re-check after a resync tuned a new superblock")
	}
	if got := h.ra("0:52"); got != 15360 {
		t.Errorf("read_ahead_kb = %d, want 15360", got)
	}
}

// TestReconcileLogsStages: at debug level each reconcile logs how long its change waited for
// the loop and what its stages took, the agent's own account of a slow reaction.
func TestReconcileLogsStages(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	var logs bytes.Buffer
	a, err := New(Config{Root: h.root, PID: 1, Read: h.read, Load: fixedPolicy(15360, policy.ModeEnforce),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	h.mount("0:52", true)
	a.Reconcile(context.Background(), TriggerMountinfo, time.Now().Add(-time.Second))
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "msg=reconcile ") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("no reconcile line at debug level:\n%s", logs.String())
	}
	for _, want := range []string{"trigger=mountinfo", "waited=1.", "read=", "written=", "verdicts=", "total=", "mounts=1", "new=1", "writes=1"} {
		if !strings.Contains(line, want) {
			t.Errorf("reconcile line lacks %q: %s", want, line)
		}
	}
}

// TestRunReconcilesWhileVerdictsRead: the statistics read that starts a write's verdict
// (afterReconcile) runs beside Run's loop, not on it. While that read of the first
// superblock's write is held, a resync tunes a second superblock; on the loop, the second
// would wait for the read.
func TestRunReconcilesWhileVerdictsRead(t *testing.T) {
	t.Parallel()
	h := newFakeHost(t)
	held := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	var reads, fullReads atomic.Int32
	a, err := New(Config{
		Root: h.root, PID: 1, Resync: 10 * time.Millisecond, Load: fixedPolicy(2048, policy.ModeEnforce),
		ReconcileRead: h.read,
		// The verdicts' read: the first one, after the first write, is held until released.
		StatisticsRead: func(ctx context.Context) (*inventory.Inventory, error) {
			if reads.Add(1) == 1 {
				close(held)
				<-release
			}
			return h.read(ctx)
		},
		// The full read is for scrapes, the adaptive controller and recovery: none here.
		Read: func(ctx context.Context) (*inventory.Inventory, error) {
			fullReads.Add(1)
			return h.read(ctx)
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	defer func() {
		once.Do(func() { close(release) })
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	h.mount("0:52", true)
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no statistics read after the first write")
	}
	h.mount("0:53", true)
	// Resyncs come every 10 ms; 20 s is room for a slow machine, not a time bound: on the
	// loop, the read held, the second superblock is never tuned.
	deadline := time.Now().Add(20 * time.Second)
	for h.ra("0:53") != 2048 {
		if time.Now().After(deadline) {
			t.Fatal("the second superblock was not tuned while the verdicts' read of the first write ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := fullReads.Load(); n != 0 {
		t.Errorf("the verdicts read the full inventory %d times: it reads configuration the verdicts do not use", n)
	}
}

// BenchmarkAdaptStep is one adaptive read-ahead step of the built-in policy (every mount
// adaptive) on hosts of 100 and 1,000 NFS superblocks: the statistics read, the pods'
// classes, and each mount's decision; the agent takes one per interval (5 s by default).
func BenchmarkAdaptStep(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			if err := inventorytest.GenerateTree(dir, n); err != nil {
				b.Fatal(err)
			}
			root := hostfs.Root(dir)
			a, err := New(Config{
				Root: root,
				Read: func(context.Context) (*inventory.Inventory, error) {
					return inventory.Read(root, inventory.ReadOptions{})
				},
				ReconcileRead: NewMountTable(root, 0).Read,
				Load:          func() (*Policy, error) { return LoadPolicy("", "", false) },
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.loadPolicy(); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			now := time.Now()
			a.Reconcile(ctx, TriggerStart, now)
			for b.Loop() {
				now = now.Add(policy.DefaultAdaptiveInterval)
				a.Adapt(ctx, now)
			}
			if got := len(a.adaptiveTargets()); got != n {
				b.Fatalf("%d mounts under the controller, want %d", got, n)
			}
		})
	}
}
