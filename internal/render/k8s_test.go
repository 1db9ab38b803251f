package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/golden"
	"github.com/nfstune/nfstune/internal/metrics"
)

// renderCases are the values files with golden manifests; the chart test renders the same.
var renderCases = []string{"agent-default", "agent-enforce-cas", "agent-monitoring", "agent-proxy-helpers", "agent-blocked-processes", "agent-pod-io", "agent-recovery", "agent-recovery-observe", "agent-adaptive", "agent-node-groups", "agent-node-groups-only", "installer", "installer-nfsmount", "revert", "revert-nfsmount"}

func renderFile(t *testing.T, name, format string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadValues("values.yaml", b)
	if err != nil {
		t.Fatalf("LoadValues: %v", err)
	}
	objs, err := Render(v, "v0.0.0-test")
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	var out bytes.Buffer
	if err := Write(&out, format, objs); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	for _, name := range renderCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := renderFile(t, name, FormatYAML)
			golden.Check(t, filepath.Join("testdata", name+".golden.yaml"), got)
		})
	}
}

// DecodeStrict decodes one object by its kind into its k8s.io/api type, rejecting unknown
// fields. It is how tests read manifests back, whoever rendered them.
func decodeStrict(doc []byte) (Object, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var o Object
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Namespace":
		o = &corev1.Namespace{}
	case "v1/ServiceAccount":
		o = &corev1.ServiceAccount{}
	case "v1/ConfigMap":
		o = &corev1.ConfigMap{}
	case "v1/ResourceQuota":
		o = &corev1.ResourceQuota{}
	case "v1/Service":
		o = &corev1.Service{}
	case "v1/PersistentVolume":
		o = &corev1.PersistentVolume{}
	case "v1/PersistentVolumeClaim":
		o = &corev1.PersistentVolumeClaim{}
	case "apps/v1/DaemonSet":
		o = &appsv1.DaemonSet{}
	case "networking.k8s.io/v1/NetworkPolicy":
		o = &networkingv1.NetworkPolicy{}
	case "storage.k8s.io/v1/StorageClass":
		o = &storagev1.StorageClass{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		o = &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/Role":
		o = &rbacv1.Role{}
	case "monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule":
		// Custom resources have no Go types: decoded as they are (TestMonitoringObjects
		// checks their content).
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", tm.Kind, err)
		}
		return u, nil
	default:
		return nil, fmt.Errorf("unexpected object %s %s", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, o); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return o, nil
}

// splitDocs splits a multi-document YAML stream, dropping empty documents and comments-only
// ones (helm template writes "# Source:" headers).
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range strings.Split("\n"+string(b), "\n---") {
		body := strings.TrimSpace(d)
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				lines = append(lines, l)
			}
		}
		if strings.TrimSpace(strings.Join(lines, "\n")) != "" {
			docs = append(docs, []byte(body+"\n"))
		}
	}
	return docs
}

func decodeAll(t *testing.T, b []byte) []Object {
	t.Helper()
	var objs []Object
	for _, d := range splitDocs(b) {
		o, err := decodeStrict(d)
		if err != nil {
			t.Fatalf("decoding %q: %v", d, err)
		}
		objs = append(objs, o)
	}
	return objs
}

func kinds(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
	return out
}

