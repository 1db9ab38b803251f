package scrape

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/node_exporter/collector"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/inventory/inventorytest"
	"github.com/nfstune/nfstune/internal/metrics"
	"github.com/nfstune/nfstune/internal/policy"
)

// nodeCollector adapts node_exporter's Update contract to prometheus.Collector, as its
// own NodeCollector does.
type nodeCollector struct{ c collector.Collector }

func (n nodeCollector) Describe(chan<- *prometheus.Desc) {}
func (n nodeCollector) Collect(ch chan<- prometheus.Metric) {
	if err := n.c.Update(ch); err != nil {
		panic(err)
	}
}

// scrape gathers reg and encodes the text exposition, as a /metrics request does, and
// returns the number of series.
func scrape(tb testing.TB, reg *prometheus.Registry) int {
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
		if err := enc.Encode(mf); err != nil {
			tb.Fatal(err)
		}
	}
	return n
}

// nfstuneRegistry is the agent's collector on root: maxSeries is its series cap (the
// agent's --max-series), 0 for none.
func nfstuneRegistry(root hostfs.Root, tier metrics.Tier, maxSeries int) *prometheus.Registry {
	pol := policy.Default()
	src := func(context.Context) (metrics.Snapshot, error) {
		inv, err := inventory.Read(root, inventory.ReadOptions{})
		if err != nil {
			return metrics.Snapshot{}, err
		}
		rep := audit.Run(inv, pol)
		s := metrics.Snapshot{Inventory: inv}
		for _, f := range rep.Findings {
			s.Findings = append(s.Findings, metrics.Finding{Device: f.Device, Rule: f.ID, Severity: f.Severity})
		}
		return s, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(src, slog.New(slog.DiscardHandler), metrics.Options{Tier: tier, MaxSeries: maxSeries}))
	return reg
}

func nodeExporterRegistry(tb testing.TB, root hostfs.Root) *prometheus.Registry {
	// node_exporter keeps its paths in global kingpin flags; this sets them once per run.
	if _, err := kingpin.CommandLine.Parse([]string{"--path.procfs=" + root.Proc()}); err != nil {
		tb.Fatal(err)
	}
	c, err := collector.NewMountStatsCollector(slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(nodeCollector{c})
	return reg
}

// agentMaxSeries is the agent's default series cap (nfstune agent --max-series).
const agentMaxSeries = 100000

// scrapeCase is one collector of a scrape comparison.
type scrapeCase struct {
	name string
	reg  *prometheus.Registry
}

// benchScrape scrapes a synthetic host with n NFS mounts (three quarters NFSv4.1 with
// nconnect=4, the rest NFSv3; inventorytest.GenerateTree) with each collector cases
// returns, one after another in one run, so that their ratio is of the same machine
// state. nfstune's scrape includes everything the agent does per scrape: mountinfo,
// mountstats, nfsfs, every bdi read_ahead_kb, the audit, and encoding.
func benchScrape(b *testing.B, n int, cases func(hostfs.Root) []scrapeCase) {
	dir := b.TempDir()
	if err := inventorytest.GenerateTree(dir, n); err != nil {
		b.Fatal(err)
	}
	for _, bc := range cases(hostfs.Root(dir)) {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var series int
			for b.Loop() {
				series = scrape(b, bc.reg)
			}
			b.ReportMetric(float64(series), "series")
		})
	}
}

// BenchmarkScrape1000 compares node_exporter's collector and both of nfstune's metrics
// tiers on a host with 1,000 NFS mounts.
func BenchmarkScrape1000(b *testing.B) {
	benchScrape(b, 1000, func(root hostfs.Root) []scrapeCase {
		return []scrapeCase{
			{"nfstune_full", nfstuneRegistry(root, metrics.TierFull, 0)},
			{"nfstune_default", nfstuneRegistry(root, metrics.TierDefault, 0)},
			{"node_exporter", nodeExporterRegistry(b, root)},
		}
	})
}

// BenchmarkScrape10000 compares node_exporter's collector and nfstune's default tier on a
// host with 10,000 NFS mounts: uncapped, and under the agent's default series cap, which
// leaves out the mounts beyond it (nfstune_scrape_mounts_dropped).
func BenchmarkScrape10000(b *testing.B) {
	benchScrape(b, 10000, func(root hostfs.Root) []scrapeCase {
		return []scrapeCase{
			{"nfstune_default", nfstuneRegistry(root, metrics.TierDefault, 0)},
			{"nfstune_default_capped", nfstuneRegistry(root, metrics.TierDefault, agentMaxSeries)},
			{"node_exporter", nodeExporterRegistry(b, root)},
		}
	})
}

// TestBothScrapeSameHost checks that both collectors see every mount of the fixture, so
// that the benchmark compares like with like.
func TestBothScrapeSameHost(t *testing.T) {
	dir := t.TempDir()
	if err := inventorytest.GenerateTree(dir, 1000); err != nil {
		t.Fatal(err)
	}
	root := hostfs.Root(dir)
	for _, tier := range []metrics.Tier{metrics.TierFull, metrics.TierDefault} {
		mfs, err := nfstuneRegistry(root, tier, 0).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "nfstune_mount_info" && len(mf.GetMetric()) != 1000 {
				t.Errorf("nfstune (%s tier) exports %d mounts, want 1000", tier, len(mf.GetMetric()))
			}
		}
	}
	mfs, err := nodeExporterRegistry(t, root).Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "node_mountstats_nfs_age_seconds_total" {
			found = true
			// node_exporter keys by export, protocol and mount address.
			if len(mf.GetMetric()) == 0 {
				t.Error("node_exporter exports no mounts")
			}
			t.Logf("node_exporter exports %d (export, protocol, addr) entries", len(mf.GetMetric()))
		}
	}
	if !found {
		t.Error("node_exporter did not export mountstats")
	}
}
