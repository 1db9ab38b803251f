// Package render builds what nfstune hands to other systems: Kubernetes objects for the
// node agent, the node installer and NFS volumes, as typed k8s.io/api structs in a stable
// order, and the Prometheus Operator's monitors and rules as unstructured objects. The same Values drive `nfstune k8s render` and the Helm chart in
// deploy/helm/nfstune, whose values.yaml has the same keys.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/strictyaml"
)

// Deployment modes.
const (
	// ModeAgent runs `nfstune agent` on every selected node: it keeps read-ahead tuned
	// (policy mode enforce) or only reports (observe) and serves metrics.
	ModeAgent = "agent"
	// ModeInstaller installs nfstune's udev rule and binary on each node from an init
	// container and then idles; nothing privileged-ish keeps running.
	ModeInstaller = "installer"
	// ModeRevert undoes installer mode on each node from an init container (`nfstune k8s
	// revert-node`) and then idles, so that the release can be uninstalled once every
	// node's pod runs.
	ModeRevert = "revert"
)

// Policy modes the agent accepts with --mode.
const (
	PolicyEnforce = "enforce"
	PolicyObserve = "observe"
)

// DefaultRepository is where release images are published.
const DefaultRepository = "ghcr.io/nfstune/nfstune"

// MetricsPort is the port the agent serves /metrics, /healthz and /readyz on in the pod.
const MetricsPort = 9477

// Values are the settings of the rendered objects. The JSON names are the keys of the
// Helm chart's values.yaml, so one file feeds both `nfstune k8s render --config` and
// `helm template -f`.
type Values struct {
	// Namespace holds every object; it is created with the Pod Security level the
	// DaemonSet needs. A namespace Kubernetes creates itself (default, kube-*) is refused
	// while CreateNamespace is on: rendering it would relabel it privileged.
	Namespace string `json:"namespace"`
	// CreateNamespace renders the Namespace object. Leave it on unless the namespace is
	// managed elsewhere, and then label it pod-security.kubernetes.io/enforce=privileged.
	CreateNamespace bool `json:"createNamespace"`
	// Mode is "agent", "installer" or "revert".
	Mode  string `json:"mode"`
	Image Image  `json:"image"`
	Agent Agent  `json:"agent"`
	// Installer configures installer mode and, with the same directories, revert mode.
	Installer Installer `json:"installer"`
	// Policy is the nfstune policy file (YAML) placed in the ConfigMap as policy.yaml: the
	// policy of the nodes in no NodeGroup.
	Policy string `json:"policy"`
	// NodeGroups run the agent with a policy of their own on the nodes each selects, in
	// agent mode: one DaemonSet and one ConfigMap per group. A node belongs to the first
	// group whose nodeSelector it matches (each group's DaemonSet keeps off the nodes of
	// the groups before it); the nodes of no group run the default DaemonSet with Policy.
	NodeGroups []NodeGroup `json:"nodeGroups"`
	// FleetViewer renders the RBAC that kubectl nfstune's users need.
	FleetViewer FleetViewer `json:"fleetViewer"`
	Metrics     Metrics     `json:"metrics"`
	// PrometheusRule renders the agent's alerting rules for the Prometheus Operator.
	PrometheusRule PrometheusRule `json:"prometheusRule"`
	// GrafanaDashboard renders the agent's Grafana dashboard as a ConfigMap for Grafana's
	// dashboard sidecar.
	GrafanaDashboard GrafanaDashboard `json:"grafanaDashboard"`
	// NetworkPolicy limits the traffic of nfstune's pods.
	NetworkPolicy NetworkPolicy `json:"networkPolicy"`
	// Resources are the agent container's requests and limits.
	Resources corev1.ResourceRequirements `json:"resources"`
	// PriorityClassName keeps the agent scheduled on full nodes.
	PriorityClassName string `json:"priorityClassName"`
	// CriticalPodsQuota renders a ResourceQuota that admits system-node-critical and
	// system-cluster-critical pods in the namespace. Clusters that limit those classes to
	// kube-system by default (GKE) reject the pods without one.
	CriticalPodsQuota bool              `json:"criticalPodsQuota"`
	NodeSelector      map[string]string `json:"nodeSelector"`
	// Affinity selects nodes, e.g. only node pools labelled for compute or CAS workloads.
	Affinity    *corev1.Affinity    `json:"affinity"`
	Tolerations []corev1.Toleration `json:"tolerations"`
	// MaxUnavailable is the DaemonSet's rolling-update budget, a count or a percentage.
	MaxUnavailable intstr.IntOrString `json:"maxUnavailable"`
}

