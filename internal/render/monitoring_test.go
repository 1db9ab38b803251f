package render

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/deploy"
)

// monitoringCase renders the defaults with changes applied and returns the objects by kind.
func monitoringCase(t *testing.T, change func(*Values)) map[string]Object {
	t.Helper()
	v := DefaultValues()
	v.Image.Tag = "v0.1.0"
	change(&v)
	objs, err := Render(v, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]Object{}
	for _, o := range objs {
		byKind[o.GetObjectKind().GroupVersionKind().Kind] = o
	}
	return byKind
}

// TestMonitoringObjects checks what the apiserver test cannot (the Prometheus Operator's
// CRDs are not installed there): the monitors select the agent pods or their Service and
// scrape a port they expose, and the PrometheusRule carries the rules file unchanged.
func TestMonitoringObjects(t *testing.T) {
	t.Parallel()
	objs := monitoringCase(t, func(v *Values) {
		v.Metrics.PodMonitor.Enabled = true
		v.PrometheusRule.Enabled = true
		v.PrometheusRule.Labels = map[string]string{"release": "kps"}
		v.Metrics.Relabelings = []map[string]any{{"action": "labeldrop", "regex": "pod"}}
	})
	ds := objs["DaemonSet"].(*appsv1.DaemonSet)
	pm := objs["PodMonitor"].(*unstructured.Unstructured)
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !k8slabels.SelectorFromSet(sel).Matches(k8slabels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("PodMonitor selector %v does not select the agent pods %v", sel, ds.Spec.Template.Labels)
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		t.Fatalf("PodMonitor endpoints = %v", eps)
	}
	ep := eps[0].(map[string]any)
	var ports []string
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		ports = append(ports, p.Name)
	}
	if !strings.Contains(strings.Join(ports, ","), ep["port"].(string)) || ep["interval"] != "30s" {
		t.Errorf("PodMonitor endpoint %v: want port among %v and interval 30s", ep, ports)
	}
	relabel := ep["relabelings"].([]any)
	if len(relabel) != 2 || relabel[0].(map[string]any)["targetLabel"] != "node" || relabel[1].(map[string]any)["action"] != "labeldrop" {
		t.Errorf("relabelings = %v, want the node label, then the user's", relabel)
	}
	if _, ok := objs["ServiceMonitor"]; ok {
		t.Error("ServiceMonitor rendered with only the PodMonitor enabled")
	}

	pr := objs["PrometheusRule"].(*unstructured.Unstructured)
	if pr.GetLabels()["release"] != "kps" {
		t.Errorf("PrometheusRule labels = %v, want release: kps", pr.GetLabels())
	}
	var want map[string]any
	if err := yaml.Unmarshal(deploy.PrometheusRules, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, pr.Object["spec"]); diff != "" {
		t.Errorf("PrometheusRule spec differs from the rules file (-file +spec):\n%s", diff)
	}
	// promtool accepts the spec as a rules file, when installed (make rules-test checks the
	// file itself and always needs it).
	if promtool, err := exec.LookPath("promtool"); err == nil {
		b, err := yaml.Marshal(pr.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
	}

	objs = monitoringCase(t, func(v *Values) { v.Metrics.ServiceMonitor.Enabled = true })
	svc := objs["Service"].(*corev1.Service)
	sm := objs["ServiceMonitor"].(*unstructured.Unstructured)
	sel, _, _ = unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 || !k8slabels.SelectorFromSet(sel).Matches(k8slabels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selector %v does not select the Service %v", sel, svc.Labels)
	}
	eps, _, _ = unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name {
		t.Errorf("ServiceMonitor endpoints %v: want the Service's port %s", eps, svc.Spec.Ports[0].Name)
	}

	// Off by default, and never in installer or revert mode.
	for name, change := range map[string]func(*Values){
		"defaults": func(*Values) {},
		"installer": func(v *Values) {
			v.Mode = ModeInstaller
			v.PrometheusRule.Enabled = true
			v.Metrics.PodMonitor.Enabled = true
		},
		"revert": func(v *Values) {
			v.Mode = ModeRevert
			v.PrometheusRule.Enabled = true
			v.Metrics.PodMonitor.Enabled = true
		},
	} {
		for kind := range monitoringCase(t, change) {
			if kind == "PodMonitor" || kind == "ServiceMonitor" || kind == "PrometheusRule" {
				t.Errorf("%s: %s rendered", name, kind)
			}
		}
	}
}

