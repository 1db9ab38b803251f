package agent

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/podio"
	"github.com/nfstune/nfstune/internal/policy"
)

// volatile are series whose values change from run to run.
var volatile = []string{"go_", "process_", "promhttp_", "nfstune_scrape_duration_seconds", "nfstune_agent_last_resync_timestamp_seconds"}

// copyTree copies a fixture root so that a test may write bdi attributes in it.
func copyTree(t *testing.T, src string) hostfs.Root {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return hostfs.Root(dst)
}

func builtinPolicy(mode policy.Mode) LoadFunc {
	return func() (*Policy, error) {
		pol := policy.Default()
		pol.Workload = policy.WorkloadSequentialRead // 15360 KiB read-ahead
		pol.Adaptive = nil                           // fixed: the golden output has the verdicts of fixed writes
		return &Policy{Resolve: func(m *inventory.Mount) Desired {
			r := pol.Resolve(m)
			return Desired{ReadAheadKB: r.ReadAheadKB, Mode: mode}
		}}, nil
	}
}

// goldenPolicy names the service behind 10.0.0.5:/export/data: Azure NetApp Files Premium
// at 4,000 GiB, 250 MiB/s in nfstune plan's model; /mnt/scratch has adaptive read-ahead.
const goldenPolicy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults:
  workload: sequential-read
  readAheadAdaptive: false
rules:
  - match: {server: 10.0.0.5, export: /export/data}
    service: {name: anf, tier: premium, capacity: 4000GiB}
  - match: {mountpoint: /mnt/scratch}
    readAheadAdaptive: {}