// NodeGroup is a group of nodes whose agents run a policy of their own.
type NodeGroup struct {
	// Name names the group's objects (nfstune-agent-<name>, nfstune-policy-<name>) and is
	// its pods' nfstune.io/node-group label and the agent's --policy-name: a DNS label of
	// at most 40 characters, not "default" (the nodes of no group).
	Name string `json:"name"`
	// NodeSelector is the one node label the group's nodes carry, e.g.
	// {workload.sas.com/class: cas}. It is added to the chart's nodeSelector.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Policy is the group's policy file, as Values.Policy.
	Policy string `json:"policy"`
}

// FleetViewer configures the RBAC objects of kubectl nfstune.
type FleetViewer struct {
	ClusterRole FleetViewerRole `json:"clusterRole"`
}

// FleetViewerRole renders, with Create, the ClusterRole nfstune-fleet-viewer (get and list
// nodes) and the Role nfstune-fleet-viewer in the namespace (get and list pods, get
// pods/proxy): what kubectl nfstune needs, for the user to bind.
type FleetViewerRole struct {
	Create bool `json:"create"`
}

// Image names the container image. Digest, when set, pins it: repository@digest.
type Image struct {
	Repository string            `json:"repository"`
	Tag        string            `json:"tag"`
	Digest     string            `json:"digest"`
	PullPolicy corev1.PullPolicy `json:"pullPolicy"`
}

// Agent configures `nfstune agent`.
type Agent struct {
	// PolicyMode is "observe" (the agent runs with --observe and the bdi mount is
	// read-only) or "enforce" (the policy's modes apply and the bdi mount is writable).
	PolicyMode string `json:"policyMode"`
	// Resync is the period of the agent's full resync that catches drift (--resync), as a
	// Go duration; between resyncs it follows mountinfo changes.
	Resync string `json:"resync"`
	// LogLevel is passed as --log-level.
	LogLevel string `json:"logLevel"`
	// ProxyHelpers mounts the state of the NFS proxy helpers, so that the agent attributes
	// a mount through efs-utils or AZNFS to its service instead of a bare loopback one.
	ProxyHelpers ProxyHelpers `json:"proxyHelpers"`
	// HostSys mounts the host's /sys/kernel/sunrpc read-only at /host/sys/kernel/sunrpc
	// (HostSunrpc), so that the agent reads the host's sunrpc transports (the directory is
	// tagged by network namespace: the pod's own /sys shows the pod's). Off, the agent sees
	// no transports and exports no nfstune_server_* series; nodes before Linux 5.14, which
	// have no such directory, need it off.
	HostSys bool `json:"hostSys"`
	// PodCgroups mounts the host's cgroup v2 hierarchy read-only at /host/sys/fs/cgroup
	// (HostCgroup), so that the agent reads the memory and pressure counters of the pods
	// using each mount and classifies their read traffic per pod (thrashing, mapped random
	// reads). Off, the pods' classes are unknown. Nodes with cgroup v1 (hybrid) keep their
	// controllers as submounts there, which a read-only bind does not cover: turn it off.
	PodCgroups bool `json:"podCgroups"`
	// BlockedProcesses lets the agent inspect every process using a stalled server's mounts
	// (CAP_SYS_PTRACE). The capability also opens /proc/<pid>/root of every host process to
	// the container's uid 0, for writing too: unconfined by an LSM, it makes the agent root
	// on the node.
	BlockedProcesses Toggle `json:"blockedProcesses"`
	// PodIO runs the per-pod NFS I/O collector (agent --pod-io, package podio): CAP_BPF and
	// CAP_PERFMON (PodIOCapabilities) and the host's tracefs read-only (HostTracing). The
	// capabilities let the container load tracing programs, which can read any kernel
	// memory. It needs PodCgroups, where the agent maps cgroups to pods.
	PodIO Toggle `json:"podIO"`
	// AppArmorProfile is the agent container's AppArmor profile; nil leaves the runtime's
	// default. The default profiles of containerd and CRI-O allow ptrace only between
	// processes of that profile, so BlockedProcesses needs another one on AppArmor nodes:
	// deploy/apparmor/nfstune-agent (Localhost), which confines the capability, or
	// Unconfined, which does not.
	AppArmorProfile *corev1.AppArmorProfile `json:"appArmorProfile"`
}

