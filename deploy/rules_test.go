package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// goldenMetrics are the agent's /metrics outputs for a fixture tree, in the default tier
// (what the chart deploys) and the full one (internal/agent's TestMetricsGolden keeps
// them current). The rules must work with either.
var goldenMetrics = []string{
	"../internal/agent/testdata/metrics-default.golden",
	"../internal/agent/testdata/metrics.golden",
}

// ruleFile is the shape of a Prometheus rule file, as far as these tests read it.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert"`
			Record string `json:"record"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// exposed reads an exposition and returns each metric name with the label names its series
// carry.
func exposed(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if i := strings.IndexByte(name, ' '); i >= 0 {
			name = name[:i]
		}
		labels := out[name]
		if rest != "" {
			for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
				if !slices.Contains(labels, m[1]) {
					labels = append(labels, m[1])
				}
			}
		}
		out[name] = labels
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	// selectorRE finds nfstune metric names in PromQL, with the matchers that follow.
	selectorRE = regexp.MustCompile(`\bnfstune_[a-z0-9_]+(\{[^}]*\})?`)
	// recordedRE finds the recording rules' names (level:metric:operations).
	recordedRE = regexp.MustCompile(`\bnfstune:[a-zA-Z0-9_:]+`)
	labelRE    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// unknownNames returns what expr uses that neither the exposition nor the recording rules
// define: metric names, and label names matched on a metric that has no such label.
func unknownNames(expr string, metrics map[string][]string, recorded []string) []string {
	var bad []string
	for _, m := range selectorRE.FindAllString(expr, -1) {
		name, matchers, _ := strings.Cut(m, "{")
		labels, ok := metrics[name]
		if !ok {
			bad = append(bad, name)
			continue
		}
		for _, l := range labelRE.FindAllStringSubmatch(matchers, -1) {
			if !slices.Contains(labels, l[1]) {
				bad = append(bad, name+"{"+l[1]+"}")
			}
		}
	}
	for _, r := range recordedRE.FindAllString(expr, -1) {
		if !slices.Contains(recorded, r) {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestRulesUseExposedMetrics checks that every nfstune metric and label the rules use is in
// the agent's golden /metrics output, so the rules cannot outlive a renamed metric
// (TestDashboardUsesExposedMetrics does the same for the dashboard).
func TestRulesUseExposedMetrics(t *testing.T) {
	for _, golden := range goldenMetrics {
		t.Run(filepath.Base(golden), func(t *testing.T) { testRulesUseExposedMetrics(t, golden) })
	}
}

func testRulesUseExposedMetrics(t *testing.T, golden string) {
	metrics := exposed(t, golden)
	var rf ruleFile
	if err := yaml.Unmarshal(PrometheusRules, &rf); err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded = append(recorded, r.Record)
			}
		}
	}
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s/%s: no expr", g.Name, name)
			}
			n += len(selectorRE.FindAllString(r.Expr, -1))
			if bad := unknownNames(r.Expr, metrics, recorded); len(bad) > 0 {
				t.Errorf("%s/%s uses %v, not in %s", g.Name, name, bad, golden)
			}
		}
	}
	if n == 0 {
		t.Fatal("no nfstune metric found in the rules")
	}
}

// TestUnknownNames checks that the check catches a renamed metric, a missing label and an
// unknown recording rule.
func TestUnknownNames(t *testing.T) {
	metrics := map[string][]string{"nfstune_mount_findings": {"rule", "severity"}}
	for expr, want := range map[string][]string{
		`nfstune_mount_findings{rule="NFS001"} > 0`:                       nil,
		`nfstune_mount_finding{rule="NFS001"} > 0`:                        {"nfstune_mount_finding"},
		`nfstune_mount_findings{rule="NFS001", server=~"x.*"}`:            {"nfstune_mount_findings{server}"},
		`nfstune:ok:avg > 0 or nfstune:gone:avg > 1`:                      {"nfstune:gone:avg"},
		`rate(nfstune_mount_findings[5m]) / up{job="nfstune"}`:            nil,
		`sum without (operation) (nfstune_agent_drifts_total{rule!="x"})`: {"nfstune_agent_drifts_total"},
	} {
		if got := unknownNames(expr, metrics, []string{"nfstune:ok:avg"}); !slices.Equal(got, want) {
			t.Errorf("unknownNames(%s) = %q, want %q", expr, got, want)
		}
	}
}
