//go:build lab

package ratable

import (
	"strings"
	"testing"
)

// TestRenderPods: a scenario of two pods shows each pod's rates, the arm's share of each
// pod's best fixed value and of its own rate at 128 KiB, and a run counts as at 95 % only
// when every pod is. It runs on the host: go test -tags lab -run TestRender ./lab/ratable/.
func TestRenderPods(t *testing.T) {
	sc := scenario{name: "g", description: "two pods", pods: []string{"b", "e"}}
	one := scenario{name: "a", description: "one reader"}
	results := []result{
		{scenario: "g", setting: "128", podRates: []float64{50, 4}, mibps: 50, overRead: 1},
		{scenario: "g", setting: "1024", podRates: []float64{100, 2}, mibps: 100, overRead: 1.5},
		{scenario: "g", setting: "default", podRates: []float64{80, 3.9}, mibps: 80, overRead: 1.1, finalKB: 1024, audit: "agent /audit: no NFS006"},
		{scenario: "g", setting: "again default", podRates: []float64{50, 4}, mibps: 50, finalKB: 128},
		{scenario: "g", setting: "control default", podRates: []float64{50, 3.6}, mibps: 50},
		{scenario: "a", setting: "128", mibps: 20, overRead: 1},
		{scenario: "a", setting: "1024", mibps: 40, overRead: 1},
		{scenario: "a", setting: "default", mibps: 39, overRead: 1, finalKB: 1024},
		{scenario: "a", setting: "again default", mibps: 40, finalKB: 1024},
		{scenario: "a", setting: "control default", mibps: 41},
	}
	table := render([]scenario{one, sc}, []int{128, 1024}, arms[:1], results, "6.1", 1024)
	var g, a string
	for _, l := range strings.Split(table, "\n") {
		switch {
		case strings.HasPrefix(l, "| g:"):
			g = l
		case strings.HasPrefix(l, "| a:"):
			a = l
		}
	}
	for _, want := range []string{
		"| b 50.0, e 4.0 (1.00) | b 100.0, e 2.0 (1.50) |", // the fixed values, per pod
		"| b 80 %, e 98 % |",  // over each pod's best fixed value
		"| b 160 %, e 98 % |", // over each pod's rate at 128 KiB
		"| b 160.0 %, e 97.5 % | b 100.0 %, e 90.0 % | 1 of 1, 0 of 1 |", // the run and the control over the 128 KiB run after it
		"| agent /audit: no NFS006 |",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("g's row lacks %q:\n%s", want, g)
		}
	}
	for _, want := range []string{"| 39.0 (1.00), ends at 1024 KiB | 98 % | 195 % |", "| 97.5 % | 102.5 % | 1 of 1, 1 of 1 |"} {
		if !strings.Contains(a, want) {
			t.Errorf("a's row lacks %q:\n%s", want, a)
		}
	}
}