// ProxyHelpers configures the read-only host directories of the local proxies that
// efs-utils (efs-proxy, stunnel) and AZNFS (stunnel) put between the kernel NFS client and
// the server (inventory.AttributeProxies).
type ProxyHelpers struct {
	// Enabled mounts Directories into the agent.
	Enabled bool `json:"enabled"`
	// Directories are host directories, each one the agent reads (inventory.ProxyStateDirs),
	// mounted read-only at the same path below HostRoot. The volumes check nothing: where a
	// directory is missing the pod still starts, and the container runtime (containerd,
	// CRI-O) creates it empty, so list only the helpers the fleet runs.
	Directories []string `json:"directories"`
}

// defaultProxyDirs are the helpers' directories mounted by default: efs-utils' state
// directory as efs-utils names it (/var/run/efs; /run/efs where /var/run links to /run,
// which the bind mount follows), its configuration for optimize_readahead, and AZNFS'
// stunnel configurations.
var defaultProxyDirs = []string{
	"/var/run/efs",
	"/etc/amazon/efs",
	"/etc/stunnel/microsoft/aznfs/nfsv4_fileShare",
}

// Installer configures installer mode, and revert mode, which undoes it in the same
// directories.
type Installer struct {
	// BinDir is the host directory the nfstune binary is copied to; the udev rule runs it
	// from there. It must be on a writable, executable host filesystem.
	BinDir string `json:"binDir"`
	// ConfigDir is the host directory the policy is copied to.
	ConfigDir string `json:"configDir"`
	// Validate also renders a DaemonSet that prints each node's read-ahead per NFS
	// mount (`nfstune audit -o json`) to its log.
	Validate bool `json:"validate"`
	// NFSMountConf also writes the policy's mount options for the servers and mount
	// points its rules name literally into /etc/nfsmount.conf.d/50-nfstune.conf on each
	// node (`install-node --nfsmount-conf`), for mounts that cannot carry options, such as
	// a Pod's inline nfs volume. The init container then mounts the host's
	// /etc/nfsmount.conf.d (created if missing) and, read-only, /sbin and /usr/sbin, where
	// it looks at mount.nfs.
	NFSMountConf bool `json:"nfsmountConf"`
}

// metricsTiers are the agent's --metrics values, the default first (package metrics: Tier).
var metricsTiers = []string{"default", "full"}

