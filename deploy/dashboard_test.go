package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// dashboard is the shape of a Grafana dashboard's JSON model, as far as these tests read it.
type dashboard struct {
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// fullTier marks the panels that need the agent's full metrics tier, in their title.
const fullTier = "(full tier)"

// targetLabels are the labels Prometheus adds to every series it scrapes: the dashboard
// selects nodes by instance.
var targetLabels = []string{"instance", "job"}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(GrafanaDashboard, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	return d
}

// variableQuery returns a query variable's PromQL: Grafana stores it as a string or as an
// object with a query field.
func variableQuery(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var q struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(raw, &q)
	return q.Query
}

// TestDashboardUsesExposedMetrics checks that every nfstune metric and label the
// dashboard's panels and variables query is in the agent's golden /metrics output, like the
// rules (TestRulesUseExposedMetrics): in the default tier, which the chart deploys, except
// for the panels titled "(full tier)", which are checked against the full tier only.
func TestDashboardUsesExposedMetrics(t *testing.T) {
	for _, golden := range goldenMetrics {
		t.Run(filepath.Base(golden), func(t *testing.T) { testDashboardUsesExposedMetrics(t, golden) })
	}
}

func testDashboardUsesExposedMetrics(t *testing.T, golden string) {
	metrics := exposed(t, golden)
	for name, labels := range metrics {
		metrics[name] = append(labels, targetLabels...)
	}
	full := filepath.Base(golden) == "metrics.golden"
	d := readDashboard(t)
	n := 0
	check := func(where, expr string) {
		n += len(selectorRE.FindAllString(expr, -1))
		if bad := unknownNames(expr, metrics, nil); len(bad) > 0 {
			t.Errorf("%s uses %v, not in %s", where, bad, golden)
		}
	}
	for _, p := range d.Panels {
		if strings.Contains(p.Title, fullTier) && !full {
			continue
		}
		for i, tg := range p.Targets {
			check(p.Title+" target "+string(rune('A'+i)), tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			check("variable "+v.Name, variableQuery(v.Query))
		}
	}
	if n < 20 {
		t.Fatalf("found %d nfstune metric selectors in the dashboard, want at least 20", n)
	}
}

// TestDashboardShape checks what Grafana and its provisioning rely on: a stable uid, a data
// source variable every panel queries through, unique panel ids, the fleet, node and mount
// rows, a query in every panel, and only variables the dashboard defines.
func TestDashboardShape(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, schemaVersion %d: want a uid and schemaVersion 36 or later", d.UID, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Errorf("no datasource variable (variables: %v)", vars)
	}
	ids := map[int]bool{}
	var rows []string
	varRE := regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows = append(rows, strings.Fields(p.Title)[0])
			continue
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("%s: datasource uid %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: empty query", p.Title)
			}
			for _, m := range varRE.FindAllStringSubmatch(tg.Expr, -1) {
				if _, ok := vars[m[1]]; !ok && !strings.HasPrefix(m[1], "__") {
					t.Errorf("%s: uses $%s, which the dashboard does not define", p.Title, m[1])
				}
			}
		}
	}
	if want := []string{"Fleet", "Node:", "Mount:"}; !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
}

// grafanaVars stands in for Grafana's variables: a multi-value variable set to All is the
// regex .*, and the interval variables are durations.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "2m",
	"$__range", "1h",
	"$instance", ".*",
	"$server", ".*",
	"$device", ".*",
)

// TestDashboardPromQL parses every panel query with Prometheus's own parser: promtool
// check rules on a rule file of the queries, with the variables as Grafana fills them in.
func TestDashboardPromQL(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not installed (.ci/run installs it)")
		}
		t.Skip("promtool not installed")
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for _, p := range readDashboard(t).Panels {
		for i, tg := range p.Targets {
			rules = append(rules, rule{
				Record: fmt.Sprintf("panel_%d_%c", p.ID, 'a'+i),
				Expr:   grafanaVars.Replace(tg.Expr),
			})
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's %d queries: %v\n%s", len(rules), err, msg)
	}
}