func TestRenderDecodesStrictly(t *testing.T) {
	t.Parallel()
	wantKinds := map[string][]string{
		"agent-default":           {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "Service/nfstune-metrics", "DaemonSet/nfstune-agent"},
		"agent-monitoring":        {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "ConfigMap/nfstune-dashboard", "Service/nfstune-metrics", "DaemonSet/nfstune-agent", "PodMonitor/nfstune-agent", "PrometheusRule/nfstune"},
		"agent-enforce-cas":       {"Namespace/nfstune-system", "NetworkPolicy/nfstune", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "DaemonSet/nfstune-agent"},
		"agent-proxy-helpers":     {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "Service/nfstune-metrics", "DaemonSet/nfstune-agent"},
		"agent-blocked-processes": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "Service/nfstune-metrics", "DaemonSet/nfstune-agent"},
		"agent-pod-io":            {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "Service/nfstune-metrics", "DaemonSet/nfstune-agent"},
		"agent-recovery":          {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "Service/nfstune-metrics", "DaemonSet/nfstune-agent"},
		"agent-recovery-observe":  {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "Service/nfstune-metrics", "DaemonSet/nfstune-agent"},
		"agent-adaptive": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune",
			"ConfigMap/nfstune-policy", "ConfigMap/nfstune-policy-batch", "Service/nfstune-metrics", "DaemonSet/nfstune-agent", "DaemonSet/nfstune-agent-batch"},
		"installer-nfsmount": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "DaemonSet/nfstune-installer"},
		"agent-node-groups": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune",
			"ConfigMap/nfstune-policy", "ConfigMap/nfstune-policy-cas", "ConfigMap/nfstune-policy-system",
			"ClusterRole/nfstune-fleet-viewer", "Role/nfstune-fleet-viewer", "Service/nfstune-metrics",
			"DaemonSet/nfstune-agent", "DaemonSet/nfstune-agent-cas", "DaemonSet/nfstune-agent-system"},
		"agent-node-groups-only": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune",
			"ConfigMap/nfstune-policy", "ConfigMap/nfstune-policy-gpu", "Service/nfstune-metrics", "DaemonSet/nfstune-agent", "DaemonSet/nfstune-agent-gpu"},
		"installer": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "ConfigMap/nfstune-policy", "DaemonSet/nfstune-installer", "DaemonSet/nfstune-validate"},
		// No policy, which the revert reads none of, and no validator: the DaemonSet alone.
		"revert":          {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "DaemonSet/nfstune-revert"},
		"revert-nfsmount": {"Namespace/nfstune", "NetworkPolicy/nfstune", "ResourceQuota/nfstune-critical-pods", "ServiceAccount/nfstune", "DaemonSet/nfstune-revert"},
	}
	for _, name := range renderCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs := decodeAll(t, renderFile(t, name, FormatYAML))
			if diff := cmp.Diff(wantKinds[name], kinds(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			// JSON: one v1 List whose items decode the same way, unknown fields rejected.
			var list struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Items      []json.RawMessage `json:"items"`
			}
			dec := json.NewDecoder(bytes.NewReader(renderFile(t, name, FormatJSON)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&list); err != nil {
				t.Fatal(err)
			}
			if list.Kind != "List" || list.APIVersion != "v1" || len(list.Items) != len(objs) {
				t.Fatalf("json: %s %s with %d items, want v1 List with %d", list.APIVersion, list.Kind, len(list.Items), len(objs))
			}
			for i, item := range list.Items {
				o, err := decodeStrict(item)
				if err != nil {
					t.Fatalf("json item %d: %v", i, err)
				}
				if diff := cmp.Diff(toMap(t, objs[i]), toMap(t, o)); diff != "" {
					t.Errorf("json item %d differs from yaml (-yaml +json):\n%s", i, diff)
				}
			}
		})
	}
}

// toMap is a value's canonical JSON form, so that quantities written "100Mi" and
// "104857600" compare equal.
func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRenderNamespacePodSecurity(t *testing.T) {
	t.Parallel()
	objs := decodeAll(t, renderFile(t, "agent-default", FormatYAML))
	ns := objs[0].(*corev1.Namespace)
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("enforce level = %q, want privileged (Baseline rejects hostPath volumes)", got)
	}
}

func TestRenderImagePinnedByDigest(t *testing.T) {
	t.Parallel()
	objs := decodeAll(t, renderFile(t, "agent-enforce-cas", FormatYAML))
	ds := objs[4].(*appsv1.DaemonSet)
	want := "registry.example.com/platform/nfstune@sha256:0f3e9d6c2a1b4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7"
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("image = %q, want %q", got, want)
	}
}

func TestLoadValuesInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []string // substrings every one of which the joined error must contain
	}{
		{"invalid-unknown-key", []string{`values.yaml:2: hostNetwork: unknown key`}},
		{"invalid-miscased-key", []string{`values.yaml:4: agent.policymode: unknown key (did you mean "policyMode"?)`}},
		{"invalid-values", []string{
			`namespace "NFS_Tune"`, `mode "sidecar"`, `image.digest "sha256:short"`,
			`agent.policyMode "fix"`, `agent.resync "soon"`, `installer.binDir "relative/bin"`,
			`maxUnavailable "0"`, "policy: policy:", `metrics.tier "all"`,
			`agent.proxyHelpers.directories[0] "/etc": want one the agent reads`,
			`agent.proxyHelpers.directories[2] "/var/run/efs": listed twice`,
			"agent.blockedProcesses: needs agent.hostSys",
			"agent.podIO: needs agent.podCgroups",
			"agent.appArmorProfile: type Localhost needs localhostProfile",
		}},
		{"invalid-recovery", []string{
			"policy recovery: needs agent.blockedProcesses",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", tt.file+".values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadValues("values.yaml", b)
			if err == nil {
				t.Fatal("LoadValues accepted invalid values")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestImageRef(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		img  Image
		want string
	}{
		{"default tag is the version", Image{Repository: "r/n"}, "r/n:v1.2.3"},
		{"explicit tag", Image{Repository: "r/n", Tag: "edge"}, "r/n:edge"},
		{"digest wins", Image{Repository: "r/n", Tag: "edge", Digest: "sha256:" + strings.Repeat("a", 64)}, "r/n@sha256:" + strings.Repeat("a", 64)},
	}
	for _, tt := range tests {
		if got := (Values{Image: tt.img}).ImageRef("v1.2.3"); got != tt.want {
			t.Errorf("%s: ImageRef = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func FuzzLoadValues(f *testing.F) {
	for _, name := range []string{"agent-default", "agent-enforce-cas", "installer", "invalid-values"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".values.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := LoadValues("values.yaml", b)
		if err != nil {
			return
		}
		// Whatever validates must render.
		if _, err := Render(v, "v0.0.0"); err != nil {
			t.Fatalf("valid values failed to render: %v", err)
		}
	})
}

// TestChartValuesAreDefaults keeps the chart's values.yaml equal to DefaultValues.
func TestChartValuesAreDefaults(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "nfstune", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chart, err := LoadValues("values.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(toMap(t, DefaultValues()), toMap(t, chart)); diff != "" {
		t.Errorf("chart values.yaml differ from DefaultValues (-go +chart):\n%s", diff)
	}
}

// TestRenderRefusesSystemNamespace: the Namespace object would relabel a namespace
// Kubernetes owns as Pod Security privileged.
func TestRenderRefusesSystemNamespace(t *testing.T) {
	t.Parallel()
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "default"} {
		v := DefaultValues()
		v.Namespace = ns
		_, err := Render(v, "v0.0.0")
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("namespace %q: created by Kubernetes", ns)) {
			t.Errorf("namespace %s with createNamespace: err = %v, want a refusal", ns, err)
		}
		// Managed elsewhere: nfstune deploys into it and emits no Namespace object.
		v.CreateNamespace = false
		objs, err := Render(v, "v0.0.0")
		if err != nil {
			t.Fatalf("namespace %s without createNamespace: %v", ns, err)
		}
		for _, o := range objs {
			if _, ok := o.(*corev1.Namespace); ok {
				t.Errorf("namespace %s without createNamespace: a Namespace object is rendered", ns)
			}
		}
	}
	v := DefaultValues()
	v.Namespace = "kubeflow-tools" // only the kube- prefix is reserved
	if _, err := Render(v, "v0.0.0"); err != nil {
		t.Errorf("namespace kubeflow-tools: %v", err)
	}
}

// TestRenderRefusesUnreleasedVersion: an untagged, git-describe or Makefile pre-release
// build (hack/version.sh) has no image of its own version, and a default tag naming one
// would not pull or pull a stale image.
func TestRenderRefusesUnreleasedVersion(t *testing.T) {
	t.Parallel()
	for version, ok := range map[string]bool{
		"dev": false, "v0.1.0-3-gabcdef0": false, "v0.1.0-3-gabcdef0-dirty": false, "cf16076": false,
		"v0.1.0-dev.g926099a91146": false, "v0.1.0-dev.g926099a91146.dirty": false, "v0.1.0-dev": false,
		"v0.1.0": true, "v1.2.3-rc.1": true,
	} {
		_, err := Render(DefaultValues(), version)
		if (err == nil) != ok {
			t.Errorf("version %s without image tag or digest: err = %v, want ok %v", version, err, ok)
		}
	}
	v := DefaultValues()
	v.Image.Tag = "edge"
	if _, err := Render(v, "dev"); err != nil {
		t.Errorf("dev build with image.tag: %v", err)
	}
}

// TestRenderNetworkPolicy: on by default, every nfstune pod gets no egress and ingress
// only to the metrics port, from pods of every namespace.
func TestRenderNetworkPolicy(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeAgent, ModeInstaller, ModeRevert} {
		v := DefaultValues()
		v.Mode = mode
		objs, err := Render(v, "v0.0.0")
		if err != nil {
			t.Fatal(err)
		}
		var np *networkingv1.NetworkPolicy
		for _, o := range objs {
			if p, ok := o.(*networkingv1.NetworkPolicy); ok {
				np = p
			}
		}
		if np == nil {
			t.Fatalf("%s: no NetworkPolicy", mode)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if ds, ok := o.(*appsv1.DaemonSet); ok && !sel.Matches(k8slabels.Set(ds.Spec.Template.Labels)) {
				t.Errorf("%s: NetworkPolicy does not select DaemonSet %s's pods", mode, ds.Name)
			}
		}
		want := networkingv1.NetworkPolicySpec{
			PodSelector: np.Spec.PodSelector,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: new(corev1.ProtocolTCP), Port: new(intstr.FromInt32(MetricsPort))}},
				// Only the monitoring namespace: /metrics names every tenant's mounts and pods.
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"},
				}}},
			}},
		}
		if diff := cmp.Diff(toMap(t, want), toMap(t, np.Spec)); diff != "" {
			t.Errorf("%s: NetworkPolicy spec (-want +got):\n%s", mode, diff)
		}
	}
	v := DefaultValues()
	v.NetworkPolicy.Enabled = false
	objs, err := Render(v, "v0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, ok := o.(*networkingv1.NetworkPolicy); ok {
			t.Error("networkPolicy.enabled=false still renders a NetworkPolicy")
		}
	}
}