// Metrics configures scraping of the agent.
type Metrics struct {
	// Service renders a headless Service over the agent pods' metrics port.
	Service bool `json:"service"`
	// PodAnnotations adds prometheus.io/scrape, port and path annotations.
	PodAnnotations bool `json:"podAnnotations"`
	// PodMonitor and ServiceMonitor render the Prometheus Operator's scrape configuration:
	// the pods directly, or through the Service (which then must be on). One at most.
	PodMonitor     Toggle `json:"podMonitor"`
	ServiceMonitor Toggle `json:"serviceMonitor"`
	// Interval and ScrapeTimeout are the monitors' scrape interval and timeout, Prometheus
	// durations.
	Interval      string `json:"interval"`
	ScrapeTimeout string `json:"scrapeTimeout"`
	// Labels are added to the monitors, for the Prometheus's podMonitorSelector or
	// serviceMonitorSelector (kube-prometheus-stack selects release: <its release name>).
	Labels map[string]string `json:"labels"`
	// Relabelings follow the monitors' own, which copies the node name into a node label;
	// MetricRelabelings apply to the scraped series. Both are Prometheus Operator
	// RelabelConfig objects.
	Relabelings       []map[string]any `json:"relabelings"`
	MetricRelabelings []map[string]any `json:"metricRelabelings"`
	// Tier is the agent's --metrics: default (at most 40 series per mount) or full.
	Tier string `json:"tier"`
	// MinScrapeInterval is the agent's --min-scrape-interval, a Go duration: scrapes
	// within it of one that read the host get that one's metrics.
	MinScrapeInterval string `json:"minScrapeInterval"`
}

// Toggle is a value that only switches an object on.
type Toggle struct {
	Enabled bool `json:"enabled"`
}

// PrometheusRule configures the PrometheusRule object that carries deploy.PrometheusRules.
type PrometheusRule struct {
	Enabled bool `json:"enabled"`
	// Labels are added to the object, for the Prometheus's ruleSelector.
	Labels map[string]string `json:"labels"`
}

// GrafanaDashboard configures the ConfigMap that carries deploy.GrafanaDashboard. Grafana's
// dashboard sidecar (k8s-sidecar, as kube-prometheus-stack and the Grafana chart run it)
// loads every ConfigMap with its label, in its own namespace or in every namespace.
type GrafanaDashboard struct {
	Enabled bool `json:"enabled"`
	// Namespace holds the ConfigMap; empty for Namespace. The sidecar's namespace where it
	// watches only its own.
	Namespace string `json:"namespace"`
	// Labels are what the sidecar selects ConfigMaps by: grafana_dashboard: "1" by default,
	// the sidecar's default (set it to null to use another label only).
	Labels map[string]string `json:"labels"`
	// Annotations are added to the ConfigMap, e.g. the sidecar's folder annotation.
	Annotations map[string]string `json:"annotations"`
}

// dashboardNamespace is the namespace of the dashboard ConfigMap.
func (v Values) dashboardNamespace() string {
	if v.GrafanaDashboard.Namespace != "" {
		return v.GrafanaDashboard.Namespace
	}
	return v.Namespace
}

// NetworkPolicy configures a NetworkPolicy over every nfstune pod: no egress at all (the
// pods call nothing, not even DNS), and ingress only to the metrics port, only from From.
// It takes effect where the cluster's network plugin enforces NetworkPolicy.
type NetworkPolicy struct {
	Enabled bool `json:"enabled"`
	// From are the peers that may scrape the agents, as in a NetworkPolicy ingress rule.
	// The default admits the pods of the namespace named monitoring (MonitoringNamespace)
	// and nothing else: /metrics names every mount, server and pod UID of the node, and
	// an endpoint open to every pod could be kept busy by any of them. An empty list
	// admits every source.
	From []networkingv1.NetworkPolicyPeer `json:"from"`
}

// MonitoringNamespace is the namespace the default NetworkPolicy admits scrapes from, by
// the kubernetes.io/metadata.name label Kubernetes puts on every namespace.
const MonitoringNamespace = "monitoring"

// DefaultPolicy is the policy file of DefaultValues: the built-in profiles, no rules.
const DefaultPolicy = "apiVersion: nfstune.io/v1alpha1\nkind: Policy\n"

