//go:build helm

package render

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The chart tests need a helm binary: `make helm-test` builds one from the Go module proxy
// and passes it in NFSTUNE_HELM.

const chartDir = "../../deploy/helm/nfstune"

func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin := os.Getenv("NFSTUNE_HELM")
	if bin == "" {
		t.Fatal("NFSTUNE_HELM is not set: run make helm-test")
	}
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, &exec.ExitError{ProcessState: cmd.ProcessState, Stderr: stderr.Bytes()}
	}
	return out, nil
}

func key(o Object) string {
	return o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// TestHelmChartMatchesRender renders each testdata values file with helm template and with
// Render, decodes both strictly into k8s.io/api types and compares them object by object.
func TestHelmChartMatchesRender(t *testing.T) {
	for _, name := range renderCases {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, "template", "nfstune", chartDir, "-f", filepath.Join("testdata", name+".values.yaml"))
			if err != nil {
				t.Fatalf("helm template: %v: %s", err, err.(*exec.ExitError).Stderr)
			}
			fromHelm := decodeAll(t, out)
			fromGo := decodeAll(t, renderFile(t, name, FormatYAML))
			if diff := cmp.Diff(kinds(fromGo), kinds(fromHelm)); diff != "" {
				t.Errorf("objects or their order differ (-render +helm):\n%s", diff)
			}
			byKey := map[string]Object{}
			for _, o := range fromHelm {
				byKey[key(o)] = o
			}
			for _, o := range fromGo {
				h, ok := byKey[key(o)]
				if !ok {
					t.Errorf("helm does not render %s", key(o))
					continue
				}
				if diff := cmp.Diff(toMap(t, o), toMap(t, h)); diff != "" {
					t.Errorf("%s differs (-render +helm):\n%s", key(o), diff)
				}
			}
		})
	}
}

// TestHelmChartDefaults checks that both renderers agree on the chart's own values (the
// image tag aside, which is the chart's appVersion); TestChartValuesAreDefaults checks that
// those are DefaultValues.
func TestHelmChartDefaults(t *testing.T) {
	out, err := helm(t, "template", "nfstune", chartDir, "--set", "image.tag=v9.9.9")
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	v := DefaultValues()
	v.Image.Tag = "v9.9.9"
	objs, err := Render(v, "unused")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, FormatYAML, objs); err != nil {
		t.Fatal(err)
	}
	fromGo, fromHelm := decodeAll(t, buf.Bytes()), decodeAll(t, out)
	if len(fromGo) != len(fromHelm) {
		t.Fatalf("render %v, helm %v", kinds(fromGo), kinds(fromHelm))
	}
	for i := range fromGo {
		if diff := cmp.Diff(toMap(t, fromGo[i]), toMap(t, fromHelm[i])); diff != "" {
			t.Errorf("%s differs (-render +helm):\n%s", key(fromGo[i]), diff)
		}
	}
}

// TestHelmChartServiceMonitor compares the ServiceMonitor, which no testdata values file
// enables, with labels and both relabeling lists set.
func TestHelmChartServiceMonitor(t *testing.T) {
	set := "image.tag=v9.9.9,metrics.serviceMonitor.enabled=true,metrics.labels.release=kps,metrics.scrapeTimeout=5s"
	out, err := helm(t, "template", "nfstune", chartDir, "--set", set,
		"--set-json", `metrics.relabelings=[{"action":"labeldrop","regex":"pod"}]`,
		"--set-json", `metrics.metricRelabelings=[{"action":"drop","sourceLabels":["__name__"],"regex":"go_.*"}]`)
	if err != nil {
		t.Fatalf("helm template: %v: %s", err, err.(*exec.ExitError).Stderr)
	}
	v := DefaultValues()
	v.Image.Tag = "v9.9.9"
	v.Metrics.ServiceMonitor.Enabled = true
	v.Metrics.Labels = map[string]string{"release": "kps"}
	v.Metrics.ScrapeTimeout = "5s"
	v.Metrics.Relabelings = []map[string]any{{"action": "labeldrop", "regex": "pod"}}
	v.Metrics.MetricRelabelings = []map[string]any{{"action": "drop", "sourceLabels": []any{"__name__"}, "regex": "go_.*"}}
	objs, err := Render(v, "unused")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, FormatYAML, objs); err != nil {
		t.Fatal(err)
	}
	fromGo, fromHelm := decodeAll(t, buf.Bytes()), decodeAll(t, out)
	if diff := cmp.Diff(kinds(fromGo), kinds(fromHelm)); diff != "" {
		t.Fatalf("objects differ (-render +helm):\n%s", diff)
	}
	last := len(fromGo) - 1
	if k := key(fromGo[last]); k != "ServiceMonitor/nfstune/nfstune-metrics" {
		t.Fatalf("last object %s, want the ServiceMonitor", k)
	}
	if diff := cmp.Diff(toMap(t, fromGo[last]), toMap(t, fromHelm[last])); diff != "" {
		t.Errorf("ServiceMonitor differs (-render +helm):\n%s", diff)
	}
}

