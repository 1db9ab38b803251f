package render

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Object is one rendered Kubernetes object: typed, with apiVersion and kind set.
type Object interface {
	runtime.Object
	metav1.Object
}

// Paths inside the containers. The host's filesystem appears under HostRoot, laid out as
// hostfs.Root expects, so the binary runs with --root=/host.
const (
	HostRoot = "/host"
	// HostProc is the host's procfs, mounted read-only. The agent reads
	// /proc/1/mountinfo, /proc/1/mountstats and /proc/1/net/nfsfs/* below it: pid 1's
	// mount and network namespaces are the host's, where kubelet mounts NFS volumes.
	HostProc = "/proc"
	// HostBDI is the directory the bdi entries live in. /sys/class/bdi/<maj:min> are
	// relative symlinks to ../../devices/virtual/bdi/<maj:min>, which dangle when only
	// /sys/class/bdi is mounted, so the target directory itself is mounted, at the place
	// the symlinks name: /host/sys/class/bdi/<maj:min>/read_ahead_kb is then the real
	// attribute. It is writable only in enforce mode; the other writable host paths are
	// HostNFS, only under the recovery policy's shutdown (read-only when it only observes),
	// and StateDir, under that shutdown or an adaptive read-ahead that writes
	// (Values.hostWrites).
	HostBDI = "/sys/devices/virtual/bdi"
	// BDIMountPath is where HostBDI appears in the container.
	BDIMountPath = HostRoot + "/sys/class/bdi"
	// HostSunrpc is the host's sunrpc sysfs directory, mounted read-only at the same path
	// below HostRoot (agent.hostSys): the agent reads the transports of
	// kernel/sunrpc/xprt-switches there and nothing else of /sys but the bdi mount.
	// Its entries are tagged by network namespace: a sysfs instance shows those of the
	// namespace it was mounted in, so the pod's own /sys shows the pod's, none, and a
	// hostPath of the host's /sys/kernel/sunrpc, which kubelet and the runtime bind-mount
	// from the host's mount namespace, carries the host's sysfs instance and with it the
	// host's transports (kubelet's NFS mounts live in the host's network namespace).
	// Unlike the whole /sys, it holds no submount (cgroup2, securityfs, debugfs, bpf),
	// so a plain read-only bind leaves nothing writable, recursive read-only or not. It
	// is missing before Linux 5.14, and then the pod does not start (the Directory type
	// check): such nodes set agent.hostSys to false.
	HostSunrpc = "/sys/kernel/sunrpc"
	// HostNFS holds the NFS superblocks' sysfs directories, /sys/fs/nfs/<dev>/shutdown
	// among them (Linux 6.6). It is mounted at the same path below HostRoot when the policy's
	// recovery is on, so that the agent sees which superblocks it could shut down, and
	// writable only when the recovery shuts superblocks down (Values.RecoveryShutdown). The
	// directory appears when the nfs module is loaded: until then the agent's pod waits,
	// and kubelet retries.
	HostNFS = "/sys/fs/nfs"
	// HostCgroup is the host's cgroup v2 hierarchy, mounted read-only at the same path below
	// HostRoot (agent.podCgroups): the agent reads the memory and pressure counters of the
	// pods that mount each superblock there (internal/podcgroup), which the pod's own
	// /sys/fs/cgroup, its cgroup namespace's view, does not show. On a cgroup v2 node the
	// hierarchy holds no submount, so the read-only bind leaves nothing writable.
	HostCgroup = "/sys/fs/cgroup"
	// HostTracing is the host's tracefs, mounted read-only at the same path in the agent's
	// own filesystem (agent.podIO): the per-pod collector attaches to the nfs tracepoints by
	// their IDs there and checks their records' layout (internal/podio). A container's
	// /sys has no tracefs of its own.
	HostTracing = "/sys/kernel/tracing"
	// PolicyDir is where the policy ConfigMap is mounted (a directory, not a subPath, so
	// that kubelet's atomic updates reach the agent, which reloads the file).
	PolicyDir = "/etc/nfstune"
	// PolicyFile is the policy's key in the ConfigMap.
	PolicyFile = "policy.yaml"
	// UdevRulesDir is where the installer writes nfstune's udev rule (tune.UdevRulePath).
	UdevRulesDir = "/etc/udev/rules.d"
	// StateDir holds the journal of what the installer changed (tune.JournalPath).
	StateDir = "/var/lib/nfstune"
	// NFSMountDropInDir is where the installer writes nfstune's nfsmount.conf drop-in
	// (tune.NFSMountDropInPath), with installer.nfsmountConf.
	NFSMountDropInDir = "/etc/nfsmount.conf.d"
)