// TestRenderEphemeralStorage: every container states how much node disk it may use.
func TestRenderEphemeralStorage(t *testing.T) {
	t.Parallel()
	for _, name := range renderCases {
		for _, o := range decodeAll(t, renderFile(t, name, FormatYAML)) {
			ds, ok := o.(*appsv1.DaemonSet)
			if !ok {
				continue
			}
			pod := ds.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
				req, lim := c.Resources.Requests[corev1.ResourceEphemeralStorage], c.Resources.Limits[corev1.ResourceEphemeralStorage]
				if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
					t.Errorf("%s %s/%s: ephemeral-storage request %s, limit %s; want both, request <= limit",
						name, ds.Name, c.Name, req.String(), lim.String())
				}
			}
		}
	}
}

// TestMetricsTiersMatchAgent keeps the chart's metrics.tier values those the agent accepts.
func TestMetricsTiersMatchAgent(t *testing.T) {
	t.Parallel()
	for _, s := range metricsTiers {
		if _, err := metrics.ParseTier(s); err != nil {
			t.Errorf("metrics.tier %q: the agent rejects it: %v", s, err)
		}
	}
	if metricsTiers[0] != string(metrics.TierDefault) {
		t.Errorf("metrics.tier defaults to %q, the agent to %q", metricsTiers[0], metrics.TierDefault)
	}
	if !slices.Contains(metricsTiers, string(metrics.TierFull)) {
		t.Errorf("metrics.tier lacks %q", metrics.TierFull)
	}
}