`

// auditedPolicy is builtinPolicy with what the agent adds at every scrape: the audit's
// findings and the service limits of goldenPolicy, so the golden output has both.
func auditedPolicy(mode policy.Mode) LoadFunc {
	return func() (*Policy, error) {
		p, err := builtinPolicy(mode)()
		if err != nil {
			return nil, err
		}
		pol, err := policy.Parse("policy.yaml", []byte(goldenPolicy))
		if err != nil {
			return nil, err
		}
		p.Limits = func(inv *inventory.Inventory) []metrics.ServiceLimit { return ServiceLimits(inv, pol.Resolve) }
		// /mnt/scratch is adaptive: the start moves its 16384 KiB to the cap.
		resolve := p.Resolve
		p.Resolve = func(m *inventory.Mount) Desired {
			d := resolve(m)
			d.Adaptive = pol.Resolve(m).Adaptive
			return d
		}
		p.AdaptiveInterval = pol.AdaptiveInterval()
		p.Audit = func(inv *inventory.Inventory, opts audit.Options) audit.Report { return audit.RunWith(inv, pol, opts) }
		return p, nil
	}
}

// TestMetricsGolden serves /metrics for the fixture root through inventory.Read and the
// built-in policy, in each metrics tier, and compares it with testdata/metrics.golden (full)
// and testdata/metrics-default.golden (UPDATE_GOLDEN=1 rewrites them); promtool checks the
// whole exposition when it is installed.
func TestMetricsGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		tier   metrics.Tier
		golden string
	}{
		{metrics.TierFull, "testdata/metrics.golden"},
		{metrics.TierDefault, "testdata/metrics-default.golden"},
	} {
		t.Run(string(tt.tier), func(t *testing.T) {
			t.Parallel()
			testMetricsGolden(t, tt.tier, tt.golden)
		})
	}
}

func testMetricsGolden(t *testing.T, tier metrics.Tier, goldenPath string) {
	root := copyTree(t, "testdata/root")
	a, err := New(Config{
		Root: root, PID: 1,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load:   auditedPolicy(policy.ModeEnforce),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// The scrape closes the window after the start's writes: their verdicts (no traffic
		// in the fixture) are in the output.
		VerdictWindow: time.Nanosecond,
		// The per-pod collector's series (--pod-io), as one of the fixture's pods and the
		// node read 0:54, which the pod mounts.
		PodIO: func(time.Time) podio.Snapshot {
			return podio.Snapshot{Loaded: true, Pods: []podio.PodIO{
				{PodUID: "", Device: "0:54", Counters: podio.Counters{WriteBytes: 4096, ServerWriteBytes: 4096}},
				{PodUID: "6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71", Device: "0:54", Counters: podio.Counters{
					ReadBytes: 64 << 20, ServerReadBytes: 320 << 20, FaultReadBytes: 256 << 20, MajorFaults: 1920,
					ReadLatency: podio.Histogram{Buckets: [podio.LatencyBuckets]uint64{100, 300, 80, 20}, SumSeconds: 1.1}}},
			}}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	a.Reconcile(context.Background(), TriggerStart, time.Now())
	h, err := a.Handler(HandlerOptions{Tier: tier, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d", rec.Code)
	}
	full := rec.Body.Bytes()
	got := stable(full)

	golden.Check(t, goldenPath, got)

	// Every NFS superblock got its profile's read-ahead at start.
	for _, dev := range []string{"0:52", "0:53", "0:54"} {
		n, err := hostfs.ReadInt(root.Sys("class", "bdi", dev, "read_ahead_kb"))
		if err != nil {
			t.Fatal(err)
		}
		if n != 16384 && n != 15360 {
			t.Errorf("%s read_ahead_kb = %d, want 15360 (the sequential-read profile; 0:53 already had 16384)", dev, n)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed; exposition not linted")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(full)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// stable drops the volatile series (and their HELP and TYPE lines) from an exposition.
func stable(b []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name := line
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name = rest
		} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name = rest
		}
		skip := false
		for _, v := range volatile {
			if strings.HasPrefix(name, v) {
				skip = true
			}
		}
		if !skip {
			out.WriteString(line + "\n")
		}
	}
	return out.Bytes()
}

// TestMetricsLabStacked serves /metrics for the lab tree with two superblocks stacked on
// one mount point (NFSv3 below, NFSv4.1 with nconnect=2 above): each client group counts
// its own transports and each mount its own age, not the upper mount's twice.
func TestMetricsLabStacked(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "../inventory/testdata/lab-6.1.0-50-amd64-stacked")
	a, err := New(Config{
		Root: root,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{})
		},
		Load:   builtinPolicy(policy.ModeObserve),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	a.Reconcile(context.Background(), TriggerStart, time.Now())
	h, err := a.Handler(HandlerOptions{Tier: metrics.TierFull, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d", rec.Code)
	}
	body := rec.Body.String()
	for _, line := range []string{
		`nfstune_client_group_sends_total{client_group="tcp://127.0.0.1/v3",proto="tcp",server_addr="127.0.0.1",version="3"} 16`,
		`nfstune_client_group_sends_total{client_group="tcp://127.0.0.2/v4.1",proto="tcp",server_addr="127.0.0.2",version="4.1"} 40`,
		`nfstune_client_group_connections{client_group="tcp://127.0.0.1/v3",proto="tcp",server_addr="127.0.0.1",version="3"} 1`,
		`nfstune_client_group_connections{client_group="tcp://127.0.0.2/v4.1",proto="tcp",server_addr="127.0.0.2",version="4.1"} 2`,
		`nfstune_mount_age_seconds{backend="generic",device="0:63",export="/srv/tmp",mountpoint="/mnt/lab/stacked",server="127.0.0.1",version="3"} 33`,
		`nfstune_mount_age_seconds{backend="generic",device="0:65",export="/disk",mountpoint="/mnt/lab/stacked",server="127.0.0.2",version="4.1"} 19`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestMetricsInvalidUTF8 serves /metrics for a host whose mount point and server address
// are not UTF-8 (a Latin-1 directory name, a corrupt mount option): the series are exported
// with the bytes escaped, and the scrape stays healthy, nfstune_scrape_success included.
func TestMetricsInvalidUTF8(t *testing.T) {
	t.Parallel()
	root := copyTree(t, "testdata/root")
	for _, f := range []string{"proc/1/mountinfo", "proc/1/mountstats"} {
		b, err := os.ReadFile(root.Path(f))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(" /mnt/data "), []byte(" /mnt/d\xe9ta "))
		b = bytes.ReplaceAll(b, []byte(",addr=10.0.0.6"), []byte(",addr=10.0.0.6\xff"))
		if err := os.WriteFile(root.Path(f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := New(Config{
		Root: root, PID: 1,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load:   auditedPolicy(policy.ModeObserve),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.loadPolicy(); err != nil {
		t.Fatal(err)
	}
	h, err := a.Handler(HandlerOptions{Tier: metrics.TierDefault, ScrapeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d\n%s", rec.Code, out)
	}
	for _, want := range []string{
		"\nnfstune_scrape_success 1\n",
		`nfstune_mount_compliant{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/d\\xe9ta"`,
		`nfstune_client_group_mounts{client_group="tcp://10.0.0.6\\xff/v3"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
}
