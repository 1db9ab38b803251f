package render

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// schedules reports whether the scheduler may place pod on a node with labels, by the
// pod's nodeSelector and required node affinity (the operators the chart uses).
func schedules(pod corev1.PodSpec, labels map[string]string) bool {
	for k, v := range pod.NodeSelector {
		if labels[k] != v {
			return false
		}
	}
	a := pod.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		ok := true
		for _, e := range term.MatchExpressions {
			v, has := labels[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				ok = ok && has && slices.Contains(e.Values, v)
			case corev1.NodeSelectorOpNotIn:
				ok = ok && (!has || !slices.Contains(e.Values, v))
			case corev1.NodeSelectorOpExists:
				ok = ok && has
			case corev1.NodeSelectorOpDoesNotExist:
				ok = ok && !has
			default:
				panic("operator " + e.Operator)
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// TestNodeGroupsPartitionNodes renders testdata/agent-node-groups.values.yaml and places
// each agent DaemonSet on a set of nodes as the scheduler would: every node the chart's
// nodeSelector and affinity admit runs exactly one agent, of the first group whose label
// it carries, else the default one, with that group's policy.
func TestNodeGroupsPartitionNodes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "agent-node-groups.values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadValues("values.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(v, "v0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	var sets []*appsv1.DaemonSet
	policies := map[string]string{}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			sets = append(sets, o)
		case *corev1.ConfigMap:
			policies[o.Name] = o.Data[PolicyFile]
		}
	}
	linux := map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	with := func(kv ...string) map[string]string {
		l := map[string]string{}
		for k, v := range linux {
			l[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   string // the DaemonSet that runs there, "" for none
		policy string // a line of its policy
	}{
		{"plain", with(), "nfstune-agent", "kind: Policy"},
		{"compute pool", with("workload.sas.com/class", "compute"), "nfstune-agent", "kind: Policy"},
		{"cas", with("workload.sas.com/class", "cas"), "nfstune-agent-cas", "workload: sequential-read"},
		{"system", with("kubernetes.azure.com/mode", "system"), "nfstune-agent-system", "mode: observe"},
		{"cas and system: the first group", with("workload.sas.com/class", "cas", "kubernetes.azure.com/mode", "system"), "nfstune-agent-cas", "workload: sequential-read"},
		{"windows", map[string]string{"kubernetes.io/os": "windows", "workload.sas.com/class": "cas"}, "", ""},
		{"other architecture", with("kubernetes.io/arch", "s390x", "workload.sas.com/class", "cas"), "", ""},
	} {
		var got []string
		for _, ds := range sets {
			if schedules(ds.Spec.Template.Spec, tt.labels) {
				got = append(got, ds.Name)
			}
		}
		var want []string
		if tt.want != "" {
			want = []string{tt.want}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: agents %q, want %q", tt.name, got, want)
			continue
		}
		if tt.want == "" {
			continue
		}
		ds := sets[slices.IndexFunc(sets, func(d *appsv1.DaemonSet) bool { return d.Name == tt.want })]
		cm := ds.Spec.Template.Spec.Volumes[len(ds.Spec.Template.Spec.Volumes)-1].ConfigMap
		if cm == nil || !strings.Contains(policies[cm.Name], tt.policy) {
			t.Errorf("%s: %s mounts policy %v, want one with %q", tt.name, tt.want, cm, tt.policy)
		}
	}
	// Each group's DaemonSet selects only its own pods. The default one's selector is that
	// of releases before node groups (a DaemonSet's selector cannot change) and matches
	// every agent pod; controller references keep it to its own.
	for _, a := range sets[1:] {
		for _, b := range sets {
			if a != b && selects(a.Spec.Selector.MatchLabels, b.Spec.Template.Labels) {
				t.Errorf("%s's selector also selects %s's pods", a.Name, b.Name)
			}
		}
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestNodeGroupsValidation(t *testing.T) {
	t.Parallel()
	const pol = "    policy: |\n      apiVersion: nfstune.io/v1alpha1\n      kind: Policy\n"
	group := func(name, selector string) string {
		return "  - name: " + name + "\n    nodeSelector: " + selector + "\n" + pol
	}
	for _, tt := range []struct {
		name, values, want string
	}{
		{"default name", "nodeGroups:\n" + group("default", "{pool: a}"), `"default": the nodes of no group`},
		{"twice", "nodeGroups:\n" + group("a", "{pool: a}") + group("a", "{pool: b}"), `nodeGroups[1].name "a": listed twice`},
		{"bad name", "nodeGroups:\n" + group("CAS", "{pool: a}"), `nodeGroups[0].name "CAS"`},
		{"two labels", "nodeGroups:\n" + group("a", "{pool: a, zone: b}"), "want exactly one label"},
		{"no label", "nodeGroups:\n" + group("a", "{}"), "want exactly one label"},
		{"same selector", "nodeGroups:\n" + group("a", "{pool: a}") + group("b", "{pool: a}"), `the same as group "a"'s`},
		{"bad policy", "nodeGroups:\n  - name: a\n    nodeSelector: {pool: a}\n    policy: \"kind: Nope\"\n", "nodeGroups[0].policy"},
		{"installer", "mode: installer\nnodeGroups:\n" + group("a", "{pool: a}"), "nodeGroups: only in agent mode"},
		{"revert", "mode: revert\nnodeGroups:\n" + group("a", "{pool: a}"), "nodeGroups: only in agent mode"},
	} {
		_, err := LoadValues("values.yaml", []byte(tt.values))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