// DefaultValues are the values of `nfstune k8s render` without --config, and of the chart's
// values.yaml.
func DefaultValues() Values {
	return Values{
		Namespace:       "nfstune",
		CreateNamespace: true,
		Mode:            ModeAgent,
		Image:           Image{Repository: DefaultRepository, PullPolicy: corev1.PullIfNotPresent},
		Agent: Agent{
			PolicyMode: PolicyObserve, Resync: "30s", LogLevel: "info",
			ProxyHelpers: ProxyHelpers{Directories: slices.Clone(defaultProxyDirs)},
			HostSys:      true,
			PodCgroups:   true,
		},
		Installer: Installer{
			BinDir:    "/opt/nfstune/bin",
			ConfigDir: "/etc/nfstune",
			Validate:  true,
		},
		Policy:     DefaultPolicy,
		NodeGroups: []NodeGroup{},
		Metrics: Metrics{
			Service: true, PodAnnotations: true, Tier: metricsTiers[0], Interval: "30s", ScrapeTimeout: "10s",
			MinScrapeInterval: "5s",
			Labels:            map[string]string{}, Relabelings: []map[string]any{}, MetricRelabelings: []map[string]any{},
		},
		PrometheusRule: PrometheusRule{Labels: map[string]string{}},
		GrafanaDashboard: GrafanaDashboard{
			Labels:      map[string]string{"grafana_dashboard": "1"},
			Annotations: map[string]string{},
		},
		NetworkPolicy: NetworkPolicy{
			Enabled: true,
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": MonitoringNamespace},
			}}},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("10m"),
				corev1.ResourceMemory:           resource.MustParse("32Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("16Mi"),
			},
			// The container writes only its log: kubelet keeps at most 5 files of 10 MiB
			// by default (containerLogMaxFiles, containerLogMaxSize).
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("100m"),
				corev1.ResourceMemory:           resource.MustParse("64Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("64Mi"),
			},
		},
		PriorityClassName: "system-node-critical",
		CriticalPodsQuota: true,
		NodeSelector:      map[string]string{"kubernetes.io/os": "linux"},
		// A node agent must run wherever NFS volumes can be mounted, tainted pools too.
		Tolerations:    []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		MaxUnavailable: intstr.FromString("10%"),
	}
}

// LoadValues decodes a values file over DefaultValues the way Helm merges a -f file over a
// chart's values.yaml: maps merge key by key, lists and scalars replace, and null deletes
// a default. A key must name a value exactly, as the chart's schema has it (strictyaml):
// encoding/json alone would take policymode for policyMode. name is the file, for errors.
func LoadValues(name string, b []byte) (Values, error) {
	v, err := loadValues(name, b)
	if err != nil {
		return Values{}, err
	}
	if err := v.Validate(); err != nil {
		return v, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

func loadValues(name string, b []byte) (Values, error) {
	v := DefaultValues()
	if len(bytes.TrimSpace(b)) == 0 {
		return v, nil
	}
	if err := strictyaml.Check(name, b, reflect.TypeFor[Values](), strictyaml.JSON); err != nil {
		return Values{}, err
	}
	var user map[string]any
	if err := yaml.Unmarshal(b, &user); err != nil {
		return Values{}, fmt.Errorf("%s: decoding values: %w", name, err)
	}
	def, err := json.Marshal(v)
	if err != nil {
		return Values{}, err
	}
	var base map[string]any
	if err := json.Unmarshal(def, &base); err != nil {
		return Values{}, err
	}
	merged, err := json.Marshal(coalesce(base, user))
	if err != nil {
		return Values{}, fmt.Errorf("%s: decoding values: %w", name, err)
	}
	v = Values{}
	if err := yaml.UnmarshalStrict(merged, &v); err != nil {
		return Values{}, fmt.Errorf("%s: decoding values: %w", name, err)
	}
	return v, nil
}

// coalesce merges over onto base as Helm merges values: nested maps recursively, a null
// removes the key, anything else replaces.
func coalesce(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	maps.Copy(out, base)
	for k, ov := range over {
		if ov == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]any)
		om, ook := ov.(map[string]any)
		if bok && ook {
			out[k] = coalesce(bm, om)
			continue
		}
		out[k] = ov
	}
	return out
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// promDurationRE is a Prometheus duration, as the monitors' interval takes.
	promDurationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	durationRE     = regexp.MustCompile(`^([0-9]+(ns|us|ms|s|m|h))+$`)
	percentRE      = regexp.MustCompile(`^[0-9]+%$`)
)