// Object names.
const (
	Name          = "nfstune"
	policyMapName = "nfstune-policy"
	agentName     = "nfstune-agent"
	viewerName    = "nfstune-fleet-viewer"
	serviceName   = "nfstune-metrics"
	installerName = "nfstune-installer"
	validateName  = "nfstune-validate"
	revertName    = "nfstune-revert"
)

// GroupLabel is the agent pods' label that names their node group (DefaultGroup for the
// nodes of no group), and AgentPodSelector selects every agent pod, of every group: what
// kubectl nfstune looks for.
const (
	GroupLabel       = "nfstune.io/node-group"
	AgentPodSelector = "app.kubernetes.io/component=agent,app.kubernetes.io/name=" + Name
)

// releaseRE matches the versions of released images: v1.2.3, v1.2.3-rc.1. An untagged
// build is "dev", and git describe names a commit past a tag v1.2.3-4-gabcdef0; devRE
// matches the Makefile's builds between releases, v1.2.3-dev.gabcdef012345
// (hack/version.sh), which have no released image either.
var (
	releaseRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)
	devRE     = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-dev(\.|$)`)
)

// Render returns the objects for v in apply order (Helm's): Namespace, NetworkPolicy,
// ResourceQuota, ServiceAccount, ConfigMaps (the policy, except in revert mode, which
// reads none, and in agent mode the Grafana dashboard when enabled), Service, then the
// DaemonSets, and in agent mode the Prometheus Operator's PodMonitor, PrometheusRule and
// ServiceMonitor when enabled. version is the default image tag; a version no release
// image has is refused unless v names the image by tag or digest.
func Render(v Values, version string) ([]Object, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	if v.Image.Tag == "" && v.Image.Digest == "" && (!releaseRE.MatchString(version) || devRE.MatchString(version)) {
		return nil, fmt.Errorf("image: no image is released for nfstune version %q; set image.tag or image.digest", version)
	}
	var objs []Object
	if v.CreateNamespace {
		objs = append(objs, namespace(v))
	}
	if v.NetworkPolicy.Enabled {
		objs = append(objs, networkPolicy(v))
	}
	if v.CriticalPodsQuota && isCritical(v.PriorityClassName) {
		objs = append(objs, criticalPodsQuota(v))
	}
	objs = append(objs, serviceAccount(v))
	groups := agentGroups(v)
	switch v.Mode {
	case ModeAgent:
		for _, g := range groups {
			objs = append(objs, policyConfigMap(v, g.policyMap, g.policy))
		}
	case ModeInstaller:
		objs = append(objs, policyConfigMap(v, policyMapName, v.Policy))
	}
	if v.Mode == ModeAgent && v.GrafanaDashboard.Enabled {
		objs = append(objs, dashboardConfigMap(v))
	}
	if v.Mode == ModeAgent && v.FleetViewer.ClusterRole.Create {
		objs = append(objs, viewerClusterRole(), viewerRole(v))
	}
	switch v.Mode {
	case ModeAgent:
		// Service before DaemonSet: the order Helm installs kinds in.
		if v.Metrics.Service {
			objs = append(objs, metricsService(v))
		}
		for _, g := range groups {
			objs = append(objs, agentDaemonSet(v, version, g))
		}
		// The Prometheus Operator's kinds last, as Helm installs kinds it does not know.
		if v.Metrics.PodMonitor.Enabled {
			objs = append(objs, podMonitor(v))
		}
		if v.PrometheusRule.Enabled {
			r, err := prometheusRule(v)
			if err != nil {
				return nil, err
			}
			objs = append(objs, r)
		}
		if v.Metrics.ServiceMonitor.Enabled {
			objs = append(objs, serviceMonitor(v))
		}
	case ModeInstaller:
		objs = append(objs, installerDaemonSet(v, version))
		if v.Installer.Validate {
			objs = append(objs, validateDaemonSet(v, version))
		}
	case ModeRevert:
		objs = append(objs, revertDaemonSet(v, version))
	}
	return objs, nil
}

func labels(component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      Name,
		"app.kubernetes.io/component": component,
	}
}

func meta(v Values, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: v.Namespace, Labels: labels(component)}
}

// namespace needs Pod Security "privileged": Baseline already rejects every hostPath
// volume, which reading the host's /proc and writing its bdi attributes require.
func namespace(v Values) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{
			Name: v.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":             Name,
				"pod-security.kubernetes.io/enforce": "privileged",
				// Warn and audit at baseline, so that the hostPath use stays visible.
				"pod-security.kubernetes.io/warn":  "baseline",
				"pod-security.kubernetes.io/audit": "baseline",
			},
		},
	}
}

// isCritical reports whether a priority class is one of the built-in critical classes,
// which some clusters reserve for kube-system.
func isCritical(class string) bool {
	return class == "system-node-critical" || class == "system-cluster-critical"
}

// criticalPodsQuota admits pods of the critical priority classes in the namespace, where
// the cluster limits their consumption by default (GKE, and any cluster that configures
// the ResourceQuota admission plugin's limitedResources that way). The limit covers two
// DaemonSets on a 5000-node cluster; it admits rather than limits.
func criticalPodsQuota(v Values) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: meta(v, "nfstune-critical-pods", "agent"),
		Spec: corev1.ResourceQuotaSpec{
			Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10000")},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass,
				Operator:  corev1.ScopeSelectorOpIn,
				Values:    []string{v.PriorityClassName},
			}}},
		},
	}
}

// networkPolicy isolates every nfstune pod: the agent serves only its metrics port, and no
// nfstune container opens a connection (it reads /proc and /sys, calls no API, resolves
// no name).
func networkPolicy(v Values) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta(v, Name, "agent"),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": Name}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{
					Protocol: new(corev1.ProtocolTCP),
					Port:     new(intstr.FromInt32(MetricsPort)),
				}},
				From: v.NetworkPolicy.From,
			}},
		},
	}
}

// serviceAccount has no API token: no nfstune pod calls the API.
func serviceAccount(v Values) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   meta(v, Name, "agent"),
		AutomountServiceAccountToken: new(false),
	}
}

func policyConfigMap(v Values, name, policy string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(v, name, "policy"),
		Data:       map[string]string{PolicyFile: policy},
	}
}

// agentGroup is one agent DaemonSet: the default group (the nodes of no NodeGroup) or one
// of Values.NodeGroups.
type agentGroup struct {
	name, daemonSet, policyMap, policy string
	// selector is the DaemonSet's pod selector. The default group's is that of releases
	// before node groups, as a DaemonSet's selector cannot change; its pods carry the
	// GroupLabel all the same.
	selector     map[string]string
	nodeSelector map[string]string
	// exclude keeps the DaemonSet off the nodes of the groups before it (every group, for
	// the default one), so that each node runs one agent.
	exclude []corev1.NodeSelectorRequirement
}

// agentGroups returns the default group, then v.NodeGroups in order.
func agentGroups(v Values) []agentGroup {
	groups := []agentGroup{{name: DefaultGroup, daemonSet: agentName, policyMap: policyMapName, policy: v.Policy,
		selector: labels("agent"), nodeSelector: v.NodeSelector}}
	var earlier []corev1.NodeSelectorRequirement
	for _, g := range v.NodeGroups {
		sel := labels("agent")
		sel[GroupLabel] = g.Name
		ns := maps.Clone(v.NodeSelector)
		if ns == nil {
			ns = map[string]string{}
		}
		maps.Copy(ns, g.NodeSelector)
		groups = append(groups, agentGroup{name: g.Name, daemonSet: agentName + "-" + g.Name,
			policyMap: policyMapName + "-" + g.Name, policy: g.Policy, selector: sel, nodeSelector: ns,
			exclude: slices.Clone(earlier)})
		for _, k := range slices.Sorted(maps.Keys(g.NodeSelector)) {
			earlier = append(earlier, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpNotIn, Values: []string{g.NodeSelector[k]}})
		}
	}
	groups[0].exclude = earlier
	return groups
}

// excludeNodes adds exclude to every required node selector term of a (one term of its
// own when a has none): the terms are ORed, so each must keep off those nodes.
func excludeNodes(a *corev1.Affinity, exclude []corev1.NodeSelectorRequirement) *corev1.Affinity {
	if len(exclude) == 0 {
		return a
	}
	if a = a.DeepCopy(); a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		req = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchExpressions = append(req.NodeSelectorTerms[i].MatchExpressions, exclude...)
	}
	return a
}

// viewerClusterRole lets kubectl nfstune list the nodes; viewerRole lets it find the agent
// pods and ask each agent through the API server's pod proxy (GET only), in the
// namespace alone. They are built untyped, as the monitoring objects are, so that
// k8s.io/api/rbac/v1 stays out of the binary for two small objects; the tests decode
// them strictly into its types.
func viewerClusterRole() *unstructured.Unstructured {
	return rbacObject("ClusterRole", "", rbacRule("nodes", "get", "list"))
}

func viewerRole(v Values) *unstructured.Unstructured {
	return rbacObject("Role", v.Namespace, rbacRule("pods", "get", "list"), rbacRule("pods/proxy", "get"))
}

func rbacObject(kind, namespace string, rules ...any) *unstructured.Unstructured {
	l := map[string]any{}
	for k, val := range labels("fleet-viewer") {
		l[k] = val
	}
	md := map[string]any{"name": viewerName, "labels": l}
	if namespace != "" {
		md["namespace"] = namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": md, "rules": rules,
	}}
}

// rbacRule grants verbs on a resource of the core API group.
func rbacRule(resource string, verbs ...string) map[string]any {
	vs := make([]any, len(verbs))
	for i, v := range verbs {
		vs[i] = v
	}
	return map[string]any{"apiGroups": []any{""}, "resources": []any{resource}, "verbs": vs}
}

// PtraceCapability is the one capability the agent may be given (agent.blockedProcesses):
// the kernel's ptrace read access, which reading another user's or a more capable
// process's /proc/<pid>/fdinfo, cwd and root takes.
const PtraceCapability corev1.Capability = "SYS_PTRACE"

// PodIOCapabilities are what the per-pod NFS I/O collector takes (agent.podIO): CAP_BPF
// to load its programs and maps, CAP_PERFMON to attach tracing programs (Linux 5.8;
// include/uapi/linux/capability.h).
var PodIOCapabilities = []corev1.Capability{"BPF", "PERFMON"}

// containerSecurity is the security context of every container: root in the initial user
// namespace (the bdi attributes are root-owned 0644 and need no capability), nothing else.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                new(int64(0)),
		RunAsGroup:               new(int64(0)),
		RunAsNonRoot:             new(false),
		Privileged:               new(false),
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func hostPathVolume(name, hostPath string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: hostPath, Type: new(typ)},
	}}
}

func policyVolume(configMap string) corev1.Volume {
	return corev1.Volume{Name: "policy", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
	}}
}

// readVolumes are the host paths every nfstune container reads: /proc and the bdi
// directory, and with hostSys the host's sunrpc directory. bdiWritable makes the bdi
// mount writable. The bdi and sunrpc mounts are siblings below /host/sys, neither inside
// the other.
func readVolumes(bdiWritable, hostSys bool) ([]corev1.Volume, []corev1.VolumeMount) {
	vols := []corev1.Volume{hostPathVolume("host-proc", HostProc, corev1.HostPathDirectory)}
	mounts := []corev1.VolumeMount{{Name: "host-proc", MountPath: HostRoot + HostProc, ReadOnly: true}}
	if hostSys {
		vols = append(vols, hostPathVolume("host-sunrpc", HostSunrpc, corev1.HostPathDirectory))
		mounts = append(mounts, corev1.VolumeMount{Name: "host-sunrpc", MountPath: HostRoot + HostSunrpc, ReadOnly: true})
	}
	vols = append(vols, hostPathVolume("host-bdi", HostBDI, corev1.HostPathDirectory))
	mounts = append(mounts, corev1.VolumeMount{Name: "host-bdi", MountPath: BDIMountPath, ReadOnly: !bdiWritable})
	return vols, mounts
}

// proxyHelperVolumes mount each of the NFS proxy helpers' directories read-only at its
// path below HostRoot, where the agent reads it. The hostPath type is unset, not
// Directory: a node without the helper must still run the agent.
func proxyHelperVolumes(dirs []string) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for i, d := range dirs {
		name := "proxy-state-" + strconv.Itoa(i)
		vols = append(vols, hostPathVolume(name, d, corev1.HostPathUnset))
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: HostRoot + d, ReadOnly: true})
	}
	return vols, mounts
}

// podSpec is the scheduling and security frame shared by the DaemonSets.
func podSpec(v Values) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           Name,
		AutomountServiceAccountToken: new(false),
		PriorityClassName:            v.PriorityClassName,
		NodeSelector:                 v.NodeSelector,
		Affinity:                     v.Affinity,
		Tolerations:                  v.Tolerations,
		SecurityContext: &corev1.PodSecurityContext{
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationGracePeriodSeconds: new(int64(10)),
	}
}

func nodeNameEnv() []corev1.EnvVar {
	return []corev1.EnvVar{{
		Name: "NODE_NAME",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: "spec.nodeName",
		}},
	}}
}

// agentEnv is nodeNameEnv and the agent's own pod UID (POD_UID, --pod-uid): the recovery
// policy acts only once its process scan has found that pod's processes.
func agentEnv() []corev1.EnvVar {
	return append(nodeNameEnv(), corev1.EnvVar{
		Name: "POD_UID",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: "metadata.uid",
		}},
	})
}

// daemonSet is a DaemonSet of pod, selecting its pods by selector; podLabels adds labels
// to the pods.
func daemonSet(v Values, name, component string, selector, podLabels map[string]string, pod corev1.PodSpec, annotations map[string]string) *appsv1.DaemonSet {
	maxUnavailable := v.MaxUnavailable
	template := maps.Clone(selector)
	maps.Copy(template, podLabels)
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: meta(v, name, component),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: template, Annotations: annotations},
				Spec:       pod,
			},
		},
	}
}

// agentDaemonSet runs the agent on the nodes of group g, with g's policy.
func agentDaemonSet(v Values, version string, g agentGroup) *appsv1.DaemonSet {
	vols, mounts := readVolumes(v.Agent.PolicyMode == PolicyEnforce, v.Agent.HostSys)
	if v.Agent.ProxyHelpers.Enabled {
		pv, pm := proxyHelperVolumes(v.Agent.ProxyHelpers.Directories)
		vols, mounts = append(vols, pv...), append(mounts, pm...)
	}
	if v.Agent.PodCgroups {
		vols = append(vols, hostPathVolume("host-cgroup", HostCgroup, corev1.HostPathDirectory))
		mounts = append(mounts, corev1.VolumeMount{Name: "host-cgroup", MountPath: HostRoot + HostCgroup, ReadOnly: true})
	}
	if v.Agent.PodIO.Enabled {
		vols = append(vols, hostPathVolume("host-tracing", HostTracing, corev1.HostPathDirectory))
		mounts = append(mounts, corev1.VolumeMount{Name: "host-tracing", MountPath: HostTracing, ReadOnly: true})
	}
	hw := v.hostWrites(g.policy)
	if hw.nfs {
		vols = append(vols, hostPathVolume("host-nfs", HostNFS, corev1.HostPathDirectory))
		mounts = append(mounts, corev1.VolumeMount{Name: "host-nfs", MountPath: HostRoot + HostNFS, ReadOnly: !hw.nfsWritable})
	}
	if hw.state {
		vols = append(vols, hostPathVolume("host-state", StateDir, corev1.HostPathDirectoryOrCreate))
		mounts = append(mounts, corev1.VolumeMount{Name: "host-state", MountPath: HostRoot + StateDir})
	}
	vols = append(vols, policyVolume(g.policyMap))
	mounts = append(mounts, corev1.VolumeMount{Name: "policy", MountPath: PolicyDir, ReadOnly: true})

	probe := func(p string, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: p, Port: intstr.FromString("metrics"),
			}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: 3,
		}
	}
	pod := podSpec(v)
	pod.NodeSelector = g.nodeSelector
	pod.Affinity = excludeNodes(v.Affinity, g.exclude)
	pod.Volumes = vols
	pod.Containers = []corev1.Container{{
		Name:            "agent",
		Image:           v.ImageRef(version),
		ImagePullPolicy: v.Image.PullPolicy,
		Args:            agentArgs(v, g.name),
		Env:             agentEnv(),
		Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP}},
		Resources:       v.Resources,
		LivenessProbe:   probe("/healthz", 20),
		ReadinessProbe:  probe("/readyz", 10),
		VolumeMounts:    mounts,
		SecurityContext: agentSecurity(v),
	}}
	var ann map[string]string
	if v.Metrics.PodAnnotations {
		ann = map[string]string{
			"prometheus.io/scrape": "true",
			"prometheus.io/port":   strconv.Itoa(MetricsPort),
			"prometheus.io/path":   "/metrics",
		}
	}
	return daemonSet(v, g.daemonSet, "agent", g.selector, map[string]string{GroupLabel: g.name}, pod, ann)
}

// agentSecurity is containerSecurity with, under agent.blockedProcesses, the ptrace
// capability, under agent.podIO the collector's, and agent.appArmorProfile.
func agentSecurity(v Values) *corev1.SecurityContext {
	sc := containerSecurity()
	if v.Agent.BlockedProcesses.Enabled {
		sc.Capabilities.Add = append(sc.Capabilities.Add, PtraceCapability)
	}
	if v.Agent.PodIO.Enabled {
		sc.Capabilities.Add = append(sc.Capabilities.Add, PodIOCapabilities...)
	}
	if p := v.Agent.AppArmorProfile; p != nil {
		sc.AppArmorProfile = p.DeepCopy()
	}
	return sc
}

// agentArgs are the agent's flags for node group group. --pid=1 follows the host's mount
// and network namespaces through the host's /proc.
func agentArgs(v Values, group string) []string {
	args := []string{
		"agent",
		"--root=" + HostRoot,
		"--pid=1",
		"--config=" + path.Join(PolicyDir, PolicyFile),
		"--policy-name=" + group,
	}
	if v.Agent.PolicyMode == PolicyObserve {
		args = append(args, "--observe")
	}
	args = append(args,
		"--resync="+v.Agent.Resync,
		// The pod has its own network namespace: this is the pod IP, not the node's.
		"--listen=:"+strconv.Itoa(MetricsPort),
		"--log-level="+v.Agent.LogLevel,
		"--log-format=json",
		"--metrics="+v.Metrics.Tier,
		"--min-scrape-interval="+v.Metrics.MinScrapeInterval,
	)
	if v.Agent.PodIO.Enabled {
		args = append(args, "--pod-io")
	}
	return args
}

// metricsService is headless: Prometheus scrapes every agent pod, not one behind a VIP.
func metricsService(v Values) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(v, serviceName, "agent"),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels("agent"),
			Ports: []corev1.ServicePort{{
				Name: "metrics", Port: MetricsPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// PauseUID is the user the pause containers run as: nobody, since they touch no file.
const PauseUID = 65534

// pauseContainer keeps a DaemonSet pod alive after its init containers did the work,
// using the nfstune binary itself so that no second image is needed. It mounts nothing
// and writes nothing, so it runs as nobody.
func pauseContainer(v Values, version string) corev1.Container {
	sc := containerSecurity()
	sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = new(int64(PauseUID)), new(int64(PauseUID)), new(true)
	return corev1.Container{
		Name:            "pause",
		Image:           v.ImageRef(version),
		ImagePullPolicy: v.Image.PullPolicy,
		Args:            []string{"k8s", "pause"},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("1m"),
				corev1.ResourceMemory:           resource.MustParse("8Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("1Mi"),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("10m"),
				corev1.ResourceMemory:           resource.MustParse("16Mi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("16Mi"),
			},
		},
		SecurityContext: sc,
	}
}

// installerDaemonSet copies the binary, the policy and nfstune's udev rule onto the node
// from an init container, then idles. The host directories are the only mounts, all
// below HostRoot at their host paths: the binary and policy directories, the udev rules
// directory, and nfstune's state directory, whose journal lets revertDaemonSet, or
// `nfstune revert` on the node, remove the rule.
func installerDaemonSet(v Values, version string) *appsv1.DaemonSet {
	pod := podSpec(v)
	vols, mounts := installerHostDirs(v)
	pod.Volumes = append(vols, policyVolume(policyMapName))
	pod.InitContainers = []corev1.Container{{
		Name:            "install",
		Image:           v.ImageRef(version),
		ImagePullPolicy: v.Image.PullPolicy,
		Args: []string{
			"k8s", "install-node",
			"--root=" + HostRoot,
			"--bin-dir=" + v.Installer.BinDir,
			"--config-dir=" + v.Installer.ConfigDir,
			"--policy=" + path.Join(PolicyDir, PolicyFile),
		},
		Env:             nodeNameEnv(),
		Resources:       v.Resources,
		VolumeMounts:    append(mounts, corev1.VolumeMount{Name: "policy", MountPath: PolicyDir, ReadOnly: true}),
		SecurityContext: containerSecurity(),
	}}
	if v.Installer.NFSMountConf {
		// mount.nfs, to tell which nfsmount.conf files it reads.
		pod.Volumes = append(pod.Volumes,
			hostPathVolume("host-sbin", "/sbin", corev1.HostPathDirectory),
			hostPathVolume("host-usr-sbin", "/usr/sbin", corev1.HostPathDirectory))
		c := &pod.InitContainers[0]
		c.Args = append(c.Args, "--nfsmount-conf")
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: "host-sbin", MountPath: HostRoot + "/sbin", ReadOnly: true},
			corev1.VolumeMount{Name: "host-usr-sbin", MountPath: HostRoot + "/usr/sbin", ReadOnly: true})
	}
	pod.Containers = []corev1.Container{pauseContainer(v, version)}
	return daemonSet(v, installerName, "installer", labels("installer"), nil, pod, nil)
}

// installerHostDirs are the host directories the installer writes and revert mode undoes,
// writable at their host paths below HostRoot: the binary's, the policy's, the udev rules',
// nfstune's state (the journal and the record of the copies), and with
// installer.nfsmountConf the nfsmount.conf drop-in's.
func installerHostDirs(v Values) ([]corev1.Volume, []corev1.VolumeMount) {
	vols := []corev1.Volume{
		hostPathVolume("host-bin", v.Installer.BinDir, corev1.HostPathDirectoryOrCreate),
		hostPathVolume("host-config", v.Installer.ConfigDir, corev1.HostPathDirectoryOrCreate),
		hostPathVolume("host-rules", UdevRulesDir, corev1.HostPathDirectory),
		hostPathVolume("host-state", StateDir, corev1.HostPathDirectoryOrCreate),
	}
	mounts := []corev1.VolumeMount{
		{Name: "host-bin", MountPath: HostRoot + v.Installer.BinDir},
		{Name: "host-config", MountPath: HostRoot + v.Installer.ConfigDir},
		{Name: "host-rules", MountPath: HostRoot + UdevRulesDir},
		{Name: "host-state", MountPath: HostRoot + StateDir},
	}
	if v.Installer.NFSMountConf {
		vols = append(vols, hostPathVolume("host-nfsmount", NFSMountDropInDir, corev1.HostPathDirectoryOrCreate))
		mounts = append(mounts, corev1.VolumeMount{Name: "host-nfsmount", MountPath: HostRoot + NFSMountDropInDir})
	}
	return vols, mounts
}

// revertDaemonSet undoes installer mode on each node from an init container, then idles:
// `nfstune k8s revert-node` reverts the journal in StateDir (the udev rule, the
// nfsmount.conf drop-in) and removes the binary and the policy the installer copied, as
// recorded there. It mounts the installer's host directories, all writable, at the same
// places, and no policy. The installer's own directories are DirectoryOrCreate, not
// Directory: the pod must start on every selected node, also one the installer never
// reached, or the rollout (`helm upgrade --wait`) never completes; on such a node kubelet
// creates them, empty, as a reverted node's are left.
func revertDaemonSet(v Values, version string) *appsv1.DaemonSet {
	pod := podSpec(v)
	var mounts []corev1.VolumeMount
	pod.Volumes, mounts = installerHostDirs(v)
	pod.InitContainers = []corev1.Container{{
		Name:            "revert",
		Image:           v.ImageRef(version),
		ImagePullPolicy: v.Image.PullPolicy,
		Args:            []string{"k8s", "revert-node", "--root=" + HostRoot},
		Env:             nodeNameEnv(),
		Resources:       v.Resources,
		VolumeMounts:    mounts,
		SecurityContext: containerSecurity(),
	}}
	pod.Containers = []corev1.Container{pauseContainer(v, version)}
	ds := daemonSet(v, revertName, "revert", labels("revert"), nil, pod, nil)
	ds.Spec.UpdateStrategy.RollingUpdate = revertRollingUpdate()
	return ds
}

// revertRollingUpdate lets no revert pod be unavailable, surging one instead (the API
// refuses both at 0): `helm upgrade --wait` counts a DaemonSet ready once all but
// maxUnavailable of its pods are, rounded up (helm's pkg/kube/ready.go, daemonSetReady),
// which with the chart's 10% would let it return with one node in ten not reverted, and
// on a single node before that node is.
func revertRollingUpdate() *appsv1.RollingUpdateDaemonSet {
	return &appsv1.RollingUpdateDaemonSet{MaxUnavailable: new(intstr.FromInt32(0)), MaxSurge: new(intstr.FromInt32(1))}
}

// validateDaemonSet prints each node's NFS mounts with their read-ahead, as JSON, from an
// init container (`kubectl logs -l app.kubernetes.io/component=validate -c audit`). It
// only reads.
func validateDaemonSet(v Values, version string) *appsv1.DaemonSet {
	vols, mounts := readVolumes(false, false)
	vols = append(vols, policyVolume(policyMapName))
	mounts = append(mounts, corev1.VolumeMount{Name: "policy", MountPath: PolicyDir, ReadOnly: true})
	pod := podSpec(v)
	pod.Volumes = vols
	pod.InitContainers = []corev1.Container{{
		Name:            "audit",
		Image:           v.ImageRef(version),
		ImagePullPolicy: v.Image.PullPolicy,
		Args: []string{"audit", "--root=" + HostRoot, "--pid=1", "--config=" + path.Join(PolicyDir, PolicyFile),
			"-o", "json", "--fail-on=none"},
		Env:             nodeNameEnv(),
		Resources:       v.Resources,
		VolumeMounts:    mounts,
		SecurityContext: containerSecurity(),
	}}
	pod.Containers = []corev1.Container{pauseContainer(v, version)}
	return daemonSet(v, validateName, "validate", labels("validate"), nil, pod, nil)
}
