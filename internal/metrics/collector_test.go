package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/procfs"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
	"github.com/nfstune/nfstune/internal/readahead"
)

// twoMounts is one nconnect=4 client group holding two superblocks of the same server; both
// show the same four xprt: lines, as the kernel prints them.
func twoMounts(t *testing.T) Snapshot {
	t.Helper()
	st := loadStats(t, "t1").Mounts[0].Stats
	ra, ra2 := 128, 16384
	inv := &inventory.Inventory{
		Mounts: []inventory.Mount{
			{
				Device: "0:52", MountPoints: []string{"/mnt/data", "/srv/data"}, Server: "files.example", Export: "/export/data",
				FSType: "nfs4", Version: "4.2", ReadAheadKB: &ra, NConnect: 4, Connections: 4, Backend: "generic",
				ClientGroup: "10.0.0.5:2049/4.2/tcp", Stats: st,
			},
			{
				Device: "0:53", MountPoints: []string{"/mnt/scratch"}, Server: "files.example", Export: "/export/scratch",
				FSType: "nfs4", Version: "4.2", ReadAheadKB: &ra2, NConnect: 4, Connections: 4, Backend: "generic",
				ClientGroup: "10.0.0.5:2049/4.2/tcp", Stats: st,
			},
		},
		Groups: []inventory.Group{{
			Key: "10.0.0.5:2049/4.2/tcp", ServerAddr: "10.0.0.5", Version: "4.2", Proto: "tcp",
			Devices: []string{"0:52", "0:53"}, NConnect: 4, Connections: 4,
		}},
	}
	return Snapshot{Inventory: inv, Findings: []Finding{
		{Device: "0:52", Rule: "readahead-low", Severity: "warning"},
	}}
}

func newTestCollector(snap Snapshot, err error, opts Options) *Collector {
	src := func(context.Context) (Snapshot, error) { return snap, err }
	return NewCollector(src, slog.New(slog.NewTextHandler(io.Discard, nil)), opts)
}

func TestCollectorGroupCountersOnce(t *testing.T) {
	t.Parallel()
	c := newTestCollector(twoMounts(t), nil, Options{Tier: TierFull})
	want := `
# HELP nfstune_client_group_sends_total RPC requests sent over all transports of the kernel NFS client.
# TYPE nfstune_client_group_sends_total counter
nfstune_client_group_sends_total{client_group="10.0.0.5:2049/4.2/tcp",proto="tcp",server_addr="10.0.0.5",version="4.2"} 6243
# HELP nfstune_client_group_connections Transports (xprt: lines) of the kernel NFS client.
# TYPE nfstune_client_group_connections gauge
nfstune_client_group_connections{client_group="10.0.0.5:2049/4.2/tcp",proto="tcp",server_addr="10.0.0.5",version="4.2"} 4
# HELP nfstune_client_group_mounts NFS superblocks using the kernel NFS client.
# TYPE nfstune_client_group_mounts gauge
nfstune_client_group_mounts{client_group="10.0.0.5:2049/4.2/tcp",proto="tcp",server_addr="10.0.0.5",version="4.2"} 2
# HELP nfstune_mount_read_ahead_bytes Current read-ahead of the superblock's backing device (/sys/class/bdi/<device>/read_ahead_kb times 1024).
# TYPE nfstune_mount_read_ahead_bytes gauge
nfstune_mount_read_ahead_bytes{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/data",server="files.example",version="4.2"} 131072
nfstune_mount_read_ahead_bytes{backend="generic",device="0:53",export="/export/scratch",mountpoint="/mnt/scratch",server="files.example",version="4.2"} 1.6777216e+07
# HELP nfstune_mount_findings Audit findings for the mount, per rule and severity.
# TYPE nfstune_mount_findings gauge
nfstune_mount_findings{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/data",rule="readahead-low",server="files.example",severity="warning",version="4.2"} 1
# HELP nfstune_mount_compliant 1 when the audit found nothing for the mount, else 0.
# TYPE nfstune_mount_compliant gauge
nfstune_mount_compliant{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/data",server="files.example",version="4.2"} 0
nfstune_mount_compliant{backend="generic",device="0:53",export="/export/scratch",mountpoint="/mnt/scratch",server="files.example",version="4.2"} 1
# HELP nfstune_mount_operation_rtt_seconds_total Cumulative round trip time from sending an RPC to receiving its reply, per NFS operation.
# TYPE nfstune_mount_operation_rtt_seconds_total counter
nfstune_mount_operation_rtt_seconds_total{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/data",operation="GETATTR",server="files.example",version="4.2"} 1.2
nfstune_mount_operation_rtt_seconds_total{backend="generic",device="0:52",export="/export/data",mountpoint="/mnt/data",operation="READ",server="files.example",version="4.2"} 28
`
	// One series per mount per used operation: 11 operations are used in the fixture.
	names := []string{
		"nfstune_client_group_sends_total", "nfstune_client_group_connections", "nfstune_client_group_mounts",
		"nfstune_mount_read_ahead_bytes", "nfstune_mount_findings", "nfstune_mount_compliant",
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "nfstune_client_group_sends_total"); n != 1 {
		t.Errorf("client group sends exported %d times, want once for two mounts", n)
	}
	if n := testutil.CollectAndCount(c, "nfstune_mount_operations_total"); n != 2*11 {
		t.Errorf("operations series = %d, want %d (idle operations left out)", n, 2*11)
	}
	rtt, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "nfstune_mount_operation_rtt_seconds_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(want, "\n") {
		if strings.HasPrefix(line, "nfstune_mount_operation_rtt_seconds_total{") && !bytes.Contains(rtt, []byte(line)) {
			t.Errorf("missing %q in\n%s", line, rtt)
		}
	}
}

