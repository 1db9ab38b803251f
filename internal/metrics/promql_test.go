package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPodJoinPromQL runs the two PromQL queries of docs/agent.md ("Pods and volumes")
// through promtool test rules on sample series: two pods sharing one superblock, one of
// them also using a second, joined with kube-state-metrics' kube_pod_info.
func TestPodJoinPromQL(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not installed (.ci/run installs it)")
		}
		t.Skip("promtool not installed")
	}
	doc, err := os.ReadFile("../../docs/agent.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) != 3 {
		t.Fatalf("docs/agent.md has %d promql blocks, want 3 (the join, the rate per pod, the pods reading through mmap)", len(blocks))
	}
	join, perPod, mapped := strings.TrimSpace(string(blocks[0][1])), strings.TrimSpace(string(blocks[1][1])), strings.TrimSpace(string(blocks[2][1]))

	const (
		uidA = "6f1b3a52-8c4d-4e0a-9b7e-2d5c1f0a3e71"
		uidB = "a04c9e1d-5b27-4f38-8e6a-7c2b9d1e4f05"
		m    = `instance="node1:9477",job="nfstune",backend="generic",server="10.0.0.5",version="4.2"`
	)
	// Superblock 0:52 is shared by pods a and b; 0:53 is used by pod a only. They read 10
	// and 2 bytes/s from the server. Empty labels are left out, as Prometheus stores them.
	indent := func(s string) string { return strings.ReplaceAll(s, "\n", "\n          ") }
	test := `tests:
  - interval: 1m
    input_series:
      - series: 'nfstune_mount_pod_info{` + m + `,device="0:52",pod_uid="` + uidA + `",pv="pv-data"}'
        values: '1x10'
      - series: 'nfstune_mount_pod_info{` + m + `,device="0:52",pod_uid="` + uidB + `",pv="pv-data"}'
        values: '1x10'
      - series: 'nfstune_mount_pod_info{` + m + `,device="0:53",pod_uid="` + uidA + `",pv="pv-scratch"}'
        values: '1x10'
      - series: 'nfstune_mount_read_bytes_total{` + m + `,device="0:52",source="server"}'
        values: '0+600x10'
      - series: 'nfstune_mount_read_bytes_total{` + m + `,device="0:52",source="normal"}'
        values: '0+900x10'
      - series: 'nfstune_mount_read_bytes_total{` + m + `,device="0:53",source="server"}'
        values: '0+120x10'
      - series: 'nfstune_pod_read_bytes_total{instance="node1:9477",job="nfstune",device="0:52",pod_uid="` + uidA + `",source="fault"}'
        values: '0+3000x10'
      - series: 'nfstune_pod_read_bytes_total{instance="node1:9477",job="nfstune",device="0:52",pod_uid="` + uidB + `",source="fault"}'
        values: '0+60x10'
      - series: 'nfstune_pod_read_bytes_total{instance="node1:9477",job="nfstune",device="0:52",pod_uid="` + uidB + `",source="application"}'
        values: '0+6000x10'
      - series: 'kube_pod_info{instance="ksm:8080",job="kube-state-metrics",namespace="shop",pod="a",uid="` + uidA + `",node="node1"}'
        values: '1x10'
      - series: 'kube_pod_info{instance="ksm:8080",job="kube-state-metrics",namespace="shop",pod="b",uid="` + uidB + `",node="node1"}'
        values: '1x10'
    promql_expr_test:
      - expr: |
          ` + indent(join) + `
        eval_time: 5m
        exp_samples:
          - labels: '{` + m + `,device="0:52",pod_uid="` + uidA + `",pv="pv-data",namespace="shop",pod="a"}'
            value: 1
          - labels: '{` + m + `,device="0:52",pod_uid="` + uidB + `",pv="pv-data",namespace="shop",pod="b"}'
            value: 1
          - labels: '{` + m + `,device="0:53",pod_uid="` + uidA + `",pv="pv-scratch",namespace="shop",pod="a"}'
            value: 1
      - expr: |
          ` + indent(perPod) + `
        eval_time: 5m
        exp_samples:
          - labels: '{namespace="shop",pod="a"}'
            value: 12
          - labels: '{namespace="shop",pod="b"}'
            value: 10
      - expr: |
          ` + indent(mapped) + `
        eval_time: 5m
        exp_samples:
          - labels: '{device="0:52",pod_uid="` + uidA + `"}'
            value: 50
          - labels: '{device="0:52",pod_uid="` + uidB + `"}'
            value: 1
`
	file := filepath.Join(t.TempDir(), "join_test.yml")
	if err := os.WriteFile(file, []byte(test), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n%s", err, out, test)
	}
}