// TestRevertUndoesInstaller checks the revert DaemonSet against the installer's, for the
// same installer values: its init container runs revert-node alone and mounts, writable
// and at the same place, every host directory the installer's writes to (the installer's
// read-only /sbin and /usr/sbin, where it looks at mount.nfs, excepted), and nothing else;
// no host directory fails the pod where the installer never ran but the udev rules
// directory the installer needs too; the pod idles in the installer's pause container; and
// `helm upgrade --wait` waits for every node's pod.
func TestRevertUndoesInstaller(t *testing.T) {
	t.Parallel()
	for _, nfsmount := range []bool{false, true} {
		t.Run(fmt.Sprintf("nfsmountConf=%v", nfsmount), func(t *testing.T) {
			t.Parallel()
			v := DefaultValues()
			v.Installer.NFSMountConf = nfsmount
			inst := installerDaemonSet(v, "v0").Spec.Template.Spec
			rev := revertDaemonSet(v, "v0").Spec.Template.Spec

			writable := func(p corev1.PodSpec) map[string]string { // host path -> mount path
				t.Helper()
				if len(p.InitContainers) != 1 {
					t.Fatalf("%d init containers, want 1", len(p.InitContainers))
				}
				hostPath := map[string]string{}
				for _, vol := range p.Volumes {
					if vol.HostPath != nil {
						hostPath[vol.Name] = vol.HostPath.Path
					}
				}
				out := map[string]string{}
				for _, m := range p.InitContainers[0].VolumeMounts {
					if hp, ok := hostPath[m.Name]; ok && !m.ReadOnly {
						out[hp] = m.MountPath
					}
				}
				return out
			}
			if diff := cmp.Diff(writable(inst), writable(rev)); diff != "" {
				t.Errorf("writable host directories (-installer +revert):\n%s", diff)
			}
			c := rev.InitContainers[0]
			if want := []string{"k8s", "revert-node", "--root=/host"}; !slices.Equal(c.Args, want) {
				t.Errorf("init container args %q, want %q", c.Args, want)
			}
			if len(c.VolumeMounts) != len(rev.Volumes) {
				t.Errorf("init container mounts %d volumes of %d", len(c.VolumeMounts), len(rev.Volumes))
			}
			for _, vol := range rev.Volumes {
				if vol.HostPath == nil {
					t.Errorf("volume %s is not a host directory: the revert reads no policy", vol.Name)
					continue
				}
				want := corev1.HostPathDirectoryOrCreate
				if vol.HostPath.Path == UdevRulesDir {
					want = corev1.HostPathDirectory
				}
				if got := *vol.HostPath.Type; got != want {
					t.Errorf("volume %s (%s): type %s, want %s", vol.Name, vol.HostPath.Path, got, want)
				}
			}
			if diff := cmp.Diff(inst.Containers, rev.Containers); diff != "" {
				t.Errorf("main containers (-installer +revert):\n%s", diff)
			}
			// helm's readiness check (pkg/kube/ready.go, daemonSetReady) wants all but
			// maxUnavailable pods ready, scaled against the nodes and rounded up.
			ru := revertDaemonSet(v, "v0").Spec.UpdateStrategy.RollingUpdate
			for _, nodes := range []int{1, 2, 9, 10, 11, 5000} {
				if n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, nodes, true); err != nil || n != 0 {
					t.Errorf("%d nodes: helm --wait returns with %d (%v) not reverted, want 0", nodes, n, err)
				}
			}
			inst.Volumes, inst.InitContainers, rev.Volumes, rev.InitContainers = nil, nil, nil, nil
			if diff := cmp.Diff(inst, rev); diff != "" {
				t.Errorf("pod frame (-installer +revert):\n%s", diff)
			}
		})
	}
}