// Validate returns every problem with v, joined.
func (v Values) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, msg := range validation.IsDNS1123Label(v.Namespace) {
		add("namespace %q: %s", v.Namespace, msg)
	}
	if v.CreateNamespace && IsSystemNamespace(v.Namespace) {
		add("namespace %q: created by Kubernetes, and createNamespace would relabel it Pod Security privileged; "+
			"choose another namespace, or set createNamespace to false and label it yourself", v.Namespace)
	}
	if v.Mode != ModeAgent && v.Mode != ModeInstaller && v.Mode != ModeRevert {
		add("mode %q: want %q, %q or %q", v.Mode, ModeAgent, ModeInstaller, ModeRevert)
	}
	if v.Image.Repository == "" || strings.ContainsAny(v.Image.Repository, " \t\n") {
		add("image.repository %q: want a repository such as %s", v.Image.Repository, DefaultRepository)
	}
	if strings.Contains(v.Image.Repository, "@") {
		add("image.repository %q: put the digest in image.digest", v.Image.Repository)
	}
	if v.Image.Digest != "" && !digestRE.MatchString(v.Image.Digest) {
		add("image.digest %q: want sha256:<64 hex digits>", v.Image.Digest)
	}
	switch v.Image.PullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		add("image.pullPolicy %q: want Always, IfNotPresent or Never", v.Image.PullPolicy)
	}
	if v.Agent.PolicyMode != PolicyObserve && v.Agent.PolicyMode != PolicyEnforce {
		add("agent.policyMode %q: want %q or %q", v.Agent.PolicyMode, PolicyObserve, PolicyEnforce)
	}
	if !durationRE.MatchString(v.Metrics.MinScrapeInterval) {
		add("metrics.minScrapeInterval %q: want a duration such as 5s, or 0s", v.Metrics.MinScrapeInterval)
	}
	if !durationRE.MatchString(v.Agent.Resync) {
		add("agent.resync %q: want a duration such as 30s", v.Agent.Resync)
	}
	switch v.Agent.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add("agent.logLevel %q: want debug, info, warn or error", v.Agent.LogLevel)
	}
	for i, d := range v.Agent.ProxyHelpers.Directories {
		if !slices.Contains(inventory.ProxyStateDirs(), d) {
			add("agent.proxyHelpers.directories[%d] %q: want one the agent reads: %s", i, d,
				strings.Join(inventory.ProxyStateDirs(), ", "))
		}
		if slices.Index(v.Agent.ProxyHelpers.Directories, d) < i {
			add("agent.proxyHelpers.directories[%d] %q: listed twice", i, d)
		}
	}
	if v.Agent.PodIO.Enabled && !v.Agent.PodCgroups {
		add("agent.podIO: needs agent.podCgroups, where the agent finds which pod a cgroup belongs to")
	}
	if v.Agent.BlockedProcesses.Enabled && !v.Agent.HostSys {
		add("agent.blockedProcesses: needs agent.hostSys, the transports that show which servers stalled")
	}
	if p := v.Agent.AppArmorProfile; p != nil {
		switch {
		case p.Type == corev1.AppArmorProfileTypeLocalhost && (p.LocalhostProfile == nil || *p.LocalhostProfile == ""):
			add("agent.appArmorProfile: type Localhost needs localhostProfile, the name of a profile loaded on every node")
		case p.Type == corev1.AppArmorProfileTypeLocalhost:
		case p.Type != corev1.AppArmorProfileTypeRuntimeDefault && p.Type != corev1.AppArmorProfileTypeUnconfined:
			add("agent.appArmorProfile.type %q: want RuntimeDefault, Unconfined or Localhost", p.Type)
		case p.LocalhostProfile != nil:
			add("agent.appArmorProfile.localhostProfile: only with type Localhost")
		}
	}
	if !slices.Contains(metricsTiers, v.Metrics.Tier) {
		add("metrics.tier %q: want %s", v.Metrics.Tier, strings.Join(metricsTiers, " or "))
	}
	for name, dir := range map[string]string{"installer.binDir": v.Installer.BinDir, "installer.configDir": v.Installer.ConfigDir} {
		if !strings.HasPrefix(dir, "/") || strings.Contains(dir, "..") || dir == "/" {
			add("%s %q: want an absolute host directory other than /", name, dir)
		}
	}
	if v.Metrics.PodMonitor.Enabled && v.Metrics.ServiceMonitor.Enabled {
		add("metrics.podMonitor and metrics.serviceMonitor: enable one, or Prometheus scrapes every agent twice")
	}
	if v.Metrics.ServiceMonitor.Enabled && !v.Metrics.Service {
		add("metrics.serviceMonitor: needs metrics.service, the Service it scrapes through")
	}
	for name, d := range map[string]string{"metrics.interval": v.Metrics.Interval, "metrics.scrapeTimeout": v.Metrics.ScrapeTimeout} {
		if !promDurationRE.MatchString(d) {
			add("%s %q: want a Prometheus duration such as 30s", name, d)
		}
	}
	if ns := v.GrafanaDashboard.Namespace; ns != "" {
		for _, msg := range validation.IsDNS1123Label(ns) {
			add("grafanaDashboard.namespace %q: %s", ns, msg)
		}
	}
	if v.GrafanaDashboard.Enabled && len(v.GrafanaDashboard.Labels) == 0 {
		add("grafanaDashboard.labels: empty, so no dashboard sidecar would load the ConfigMap")
	}
	for k, val := range v.GrafanaDashboard.Labels {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(val)...) {
			add("grafanaDashboard.labels %s=%q: %s", k, val, msg)
		}
	}
	if mu := v.MaxUnavailable; mu.Type == intstr.Int && mu.IntVal <= 0 ||
		mu.Type == intstr.String && (!percentRE.MatchString(mu.StrVal) || strings.TrimLeft(mu.StrVal, "0%") == "") {
		add("maxUnavailable %q: want a positive count or percentage", mu.String())
	}
	if v.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(v.PriorityClassName) {
			add("priorityClassName %q: %s", v.PriorityClassName, msg)
		}
	}
	// The agent refuses a policy it cannot parse; refuse it here, before it reaches a node.
	if _, err := policy.Parse("policy", []byte(v.Policy)); err != nil {
		add("policy: %w", err)
	}
	if v.anyRecoveryShutdown() && !v.Agent.HostSys {
		add("policy recovery: needs agent.hostSys, the transports that show which servers stalled")
	}
	if v.anyRecoveryShutdown() && !v.Agent.BlockedProcesses.Enabled {
		add("policy recovery: needs agent.blockedProcesses: without it the agent cannot see every process that holds a superblock, and never shuts one down")
	}
	errs = append(errs, v.validateNodeGroups()...)
	return errors.Join(errs...)
}

