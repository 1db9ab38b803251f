// Package deploy holds files nfstune hands to other systems that the binary also carries:
// the Prometheus rules and the Grafana dashboard, which the Helm chart reads from its files/
// directory and `nfstune k8s render` from here, so both install the same ones.
package deploy

import _ "embed" // the rules and dashboard files

// PrometheusRules is the Prometheus rule file (groups: ...) of the chart's PrometheusRule,
// tested by `make rules-test`.
//
//go:embed helm/nfstune/files/nfstune-rules.yaml
var PrometheusRules []byte

// GrafanaDashboard is the Grafana dashboard (JSON model) of the chart's dashboard ConfigMap.
//
//go:embed helm/nfstune/files/nfstune-dashboard.json
var GrafanaDashboard []byte