func TestCollectorSeriesCap(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	// Enough for the group (7 series) and one mount (139), not both.
	full := testutil.CollectAndCount(newTestCollector(snap, nil, Options{Tier: TierFull}))
	c := newTestCollector(snap, nil, Options{Tier: TierFull, MaxSeries: 150})
	got := testutil.CollectAndCount(c, "nfstune_mount_info")
	if got != 1 {
		t.Errorf("mounts exported under the cap = %d, want 1", got)
	}
	want := `
# HELP nfstune_scrape_mounts_dropped Mounts left out of the last scrape by the series cap.
# TYPE nfstune_scrape_mounts_dropped gauge
nfstune_scrape_mounts_dropped 1
# HELP nfstune_scrape_series_cap_hits_total Scrapes in which the series cap left mounts out.
# TYPE nfstune_scrape_series_cap_hits_total counter
nfstune_scrape_series_cap_hits_total 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_scrape_mounts_dropped", "nfstune_scrape_series_cap_hits_total"); err != nil {
		t.Error(err)
	}
	if capped := testutil.CollectAndCount(c); capped >= full || capped > 150+6 {
		t.Errorf("capped scrape has %d series, uncapped %d; want at most the cap plus 6 scrape series", capped, full)
	}
}

func TestCollectorSourceError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{name: "failure", err: errors.New("reading mountinfo: permission denied"), want: "0"},
		{name: "no data", err: ErrNoData, want: "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCollector(Snapshot{}, tt.err, Options{Tier: TierFull})
			want := "# HELP nfstune_scrape_success 1 when the last scrape read the NFS state, else 0.\n# TYPE nfstune_scrape_success gauge\nnfstune_scrape_success " + tt.want + "\n"
			if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_scrape_success"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestPromtoolCheck runs promtool's linter over the whole exposition. promtool ships with
// Debian's prometheus package; .ci/run installs it.
func TestPromtoolCheck(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not installed")
		}
		t.Skip("promtool not installed")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newTestCollector(twoMounts(t), nil, Options{Tier: TierFull}))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	out, err := exposition(t, newTestCollector(podIOSnapshot(t), nil, Options{Tier: TierFull}))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, b)
	}
}

// TestCollectInExpositionOrder checks that every mount family is collected in the order
// the registry sorts it into (label values compared in label name order), which keeps
// that sort a single pass on hosts with many mounts. The info family is the exception:
// its client_group label sorts before device.
func TestCollectInExpositionOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := inventorytest.GenerateTree(dir, 60); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var findings []Finding
	for i := range inv.Mounts {
		if i%3 == 0 {
			inv.Mounts[i].Backend = "azure-files"
		}
		findings = append(findings,
			Finding{Device: inv.Mounts[i].Device, Rule: "NFS010", Severity: "warning"},
			Finding{Device: inv.Mounts[i].Device, Rule: "NFS002", Severity: "info"})
	}
	c := newTestCollector(Snapshot{Inventory: inv, Findings: findings}, nil, Options{Tier: TierFull})
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	families := map[*prometheus.Desc][][]string{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var values []string
		for _, l := range d.GetLabel() {
			values = append(values, l.GetValue())
		}
		families[m.Desc()] = append(families[m.Desc()], values)
	}
	if n := len(families[c.ops]); n < 60*10 {
		t.Fatalf("collected %d operation series, want at least 600", n)
	}
	for desc, series := range families {
		if desc == c.info {
			continue
		}
		for i := 1; i < len(series); i++ {
			if slices.Compare(series[i-1], series[i]) > 0 {
				t.Errorf("%v: series %d %v collected before %v", desc, i, series[i-1], series[i])
				break
			}
		}
	}
}

// TestCollectorLabStacked reads the lab tree with two superblocks stacked on one mount
// point (NFSv3 below, NFSv4.1 with nconnect=2 above): each client group exports its own
// transports and each mount its own bytes, instead of the upper mount's twice.
func TestCollectorLabStacked(t *testing.T) {
	t.Parallel()
	inv, err := inventory.Read(hostfs.Root("../inventory/testdata/lab-6.1.0-50-amd64-stacked"), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCollector(Snapshot{Inventory: inv}, nil, Options{Tier: TierFull})
	want := `
# HELP nfstune_client_group_sends_total RPC requests sent over all transports of the kernel NFS client.
# TYPE nfstune_client_group_sends_total counter
nfstune_client_group_sends_total{client_group="tcp://127.0.0.1/v3",proto="tcp",server_addr="127.0.0.1",version="3"} 16
nfstune_client_group_sends_total{client_group="tcp://127.0.0.2/v4.1",proto="tcp",server_addr="127.0.0.2",version="4.1"} 40
# HELP nfstune_client_group_connections Transports (xprt: lines) of the kernel NFS client.
# TYPE nfstune_client_group_connections gauge
nfstune_client_group_connections{client_group="tcp://127.0.0.1/v3",proto="tcp",server_addr="127.0.0.1",version="3"} 1
nfstune_client_group_connections{client_group="tcp://127.0.0.2/v4.1",proto="tcp",server_addr="127.0.0.2",version="4.1"} 2
# HELP nfstune_mount_age_seconds Time since the superblock was mounted (mountstats age:).
# TYPE nfstune_mount_age_seconds gauge
nfstune_mount_age_seconds{backend="generic",device="0:63",export="/srv/tmp",mountpoint="/mnt/lab/stacked",server="127.0.0.1",version="3"} 33
nfstune_mount_age_seconds{backend="generic",device="0:65",export="/disk",mountpoint="/mnt/lab/stacked",server="127.0.0.2",version="4.1"} 19
`
	names := []string{"nfstune_client_group_sends_total", "nfstune_client_group_connections", "nfstune_mount_age_seconds"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	out, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "nfstune_mount_write_bytes_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`nfstune_mount_write_bytes_total{backend="generic",device="0:63",export="/srv/tmp",mountpoint="/mnt/lab/stacked",server="127.0.0.1",source="server",version="3"} 1.048576e+06`,
		`nfstune_mount_write_bytes_total{backend="generic",device="0:65",export="/disk",mountpoint="/mnt/lab/stacked",server="127.0.0.2",source="server",version="4.1"} 3.145728e+06`,
	} {
		if !bytes.Contains(out, []byte(line)) {
			t.Errorf("missing %q in\n%s", line, out)
		}
	}
}

// TestCollectorServiceLimits checks that a limit reached by several mounts is one series,
// and that the series cap, which bounds per-mount series, leaves limits alone.
func TestCollectorServiceLimits(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	read := ServiceLimit{Server: "files.example", Export: "/export/data", Service: "azure-netapp-files", Tier: "premium", Access: "read", BytesPerSecond: 250 << 20}
	write := read
	write.Access = "write"
	snap.Limits = []ServiceLimit{read, write, read}
	want := `# HELP nfstune_service_limit_bytes_per_second Throughput limit of the provisioned service behind server:export (the policy's service, tier and capacity in nfstune plan's model), per access direction.
# TYPE nfstune_service_limit_bytes_per_second gauge
nfstune_service_limit_bytes_per_second{access="read",export="/export/data",server="files.example",service="azure-netapp-files",tier="premium"} 2.62144e+08
nfstune_service_limit_bytes_per_second{access="write",export="/export/data",server="files.example",service="azure-netapp-files",tier="premium"} 2.62144e+08
`
	for _, maxSeries := range []int{0, 1} {
		c := newTestCollector(snap, nil, Options{MaxSeries: maxSeries})
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_service_limit_bytes_per_second"); err != nil {
			t.Errorf("max series %d: %v", maxSeries, err)
		}
	}
	c := newTestCollector(twoMounts(t), nil, Options{Tier: TierFull})
	if n := testutil.CollectAndCount(c, "nfstune_service_limit_bytes_per_second"); n != 0 {
		t.Errorf("%d limit series without limits, want 0", n)
	}
}

// TestDefaultTier compares the two tiers on a synthetic host whose mounts use about 46
// operations each: the default tier exports at most 40 series per mount under names the
// full tier also uses, and every operation counter it keeps sums, over the operation
// label, to the full tier's sum for the same mount.
func TestDefaultTier(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := inventorytest.GenerateTree(dir, 4); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Read(hostfs.Root(dir), inventory.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap := Snapshot{Inventory: inv, Findings: []Finding{{Device: inv.Mounts[0].Device, Rule: "readahead-low", Severity: "warning"}}}
	gather := func(tier Tier) map[string]*dto.MetricFamily {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newTestCollector(snap, nil, Options{Tier: tier}))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[string]*dto.MetricFamily)
		for _, mf := range mfs {
			out[mf.GetName()] = mf
		}
		return out
	}
	full, def := gather(TierFull), gather(TierDefault)

	perMount := make(map[string]int)
	for name, mf := range def {
		if full[name] == nil {
			t.Errorf("default tier exports %s, which the full tier does not", name)
		}
		for _, m := range mf.GetMetric() {
			if dev := label(m, "device"); dev != "" {
				perMount[dev]++
			}
		}
	}
	if len(perMount) != len(inv.Mounts) {
		t.Fatalf("default tier has series for %d mounts, want %d", len(perMount), len(inv.Mounts))
	}
	for dev, n := range perMount {
		if n > 40 {
			t.Errorf("default tier exports %d series for %s, want at most 40", n, dev)
		}
	}
	var fullPerMount int
	for _, mf := range full {
		for _, m := range mf.GetMetric() {
			if label(m, "device") == inv.Mounts[1].Device {
				fullPerMount++
			}
		}
	}
	if fullPerMount <= 4*40 {
		t.Fatalf("full tier exports only %d series for one mount; the fixture should use many operations", fullPerMount)
	}

	sums := func(mf *dto.MetricFamily) map[string]float64 {
		out := make(map[string]float64)
		for _, m := range mf.GetMetric() {
			out[label(m, "device")] += m.GetCounter().GetValue()
		}
		return out
	}
	for _, name := range []string{
		"nfstune_mount_operations_total", "nfstune_mount_operation_errors_total",
		"nfstune_mount_operation_rtt_seconds_total", "nfstune_mount_operation_execute_seconds_total",
		"nfstune_mount_operation_retransmissions_total", "nfstune_mount_operation_major_timeouts_total",
	} {
		if def[name] == nil {
			t.Errorf("default tier lacks %s", name)
			continue
		}
		want, got := sums(full[name]), sums(def[name])
		for dev, w := range want {
			if d := got[dev] - w; d > 1e-6*w || d < -1e-6*w {
				t.Errorf("%s summed over operations for %s = %v in the default tier, %v in the full tier", name, dev, got[dev], w)
			}
		}
	}
	ops := make(map[string]bool)
	for _, m := range def["nfstune_mount_operations_total"].GetMetric() {
		ops[label(m, "operation")] = true
	}
	for _, op := range append(slices.Clip(DefaultOperations), OtherOperations) {
		if !ops[op] {
			t.Errorf("default tier has no operations_total for operation %q", op)
		}
	}
	if len(ops) != len(DefaultOperations)+1 {
		t.Errorf("default tier operations = %v, want %v and %q", ops, DefaultOperations, OtherOperations)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestParseTier(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"default", "full"} {
		if tier, err := ParseTier(s); err != nil || string(tier) != s {
			t.Errorf("ParseTier(%q) = %q, %v", s, tier, err)
		}
	}
	if _, err := ParseTier("all"); err == nil {
		t.Error("ParseTier(all) succeeded")
	}
}

// TestCollectorStuckTransports: one series pair per server address, however many
// transports (nconnect) lead there, the stuck ones counted; and the processes using a
// stalled server's superblocks, only for those superblocks, in both tiers.
func TestCollectorStuckTransports(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	inv := snap.Inventory
	for i := range 4 {
		inv.Transports = append(inv.Transports, inventory.Transport{Name: fmt.Sprintf("switch-3/xprt-%d-tcp", i), DstAddr: "10.0.0.5"})
	}
	inv.Transports = append(inv.Transports, inventory.Transport{Name: "switch-4/xprt-9-tcp", DstAddr: "10.0.0.6"})
	inv.Stalled = []inventory.StalledServer{{Addr: "10.0.0.5", Transports: []string{"switch-3/xprt-2-tcp"}}}
	inv.Blocked = []inventory.BlockedMount{{Device: "0:53", ServerAddr: "10.0.0.5", Holders: []inventory.Holder{{PID: 1}, {PID: 2}}, Uninspected: 3}}
	want := `
# HELP nfstune_server_stuck_transports Transports to the server address that held requests with no reply and no progress since the previous scrape (at least 1 s apart): one of nconnect's connections stuck, or all of them when the server is gone.
# TYPE nfstune_server_stuck_transports gauge
nfstune_server_stuck_transports{server_addr="10.0.0.5"} 1
nfstune_server_stuck_transports{server_addr="10.0.0.6"} 0
# HELP nfstune_server_transports RPC transports to the server address (/sys/kernel/sunrpc/xprt-switches, Linux 5.14 and later; absent before).
# TYPE nfstune_server_transports gauge
nfstune_server_transports{server_addr="10.0.0.5"} 4
nfstune_server_transports{server_addr="10.0.0.6"} 1
# HELP nfstune_mount_blocked_processes Processes with an open file, working directory or root on the superblock, while its server is not answering (nfstune_server_stuck_transports > 0); exported only then. They block (hard mount) or get errors (soft).
# TYPE nfstune_mount_blocked_processes gauge
nfstune_mount_blocked_processes{backend="generic",device="0:53",export="/export/scratch",mountpoint="/mnt/scratch",server="files.example",version="4.2"} 2
# HELP nfstune_blocked_uninspected_processes Processes that could not be inspected (permission denied: reading other processes' fdinfo takes CAP_SYS_PTRACE) or were over the scan limit when the processes using a stalled server's superblocks were last looked for: nfstune_mount_blocked_processes may miss that many. Exported only while a server is stalled.
# TYPE nfstune_blocked_uninspected_processes gauge
nfstune_blocked_uninspected_processes 3
`
	for _, tier := range []Tier{TierDefault, TierFull} {
		c := newTestCollector(snap, nil, Options{Tier: tier})
		if err := testutil.CollectAndCompare(c, strings.NewReader(want),
			"nfstune_server_stuck_transports", "nfstune_server_transports", "nfstune_mount_blocked_processes", "nfstune_blocked_uninspected_processes"); err != nil {
			t.Errorf("tier %s: %v", tier, err)
		}
	}
	// A kernel without sunrpc sysfs shows no transports: no server series, rather than 0.
	inv.Transports, inv.Stalled, inv.Blocked = nil, nil, nil
	c := newTestCollector(snap, nil, Options{})
	if n := testutil.CollectAndCount(c, "nfstune_server_stuck_transports", "nfstune_server_transports", "nfstune_mount_blocked_processes", "nfstune_blocked_uninspected_processes"); n != 0 {
		t.Errorf("without transports: %d server or blocked series, want none", n)
	}
}

// TestCollectorStuckTransportsSharedAddress: file systems behind local proxies share
// 127.0.0.1 and are stalled per port; the address's series counts the stuck transports of
// every port.
func TestCollectorStuckTransportsSharedAddress(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	inv := snap.Inventory
	for i, port := range []int{20049, 20050, 20051} {
		inv.Transports = append(inv.Transports, inventory.Transport{Name: fmt.Sprintf("switch-%d/xprt-%d-tcp", i, i), DstAddr: "127.0.0.1", DstPort: port})
	}
	inv.Stalled = []inventory.StalledServer{
		{Addr: "127.0.0.1", Port: 20049, Transports: []string{"switch-0/xprt-0-tcp"}},
		{Addr: "127.0.0.1", Port: 20050, Transports: []string{"switch-1/xprt-1-tcp"}},
	}
	want := `
# HELP nfstune_server_stuck_transports Transports to the server address that held requests with no reply and no progress since the previous scrape (at least 1 s apart): one of nconnect's connections stuck, or all of them when the server is gone.
# TYPE nfstune_server_stuck_transports gauge
nfstune_server_stuck_transports{server_addr="127.0.0.1"} 2
# HELP nfstune_server_transports RPC transports to the server address (/sys/kernel/sunrpc/xprt-switches, Linux 5.14 and later; absent before).
# TYPE nfstune_server_transports gauge
nfstune_server_transports{server_addr="127.0.0.1"} 3
`
	c := newTestCollector(snap, nil, Options{})
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_server_stuck_transports", "nfstune_server_transports"); err != nil {
		t.Error(err)
	}
}

// Host text that is not UTF-8 (a Latin-1 mount point, a proxy helper's state line, a
// transport's address) is exported with the bad bytes escaped as \xNN, and never fails the
// scrape: a metric constructor panicking on it would take the scrape's health series with it.
func TestCollectorInvalidUTF8Labels(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	inv := snap.Inventory
	m := &inv.Mounts[0]
	m.MountPoints = []string{"/mnt/caf\xe9"}
	m.Server, m.Export = "files\xff.example", "/export/\xfe"
	m.Proxy = &inventory.Proxy{Kind: "efs-utils", Upstream: "fs-1.efs\xc3"}
	st := *m.Stats
	st.Operations = append(slices.Clone(st.Operations), procfs.NFSOperationStats{Operation: "OP\xff", Requests: 1})
	m.Stats = &st
	g := &inv.Groups[0]
	g.Key, g.ServerAddr = "10.0.0.5\xff:2049/4.2/tcp", "10.0.0.5\xff"
	m.ClientGroup, inv.Mounts[1].ClientGroup = g.Key, g.Key
	inv.Transports = []inventory.Transport{{Name: "switch-3/xprt-0-tcp", DstAddr: "10.0.0.5\xff"}}
	snap.Limits = []ServiceLimit{{Server: "files\xff.example", Export: "/export/\xfe", Service: "s", Tier: "t", Access: "read", BytesPerSecond: 1}}
	for _, tier := range []Tier{TierDefault, TierFull} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(newTestCollector(snap, nil, Options{Tier: tier}))
		families, err := reg.Gather()
		if err != nil {
			t.Fatalf("tier %s: gather: %v", tier, err)
		}
		var exposition bytes.Buffer
		for _, f := range families {
			if _, err := expfmt.MetricFamilyToText(&exposition, f); err != nil {
				t.Fatal(err)
			}
		}
		out := exposition.String()
		for _, want := range []string{
			`nfstune_scrape_success 1`,
			`mountpoint="/mnt/caf\\xe9"`, `server="files\\xff.example"`, `export="/export/\\xfe"`,
			`upstream="fs-1.efs\\xc3"`, `client_group="10.0.0.5\\xff:2049/4.2/tcp"`, `server_addr="10.0.0.5\\xff"`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("tier %s: no %s in\n%s", tier, want, out)
			}
		}
	}
}

// The scrape's health series come before any series built from host data, so that a
// failure while building those cannot take nfstune_scrape_success with it.
func TestCollectorHealthFirst(t *testing.T) {
	t.Parallel()
	ch := make(chan prometheus.Metric, 1024)
	newTestCollector(twoMounts(t), nil, Options{}).Collect(ch)
	close(ch)
	var names []string
	for m := range ch {
		names = append(names, m.Desc().String())
		if len(names) == 2 {
			break
		}
	}
	for i, want := range []string{`"nfstune_scrape_success"`, `"nfstune_scrape_duration_seconds"`} {
		if i >= len(names) || !strings.Contains(names[i], want) {
			t.Errorf("series %d: %v, want %s", i, names, want)
		}
	}
}

// TestCollectorEvents: the full tier exports each of the 27 events: counters of a mount
// under the event label (t1's line: 1200 inode revalidations, 12 dentry revalidations, 4
// opens, 1250 read-ahead calls, ...); the default tier none.
func TestCollectorEvents(t *testing.T) {
	t.Parallel()
	full := newTestCollector(twoMounts(t), nil, Options{Tier: TierFull})
	if n := testutil.CollectAndCount(full, "nfstune_mount_events_total"); n != 2*27 {
		t.Errorf("event series = %d, want 27 per mount (%d)", n, 2*27)
	}
	out, err := testutil.CollectAndFormat(full, expfmt.TypeTextPlain, "nfstune_mount_events_total")
	if err != nil {
		t.Fatal(err)
	}
	const labels = `backend="generic",device="0:52",event="%s",export="/export/data",mountpoint="/mnt/data",server="files.example",version="4.2"`
	for event, want := range map[string]string{"inode_revalidate": "1200", "dnode_revalidate": "12", "attribute_invalidate": "2",
		"vfs_open": "4", "vfs_lookup": "6", "vfs_access": "30", "vfs_read_pages": "1250", "vfs_getdents": "1", "pnfs_write": "0"} {
		line := "nfstune_mount_events_total{" + fmt.Sprintf(labels, event) + "} " + want
		if !bytes.Contains(out, []byte(line)) {
			t.Errorf("missing %q in\n%s", line, out)
		}
	}
	if n := testutil.CollectAndCount(newTestCollector(twoMounts(t), nil, Options{Tier: TierDefault}), "nfstune_mount_events_total"); n != 0 {
		t.Errorf("default tier exports %d event series, want none", n)
	}
}

// TestCollectorBlockedMounts: two mount.nfs stuck on 10.0.0.9, which has no superblock, and
// one on a server named by DNS; unmount programs are not counted.
func TestCollectorBlockedMounts(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	inv := snap.Inventory
	inv.Stalled = []inventory.StalledServer{{Addr: "10.0.0.9", Transports: []string{"switch-7/xprt-7-tcp"}}}
	inv.Mounting = []inventory.MountProgram{
		{PID: 10, Comm: "mount.nfs4", State: "D", Program: inventory.ProgramMount, Server: "10.0.0.9", Export: "/a"},
		{PID: 11, Comm: "mount.nfs4", State: "D", Program: inventory.ProgramMount, Server: "10.0.0.9", Export: "/b"},
		{PID: 12, Comm: "mount.nfs", State: "S", Program: inventory.ProgramMount, Server: "nfs.example.com", Export: "/c"},
		{PID: 13, Comm: "umount", State: "D", Program: inventory.ProgramUnmount, Target: "/mnt/scratch"},
	}
	want := `
# HELP nfstune_server_blocked_mounts NFS mounts in progress (mount.nfs, mount.nfs4) stuck on the server, as their command line names it: in state D, or running for more than 10 s. Such a mount has no superblock yet, and later mounts of the server from the node queue behind it. Exported only while a server is stalled, for at most 64 servers.
# TYPE nfstune_server_blocked_mounts gauge
nfstune_server_blocked_mounts{server_addr="10.0.0.9"} 2
nfstune_server_blocked_mounts{server_addr="nfs.example.com"} 1
`
	c := newTestCollector(snap, nil, Options{})
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nfstune_server_blocked_mounts"); err != nil {
		t.Error(err)
	}
	inv.Mounting = nil
	if n := testutil.CollectAndCount(newTestCollector(snap, nil, Options{}), "nfstune_server_blocked_mounts"); n != 0 {
		t.Errorf("no mount in progress: %d series, want none", n)
	}
}

// TestCollectorTrafficClasses: a mount with a class exports one class series, and one per
// pod; a mount without one exports none.
func TestCollectorTrafficClasses(t *testing.T) {
	t.Parallel()
	snap := twoMounts(t)
	snap.TrafficClasses = map[string]readahead.Classification{"0:52": {Class: readahead.Mixed, Pods: []readahead.PodClass{
		{UID: "pod-a", Class: readahead.Thrashing}, {UID: "pod-b", Class: readahead.StreamingRead},
	}}}
	c := newTestCollector(snap, nil, Options{Tier: TierDefault})
	want := `
# HELP nfstune_mount_readahead_traffic_class The class of the mount's read traffic over the agent's last interval (value 1): streaming_read, random_read, mapped_random, thrashing, mixed (its pods differ) or unknown (docs/agent.md, Read traffic classes).
# TYPE nfstune_mount_readahead_traffic_class gauge
nfstune_mount_readahead_traffic_class{backend="generic",class="mixed",device="0:52",export="/export/data",mountpoint="/mnt/data",server="files.example",version="4.2"} 1
# HELP nfstune_mount_pod_readahead_traffic_class The class of a pod's read traffic on the mount over the agent's last interval (value 1), from the mount's statistics, the pod's cgroup counters and, with the per-pod collector, the pod's own READs, read(2) bytes and faults (docs/agent.md, Read traffic classes).
# TYPE nfstune_mount_pod_readahead_traffic_class gauge
nfstune_mount_pod_readahead_traffic_class{backend="generic",class="streaming_read",device="0:52",export="/export/data",mountpoint="/mnt/data",pod_uid="pod-b",server="files.example",version="4.2"} 1
nfstune_mount_pod_readahead_traffic_class{backend="generic",class="thrashing",device="0:52",export="/export/data",mountpoint="/mnt/data",pod_uid="pod-a",server="files.example",version="4.2"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"nfstune_mount_readahead_traffic_class", "nfstune_mount_pod_readahead_traffic_class"); err != nil {
		t.Error(err)
	}
}