// RecoveryShutdown reports whether the agent may shut superblocks down: the policy's
// recovery is on, in enforce mode, with the shutdown action, and agent.policyMode is
// enforce (observe runs the agent with --observe). Only then does the pod mount
// /sys/fs/nfs writable, and the journal's directory (Values.hostWrites).
func (v Values) RecoveryShutdown() bool { return v.recoveryShutdown(v.Policy) }

// anyRecoveryShutdown is RecoveryShutdown for the policy of any node group, the default
// one included.
func (v Values) anyRecoveryShutdown() bool {
	if v.RecoveryShutdown() {
		return true
	}
	for _, g := range v.NodeGroups {
		if v.recoveryShutdown(g.Policy) {
			return true
		}
	}
	return false
}

// recoveryShutdown is RecoveryShutdown for one node group's policy text.
func (v Values) recoveryShutdown(text string) bool { return v.hostWrites(text).nfsWritable }

// groupHostWrites is what a node group's policy asks of the host beyond the bdi directory.
type groupHostWrites struct {
	// nfs: /sys/fs/nfs is mounted (the recovery is on, in any mode), writable when
	// nfsWritable (its shutdown enforced).
	nfs, nfsWritable bool
	// state: the journal's directory is mounted writable (the shutdown, or an adaptive
	// read-ahead that may write, policy.Policy.AdaptiveWrites).
	state bool
}

