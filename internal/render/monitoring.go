package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/deploy"
)

// The Prometheus Operator's API group. Its kinds are custom resources with no types in
// k8s.io/api, so they are rendered as unstructured objects.
const monitoringAPIVersion = "monitoring.coreos.com/v1"

// Names of the monitoring objects.
const (
	podMonitorName     = "nfstune-agent"
	serviceMonitorName = "nfstune-metrics"
	ruleName           = "nfstune"
	dashboardName      = "nfstune-dashboard"
	// dashboardFile is the dashboard ConfigMap's key: the sidecar writes it to that file.
	dashboardFile = "nfstune-dashboard.json"
)

// IsMonitoringKind reports whether o is one of the Prometheus Operator's custom resources,
// which a cluster has only where the operator's CRDs are installed.
func IsMonitoringKind(o Object) bool {
	return o.GetObjectKind().GroupVersionKind().Group == "monitoring.coreos.com"
}

func monitoringObject(v Values, kind, name string, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name, "namespace": v.Namespace}
	l := map[string]any{}
	for k, val := range labels {
		l[k] = val
	}
	md["labels"] = l
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": monitoringAPIVersion,
		"kind":       kind,
		"metadata":   md,
		"spec":       spec,
	}}
}

// withLabels is the component's labels plus extra ones, e.g. the label a Prometheus
// selects its monitors and rules by.
func withLabels(component string, extra map[string]string) map[string]string {
	out := labels(component)
	for k, val := range extra {
		out[k] = val
	}
	return out
}

// endpoint is the scrape endpoint of a PodMonitor or ServiceMonitor: the metrics port, the
// interval and timeout, a node label on every series, then the user's relabelings.
func endpoint(v Values) map[string]any {
	relabel := []any{map[string]any{
		"action":       "replace",
		"sourceLabels": []any{"__meta_kubernetes_pod_node_name"},
		"targetLabel":  "node",
	}}
	for _, r := range v.Metrics.Relabelings {
		relabel = append(relabel, r)
	}
	ep := map[string]any{
		"port":          "metrics",
		"path":          "/metrics",
		"interval":      v.Metrics.Interval,
		"scrapeTimeout": v.Metrics.ScrapeTimeout,
		"relabelings":   relabel,
	}
	if len(v.Metrics.MetricRelabelings) > 0 {
		var mr []any
		for _, r := range v.Metrics.MetricRelabelings {
			mr = append(mr, r)
		}
		ep["metricRelabelings"] = mr
	}
	return ep
}

func selector() map[string]any {
	l := map[string]any{}
	for k, val := range labels("agent") {
		l[k] = val
	}
	return map[string]any{"matchLabels": l}
}

// podMonitor scrapes every agent pod directly.
func podMonitor(v Values) *unstructured.Unstructured {
	return monitoringObject(v, "PodMonitor", podMonitorName, withLabels("agent", v.Metrics.Labels), map[string]any{
		"selector":            selector(),
		"podMetricsEndpoints": []any{endpoint(v)},
	})
}

// serviceMonitor scrapes the agent pods through the headless metrics Service.
func serviceMonitor(v Values) *unstructured.Unstructured {
	return monitoringObject(v, "ServiceMonitor", serviceMonitorName, withLabels("agent", v.Metrics.Labels), map[string]any{
		"selector":  selector(),
		"endpoints": []any{endpoint(v)},
	})
}

// prometheusRule carries deploy.PrometheusRules, the file the chart reads too.
func prometheusRule(v Values) (*unstructured.Unstructured, error) {
	var spec map[string]any
	if err := yaml.Unmarshal(deploy.PrometheusRules, &spec); err != nil {
		return nil, fmt.Errorf("prometheus rules: %w", err)
	}
	return monitoringObject(v, "PrometheusRule", ruleName, withLabels("agent", v.PrometheusRule.Labels), spec), nil
}

// dashboardConfigMap carries deploy.GrafanaDashboard, the file the chart reads too, with
// the label Grafana's dashboard sidecar loads ConfigMaps by.
func dashboardConfigMap(v Values) *corev1.ConfigMap {
	md := metav1.ObjectMeta{
		Name:      dashboardName,
		Namespace: v.dashboardNamespace(),
		Labels:    withLabels("dashboard", v.GrafanaDashboard.Labels),
	}
	if len(v.GrafanaDashboard.Annotations) > 0 {
		md.Annotations = v.GrafanaDashboard.Annotations
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: md,
		Data:       map[string]string{dashboardFile: string(deploy.GrafanaDashboard)},
	}
}