// TestHelmChartRejects checks that the chart refuses what Validate refuses.
func TestHelmChartRejects(t *testing.T) {
	for _, set := range []string{"mode=operator", "agent.policyMode=fix", "image.digest=sha256:short", "hostNetwork=true",
		"namespace=kube-system", "namespace=default", "metrics.interval=soon", "grafanaDashboard.namespace=Monitoring",
		"agent.proxyHelpers.directories={/etc}", "agent.proxyHelpers.directories={/run/efs,/run/efs}",
		"agent.hostSys=yes", "agent.blockedProcesses.enabled=1", "agent.appArmorProfile.type=Confined"} {
		_, err := helm(t, "template", "nfstune", chartDir, "--set", set)
		if err == nil {
			t.Errorf("helm template --set %s succeeded", set)
			continue
		}
		k, _, _ := strings.Cut(set, "=")
		k = strings.ReplaceAll(k, ".", "/") // the schema names /agent/policyMode
		if msg := string(err.(*exec.ExitError).Stderr); !strings.Contains(msg, k) {
			t.Errorf("--set %s: error does not name the key: %s", set, msg)
		}
	}
	// A mis-cased key is not the key: the schema refuses it, as LoadValues does
	// (testdata/invalid-miscased-key.values.yaml).
	_, err := helm(t, "template", "nfstune", chartDir, "-f", filepath.Join("testdata", "invalid-miscased-key.values.yaml"))
	if want := "additional properties 'policymode' not allowed"; err == nil || !strings.Contains(string(err.(*exec.ExitError).Stderr), want) {
		t.Errorf("helm template -f invalid-miscased-key.values.yaml: %v, want an error with %q", err, want)
	}
	// The checks across keys fail with Validate's messages.
	for set, want := range map[string]string{
		"metrics.podMonitor.enabled=true,metrics.serviceMonitor.enabled=true":            "enable one",
		"metrics.serviceMonitor.enabled=true,metrics.service=false":                      "needs metrics.service",
		"grafanaDashboard.enabled=true,grafanaDashboard.labels=null":                     "grafanaDashboard.labels: empty",
		"agent.blockedProcesses.enabled=true,agent.hostSys=false":                        "agent.blockedProcesses: needs agent.hostSys",
		"agent.podIO.enabled=true,agent.podCgroups=false":                                "agent.podIO: needs agent.podCgroups",
		"agent.appArmorProfile.type=Localhost":                                           "needs localhostProfile",
		"agent.appArmorProfile.type=Unconfined,agent.appArmorProfile.localhostProfile=x": "localhostProfile: only with type Localhost",
	} {
		_, err := helm(t, "template", "nfstune", chartDir, "--set", set)
		if err == nil || !strings.Contains(string(err.(*exec.ExitError).Stderr), want) {
			t.Errorf("helm template --set %s: %v, want an error with %q", set, err, want)
		}
	}
	// The recovery policy's shutdown needs what lets the agent see every holder.
	_, err = helm(t, "template", "nfstune", chartDir, "-f", filepath.Join("testdata", "invalid-recovery.values.yaml"))
	if want := "policy recovery: needs agent.blockedProcesses"; err == nil || !strings.Contains(string(err.(*exec.ExitError).Stderr), want) {
		t.Errorf("helm template -f invalid-recovery.values.yaml: %v, want an error with %q", err, want)
	}
}