func TestMonitoringValuesRejected(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ values, want string }{
		{"metrics: {podMonitor: {enabled: true}, serviceMonitor: {enabled: true}}", "enable one"},
		{"metrics: {service: false, serviceMonitor: {enabled: true}}", "needs metrics.service"},
		{"metrics: {interval: soon}", `metrics.interval "soon"`},
		{"prometheusRule: {enabled: true, severity: page}", "prometheusRule.severity: unknown key"},
		{"grafanaDashboard: {enabled: true, labels: null}", "grafanaDashboard.labels: empty"},
		{"grafanaDashboard: {namespace: Monitoring}", `grafanaDashboard.namespace "Monitoring"`},
		{`grafanaDashboard: {labels: {"grafana dashboard": "1"}}`, "grafanaDashboard.labels grafana dashboard"},
	} {
		_, err := LoadValues("values.yaml", []byte(tt.values))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadValues(%s) = %v, want an error with %q", tt.values, err, tt.want)
		}
	}
}

// TestDashboardConfigMap checks the dashboard ConfigMap: the dashboard file unchanged under
// its key, the sidecar's label beside nfstune's, the namespace and annotations asked for,
// and nothing by default or in installer or revert mode.
func TestDashboardConfigMap(t *testing.T) {
	t.Parallel()
	dashboards := func(v Values) []*corev1.ConfigMap {
		t.Helper()
		objs, err := Render(v, "v1.0.0")
		if err != nil {
			t.Fatal(err)
		}
		var out []*corev1.ConfigMap
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == dashboardName {
				out = append(out, cm)
			}
		}
		return out
	}
	v := DefaultValues()
	if got := dashboards(v); len(got) != 0 {
		t.Errorf("dashboard ConfigMap rendered by default")
	}
	v.GrafanaDashboard.Enabled = true
	got := dashboards(v)
	if len(got) != 1 {
		t.Fatalf("%d dashboard ConfigMaps, want 1", len(got))
	}
	cm := got[0]
	if cm.Namespace != "nfstune" || cm.Labels["grafana_dashboard"] != "1" || cm.Labels["app.kubernetes.io/name"] != Name {
		t.Errorf("namespace %q, labels %v: want nfstune, grafana_dashboard: \"1\" and nfstune's labels", cm.Namespace, cm.Labels)
	}
	if cm.Data[dashboardFile] != string(deploy.GrafanaDashboard) || len(cm.Data) != 1 {
		t.Errorf("data keys %v: want only %s, the dashboard file unchanged", slices.Collect(maps.Keys(cm.Data)), dashboardFile)
	}

	v, err := LoadValues("values.yaml", []byte("grafanaDashboard: {enabled: true, namespace: monitoring, labels: {grafana_dashboard: null, dashboards: nfs}, annotations: {grafana_folder: NFS}}"))
	if err != nil {
		t.Fatal(err)
	}
	cm = dashboards(v)[0]
	if _, ok := cm.Labels["grafana_dashboard"]; cm.Namespace != "monitoring" || ok || cm.Labels["dashboards"] != "nfs" || cm.Annotations["grafana_folder"] != "NFS" {
		t.Errorf("namespace %q, labels %v, annotations %v: want monitoring, dashboards: nfs only, grafana_folder: NFS", cm.Namespace, cm.Labels, cm.Annotations)
	}
	for _, mode := range []string{ModeInstaller, ModeRevert} {
		v.Mode = mode
		if got := dashboards(v); len(got) != 0 {
			t.Errorf("dashboard ConfigMap rendered in %s mode", mode)
		}
	}
}