// hostWrites reads one node group's policy text; a policy that does not parse asks for
// nothing (Validate refuses it).
func (v Values) hostWrites(text string) groupHostWrites {
	p, err := policy.Parse("policy", []byte(text))
	if err != nil {
		return groupHostWrites{}
	}
	r, enforce := p.Recovery, v.Agent.PolicyMode == PolicyEnforce
	shutdown := enforce && r.Enabled && r.Mode == policy.ModeEnforce && r.Action == policy.RecoveryShutdown
	return groupHostWrites{nfs: r.Enabled, nfsWritable: shutdown, state: shutdown || (enforce && p.AdaptiveWrites())}
}

// maxGroupName keeps nfstune-policy-<name> and the pods' names short, and the name a
// label value.
const maxGroupName = 40

// DefaultGroup is the node group of the nodes no NodeGroup selects.
const DefaultGroup = "default"

func (v Values) validateNodeGroups() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(v.NodeGroups) > 0 && v.Mode != ModeAgent {
		add("nodeGroups: only in agent mode")
	}
	seen := map[string]bool{}
	selectors := map[string]string{}
	for i, g := range v.NodeGroups {
		for _, msg := range validation.IsDNS1123Label(g.Name) {
			add("nodeGroups[%d].name %q: %s", i, g.Name, msg)
		}
		switch {
		case len(g.Name) > maxGroupName:
			add("nodeGroups[%d].name %q: longer than %d characters", i, g.Name, maxGroupName)
		case g.Name == DefaultGroup:
			add("nodeGroups[%d].name %q: the nodes of no group are the default group", i, g.Name)
		case seen[g.Name]:
			add("nodeGroups[%d].name %q: listed twice", i, g.Name)
		}
		seen[g.Name] = true
		if len(g.NodeSelector) != 1 {
			add("nodeGroups[%d].nodeSelector: want exactly one label, e.g. {workload.sas.com/class: cas}", i)
		}
		for k, val := range g.NodeSelector {
			for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(val)...) {
				add("nodeGroups[%d].nodeSelector %s=%q: %s", i, k, val, msg)
			}
			if other, ok := selectors[k+"="+val]; ok {
				add("nodeGroups[%d].nodeSelector %s=%q: the same as group %q's, which takes those nodes first", i, k, val, other)
			}
			selectors[k+"="+val] = g.Name
		}
		if _, err := policy.Parse("nodeGroups["+strconv.Itoa(i)+"].policy", []byte(g.Policy)); err != nil {
			add("nodeGroups[%d].policy: %w", i, err)
		}
	}
	return errs
}

// IsSystemNamespace reports whether Kubernetes creates and owns namespace: default and the
// kube- prefix, which the API reserves for the system.
func IsSystemNamespace(namespace string) bool {
	return namespace == "default" || strings.HasPrefix(namespace, "kube-")
}

// ImageRef is the image reference the pods run: repository@digest when pinned, else
// repository:tag with the tag defaulting to version.
func (v Values) ImageRef(version string) string {
	if v.Image.Digest != "" {
		return v.Image.Repository + "@" + v.Image.Digest
	}
	tag := v.Image.Tag
	if tag == "" {
		tag = version
	}
	return v.Image.Repository + ":" + tag
}
