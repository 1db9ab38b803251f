package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/fleet"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/policy"
	"github.com/nfstune/nfstune/internal/status"
)

// fakeAPI is an API server with nodes, agent pods and, behind the pods' proxy
// subresource, what each agent answers.
type fakeAPI struct {
	t     *testing.T
	nodes []string
	pods  []corev1.Pod
	// agents answers /status and /audit by pod name; a missing pod hangs until the
	// request is cancelled (an agent that never answers).
	agents map[string]func(w http.ResponseWriter, path string)
	// workloads are the pods of every namespace (/api/v1/pods); forbidPods refuses their
	// listing, as to a user bound to the fleet-viewer roles alone.
	workloads  []corev1.Pod
	forbidPods bool
	// requests are the proxy requests, pod/path.
	mu       sync.Mutex
	requests []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			f.t.Error(err)
		}
	}
	const podsPath = "/api/v1/namespaces/nfstune/pods"
	switch p := r.URL.Path; {
	case p == "/api/v1/nodes":
		list := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
		for _, n := range f.nodes {
			list.Items = append(list.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		writeJSON(list)
	case p == "/api/v1/pods":
		if f.forbidPods {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			writeJSON(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: `pods is forbidden: User "viewer" cannot list resource "pods" in API group "" at the cluster scope`})
			return
		}
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		node, _ := strings.CutPrefix(r.URL.Query().Get("fieldSelector"), "spec.nodeName=")
		for _, p := range f.workloads {
			if node == "" || p.Spec.NodeName == node {
				list.Items = append(list.Items, p)
			}
		}
		writeJSON(list)
	case p == podsPath:
		if got := r.URL.Query().Get("labelSelector"); got != fleet.AgentSelector {
			f.t.Errorf("pods listed with selector %q, want %q", got, fleet.AgentSelector)
		}
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		node, _ := strings.CutPrefix(r.URL.Query().Get("fieldSelector"), "spec.nodeName=")
		for _, p := range f.pods {
			if node == "" || p.Spec.NodeName == node {
				list.Items = append(list.Items, p)
			}
		}
		writeJSON(list)
	case strings.HasPrefix(p, podsPath+"/"):
		// /api/v1/namespaces/nfstune/pods/NAME:PORT/proxy/PATH
		rest := strings.TrimPrefix(p, podsPath+"/")
		namePort, path, ok := strings.Cut(rest, "/proxy")
		name, port, _ := strings.Cut(namePort, ":")
		if !ok || port != "9477" {
			http.Error(w, "bad proxy path "+p, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, name+path)
		f.mu.Unlock()
		agent, ok := f.agents[name]
		if !ok {
			<-r.Context().Done()
			return
		}
		agent(w, path)
	default:
		http.NotFound(w, r)
	}
}

func agentPod(name, node, group string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "nfstune", Labels: map[string]string{
			"app.kubernetes.io/name": "nfstune", "app.kubernetes.io/component": "agent", fleet.GroupLabel: group,
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "agent", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9477}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// serves answers /status with s and /audit with doc.
func serves(s status.Status, doc status.Audit) func(http.ResponseWriter, string) {
	return func(w http.ResponseWriter, path string) {
		w.Header().Set("Content-Type", "application/json")
		switch path {
		case status.StatusPath:
			_ = json.NewEncoder(w).Encode(s)
		case status.AuditPath:
			_ = json.NewEncoder(w).Encode(doc)
		default:
			http.NotFound(w, nil)
		}
	}
}

func agentStatus(node string, mounts, tuned int, findings status.Findings) status.Status {
	return status.Status{
		APIVersion: status.APIVersion, Kind: status.KindStatus, Node: node, Version: "v0.3.0", Ready: true,
		Mode: "enforce", Policy: status.Policy{Name: "default", File: "/etc/nfstune/policy.yaml", SHA256: "0123456789abcdef"},
		Mounts: mounts, Tuned: tuned, Findings: findings,
	}
}

// newFleet is four nodes: a compliant one, one with a mount left untuned (observe mode),
// one whose agent never answers, and one with no agent pod.
func newFleet(t *testing.T) (*fakeAPI, string) {
	api := &fakeAPI{
		t:     t,
		nodes: []string{"node-d", "node-c", "node-b", "node-a"},
		pods:  []corev1.Pod{agentPod("agent-a", "node-a", "default"), agentPod("agent-b", "node-b", "cas"), agentPod("agent-c", "node-c", "default")},
	}
	untuned := agentStatus("node-b", 2, 1, status.Findings{Warning: 1})
	untuned.Mode = "observe"
	untuned.Policy.Name = "cas"
	untuned.Untuned = []status.Mount{{Device: "0:53", MountPoint: "/var/lib/kubelet/pods/x/volumes/kubernetes.io~nfs/data", Server: "10.0.0.5", Export: "/cas", ReadAheadKB: 128, WantKB: 15360, Mode: "observe"}}
	api.agents = map[string]func(http.ResponseWriter, string){
		"agent-a": serves(agentStatus("node-a", 3, 3, status.Findings{Info: 1}), status.Audit{
			APIVersion: status.APIVersion, Kind: status.KindAudit, Node: "node-a",
			// A mount point the inventory could not read, as the agent words it: the
			// newline and escape come from the host and must not reach the terminal raw.
			Warnings: []string{"mountstats entry for \"/mnt/x\nNFS031 forged\x1b[2J\" dropped"},
			Report: audit.Report{
				Mounts:   []inventory.Mount{{Device: "0:52", MountPoints: []string{"/mnt/data"}, Server: "10.0.0.5", Export: "/data"}},
				Findings: []audit.Finding{{ID: "NFS031", Severity: "info", Device: "0:52", Message: "caching"}},
			},
		}),
		"agent-b": serves(untuned, status.Audit{}),
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, writeKubeconfig(t, srv.URL)
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: %q}}]
users: [{name: admin, user: {token: secret}}]
contexts: [{name: lab, context: {cluster: lab, user: admin}}]
current-context: lab
`, server)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), Streams{Out: &out, ErrOut: &errOut}, args)
	return code, out.String(), errOut.String()
}

// TestStatusCompliantNode: one compliant node: exit 0, and its line in the table.
func TestStatusCompliantNode(t *testing.T) {
	t.Parallel()
	_, kubeconfig := newFleet(t)
	code, out, errOut := run(t, "status", "node-a", "--kubeconfig", kubeconfig)
	if code != ExitCompliant {
		t.Fatalf("exit %d, want 0; stderr: %s\n%s", code, errOut, out)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "NODE") || len(strings.Fields(lines[1])) != 14 {
		t.Fatalf("table:\n%s", out)
	}
	want := []string{"node-a", "default", "ready", "v0.3.0", "enforce", "default@01234567", "3", "3", "0", "0", "1", "0", "0", "yes"}
	if got := strings.Fields(lines[1]); !slices.Equal(got, want) {
		t.Errorf("node-a's line = %q, want %q", got, want)
	}
	if !strings.Contains(out, "1 nodes: 1 compliant, 0 not compliant (0 unreachable); 3 mounts, 3 tuned") {
		t.Errorf("no summary:\n%s", out)
	}
}

// TestStatusFleet: every node, as JSON: the untuned mount, the agent that never answers
// (reported within the timeout, not after the request's own), the node without an agent
// pod; exit 1.
func TestStatusFleet(t *testing.T) {
	t.Parallel()
	_, kubeconfig := newFleet(t)
	const timeout = 300 * time.Millisecond
	start := time.Now()
	code, out, errOut := run(t, "status", "--kubeconfig", kubeconfig, "-o", "json", "--timeout", timeout.String(), "-l", "")
	took := time.Since(start)
	if code != ExitNotCompliant {
		t.Fatalf("exit %d, want 1; stderr: %s", code, errOut)
	}
	if took > timeout+3*time.Second {
		t.Errorf("listing took %s with a %s timeout", took, timeout)
	}
	var f fleet.Fleet
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("decoding %s: %v", out, err)
	}
	byName := map[string]fleet.Node{}
	var names []string
	for _, n := range f.Nodes {
		byName[n.Name] = n
		names = append(names, n.Name)
	}
	if !slices.Equal(names, []string{"node-a", "node-b", "node-c", "node-d"}) {
		t.Fatalf("nodes %q, want node-a to node-d in order", names)
	}
	if n := byName["node-a"]; !n.Compliant || !n.Reachable || n.Group != "default" {
		t.Errorf("node-a = %+v, want compliant", n)
	}
	if n := byName["node-b"]; n.Compliant || n.Group != "cas" || n.Agent == nil || len(n.Agent.Untuned) != 1 ||
		!slices.Equal(n.Problems, []string{"1 of 2 mounts not tuned"}) {
		t.Errorf("node-b = %+v, want not compliant for its untuned mount", n)
	}
	if n := byName["node-c"]; n.Compliant || n.Reachable || n.Error != "no answer within 300ms" || n.Took > timeout+2*time.Second {
		t.Errorf("node-c = %+v, want unreachable after the timeout", n)
	}
	if n := byName["node-d"]; n.Compliant || n.Reachable || n.Pod != "" || n.Error != "no agent pod on the node" {
		t.Errorf("node-d = %+v, want unreachable without a pod", n)
	}
	want := fleet.Summary{Nodes: 4, Compliant: 1, Unreachable: 2, Mounts: 5, Tuned: 4, Findings: status.Findings{Warning: 1, Info: 1}}
	if f.Summary != want {
		t.Errorf("summary = %+v, want %+v", f.Summary, want)
	}
}

// TestStatusTable: the table shows the unreachable nodes and why each node is not
// compliant, with the untuned mount.
func TestStatusTable(t *testing.T) {
	t.Parallel()
	_, kubeconfig := newFleet(t)
	code, out, _ := run(t, "status", "--kubeconfig", kubeconfig, "--timeout", "200ms", "-l", "")
	if code != ExitNotCompliant {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{
		"node-c:\n  unreachable: no answer within 200ms\n",
		"node-d:\n  unreachable: no agent pod on the node\n",
		"node-b:\n  1 of 2 mounts not tuned\n  untuned /var/lib/kubelet/pods/x/volumes/kubernetes.io~nfs/data 10.0.0.5:/cas (0:53): read-ahead 128 KiB, policy 15360 KiB, observe\n",
		"4 nodes: 1 compliant, 3 not compliant (2 unreachable)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "node-c" && (f[2] != "unreachable" || f[len(f)-1] != "no") {
			t.Errorf("node-c's line: %q", line)
		}
	}
}

// TestFailOn: --fail-on info makes node-a's info finding count.
func TestFailOn(t *testing.T) {
	t.Parallel()
	_, kubeconfig := newFleet(t)
	code, out, _ := run(t, "status", "node-a", "--kubeconfig", kubeconfig, "--fail-on", "info")
	if code != ExitNotCompliant || !strings.Contains(out, "1 findings at or above info") {
		t.Errorf("exit %d, want 1 with the finding named:\n%s", code, out)
	}
}

// TestAudit: one node's audit as a table, the agent's findings in it; the exit code
// follows --fail-on.
func TestAudit(t *testing.T) {
	t.Parallel()
	api, kubeconfig := newFleet(t)
	code, out, errOut := run(t, "audit", "node-a", "--kubeconfig", kubeconfig)
	if code != ExitCompliant || !strings.Contains(out, "INFO    NFS031 caching") {
		t.Errorf("exit %d (%s), want 0 and the finding:\n%s", code, errOut, out)
	}
	if want := `warning: node-a: mountstats entry for "/mnt/x\nNFS031 forged\x1b[2J" dropped` + "\n"; errOut != want {
		t.Errorf("stderr %q, want the agent's warning escaped: %q", errOut, want)
	}
	if !slices.Contains(api.requests, "agent-a/audit") {
		t.Errorf("proxy requests %q, want agent-a/audit", api.requests)
	}
	if code, _, _ := run(t, "audit", "node-a", "--kubeconfig", kubeconfig, "--fail-on", "info"); code != ExitNotCompliant {
		t.Errorf("--fail-on info: exit %d, want 1", code)
	}
	code, out, _ = run(t, "audit", "node-a", "--kubeconfig", kubeconfig, "-o", "json")
	var doc status.Audit
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.Node != "node-a" || len(doc.Findings) != 1 {
		t.Errorf("-o json: exit %d, %v, %+v", code, err, doc)
	}
	if code, _, errOut := run(t, "audit", "node-d", "--kubeconfig", kubeconfig); code != ExitNotCompliant || !strings.Contains(errOut, "no agent pod") {
		t.Errorf("node without agent: exit %d, %s", code, errOut)
	}
}

// TestBadInput: usage errors and an API server that cannot be reached exit 2.
func TestBadInput(t *testing.T) {
	t.Parallel()
	_, kubeconfig := newFleet(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"output", []string{"status", "--kubeconfig", kubeconfig, "-o", "wide"}, `invalid argument "wide" for "-o, --output" flag: want table, json, yaml`},
		{"fail-on", []string{"status", "--kubeconfig", kubeconfig, "--fail-on", "fatal"}, `unknown --fail-on "fatal"`},
		{"unknown node", []string{"status", "node-x", "--kubeconfig", kubeconfig}, "node node-x: not found"},
		{"no kubeconfig", []string{"status", "--kubeconfig", filepath.Join(t.TempDir(), "missing")}, "loading kubeconfig"},
		{"api unreachable", []string{"status", "--kubeconfig", writeKubeconfig(t, closed.URL)}, "listing nodes"},
		{"audit api unreachable", []string{"audit", "node-a", "--kubeconfig", writeKubeconfig(t, closed.URL)}, "listing agent pods"},
		{"audit args", []string{"audit", "--kubeconfig", kubeconfig}, "accepts 1 arg"},
		{"top sort", []string{"top", "--kubeconfig", kubeconfig, "--sort", "cpu"}, `unknown --sort "cpu" (want server, read, mapped, write, latency)`},
		{"top limit", []string{"top", "--kubeconfig", kubeconfig, "--limit", "-1"}, "--limit -1"},
		{"top api unreachable", []string{"top", "--kubeconfig", writeKubeconfig(t, closed.URL)}, "listing nodes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			if code != ExitError || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.want)
			}
		})
	}
}

// TestLearned: the values two agents learned, per volume, with the most common one shown
// (the smaller of a tie); -o policy is a policy file that loads and pins each volume's value
// exactly; the agent that never answers is named on stderr, and the listing still exits 0.
func TestLearned(t *testing.T) {
	t.Parallel()
	api, kubeconfig := newFleet(t)
	at := time.Unix(1_800_000_000, 0).UTC()
	a := agentStatus("node-a", 3, 3, status.Findings{})
	a.Learned = []status.Learned{{Server: "10.0.0.5", Export: "/data", ReadAheadKB: 4096, At: at}, {Server: "10.0.0.5", Export: "/models[1]", ReadAheadKB: 128, At: at}}
	b := agentStatus("node-b", 1, 1, status.Findings{})
	b.Learned = []status.Learned{{Server: "10.0.0.5", Export: "/data", ReadAheadKB: 2048, At: at}}
	api.agents = map[string]func(http.ResponseWriter, string){"agent-a": serves(a, status.Audit{}), "agent-b": serves(b, status.Audit{})}

	code, out, errOut := run(t, "learned", "--kubeconfig", kubeconfig, "--timeout", "500ms", "--selector", "")
	if code != 0 {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := [][]string{
		{"SERVER", "EXPORT", "READ-AHEAD", "NODES", "OTHER", "VALUES"},
		{"10.0.0.5", "/data", "2048", "KiB", "1", "of", "2", "node-a:", "4096", "KiB"},
		{"10.0.0.5", "/models[1]", "128", "KiB", "1", "of", "1", "-"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", out)
	}
	for i := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, want[i]) {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
	if !strings.Contains(errOut, "node node-c") {
		t.Errorf("the agent that does not answer is not named: %q", errOut)
	}

	code, out, errOut = run(t, "learned", "-o", "policy", "--kubeconfig", kubeconfig, "--timeout", "500ms")
	if code != 0 {
		t.Fatalf("-o policy: exit %d; stderr %s", code, errOut)
	}
	pol, err := policy.Parse("learned.yaml", []byte(out))
	if err != nil {
		t.Fatalf("-o policy does not load: %v\n%s", err, out)
	}
	for _, tt := range []struct {
		export string
		kb     int
	}{{"/data", 2048}, {"/models[1]", 128}, {"/models1", 0}} {
		m := &inventory.Mount{Server: "10.0.0.5", ServerAddr: "10.0.0.5", Export: tt.export, MountPoints: []string{"/mnt/x"}, RSize: 1 << 20, FSType: "nfs4"}
		r := pol.Resolve(m)
		got := r.ReadAheadKB
		if !r.ReadAheadExact {
			got = 0
		}
		if got != tt.kb {
			t.Errorf("export %s: the policy pins %d KiB (exact %v, rule %s), want %d", tt.export, r.ReadAheadKB, r.ReadAheadExact, r.Rule, tt.kb)
		}
	}
}

const mib = 1 << 20

// topFleet is newFleet with node-a's agent running the per-pod I/O collector: a pod
// reading through mmap, the node's own tasks, a pod since deleted; node-b's agent runs
// without it.
func topFleet(t *testing.T) (*fakeAPI, string) {
	api, kubeconfig := newFleet(t)
	a := agentStatus("node-a", 1, 1, status.Findings{})
	a.PodIO = &status.PodIO{Loaded: true, Pods: []status.PodTraffic{
		{PodUID: "uid-train", Device: "0:52", MountPoint: "/mnt/data", Server: "10.0.0.5", Export: "/data",
			ReadBytes: 40 * mib, ServerReadBytes: 80 * mib, FaultReadBytes: 60 * mib, MajorFaults: 300, ReadLatency: 0.004},
		{PodUID: "uid-gone", Device: "0:52", MountPoint: "/mnt/data", Server: "10.0.0.5", Export: "/data",
			ReadBytes: 8 * mib, ServerReadBytes: 8 * mib, WriteBytes: 30 * mib, ReadLatency: 0.012},
		{Device: "0:53", MountPoint: "/mnt/logs", WriteBytes: 1 * mib},
	}}
	api.agents["agent-a"] = serves(a, status.Audit{})
	api.workloads = []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0", UID: "uid-train"}, Spec: corev1.PodSpec{NodeName: "node-a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "elsewhere", UID: "uid-other"}, Spec: corev1.PodSpec{NodeName: "node-b"}},
	}
	return api, kubeconfig
}

// TestTop: the pods of every node by READ payload, named from the API server, the node's
// own row and the deleted pod's UID; the nodes without the collector, the unreachable
// ones, are named below; exit 0.
func TestTop(t *testing.T) {
	t.Parallel()
	_, kubeconfig := topFleet(t)
	code, out, errOut := run(t, "top", "--kubeconfig", kubeconfig, "--timeout", "300ms", "-l", "")
	if code != ExitCompliant || errOut != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and none\n%s", code, errOut, out)
	}
	lines := strings.Split(out, "\n")
	want := [][]string{
		{"POD", "NODE", "VOLUME", "READ(MiB/s)", "SERVER(MiB/s)", "MMAP(MiB/s)", "WRITE(MiB/s)", "LATENCY(ms)"},
		{"ml/train-0", "node-a", "10.0.0.5:/data", "40.00", "80.00", "60.00", "0", "4.0"},
		{"uid-gone", "node-a", "10.0.0.5:/data", "8.00", "8.00", "0", "30.00", "12.0"},
		{"(node)", "node-a", "/mnt/logs", "0", "0", "0", "1.00", "-"},
		{},
		{"node-b:", "no", "per-pod", "I/O:", "the", "agent", "runs", "without", "--pod-io"},
		{"node-c:", "unreachable:", "no", "answer", "within", "300ms"},
		{"node-d:", "unreachable:", "no", "agent", "pod", "on", "the", "node"},
		{},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, want[i]) {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}

	code, out, _ = run(t, "top", "node-a", "--kubeconfig", kubeconfig, "--sort", "write", "--limit", "1")
	if lines := strings.Split(out, "\n"); code != 0 || len(lines) < 3 || !strings.HasPrefix(lines[1], "uid-gone ") || lines[2] != "... and 2 more (--limit)" {
		t.Errorf("--sort write --limit 1: exit %d, want uid-gone alone and the two left out:\n%s", code, out)
	}
}

// TestTopDocuments: -o json and -o yaml are the same document: the rows with their pods'
// names and rates, and every node's collector.
func TestTopDocuments(t *testing.T) {
	t.Parallel()
	_, kubeconfig := topFleet(t)
	for _, format := range []string{"json", "yaml"} {
		code, out, errOut := run(t, "top", "-o", format, "--kubeconfig", kubeconfig, "--timeout", "300ms", "--sort", "latency")
		if code != ExitCompliant {
			t.Fatalf("-o %s: exit %d; stderr %s", format, code, errOut)
		}
		b := []byte(out)
		if format == "yaml" {
			var err error
			if b, err = yaml.YAMLToJSON(b); err != nil {
				t.Fatalf("-o yaml: %v\n%s", err, out)
			}
		}
		var top fleet.Top
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&top); err != nil {
			t.Fatalf("-o %s: decoding %s: %v", format, out, err)
		}
		var got []string
		for _, p := range top.Pods {
			got = append(got, p.Node+" "+p.Namespace+"/"+p.Name+" "+p.PodUID)
		}
		if want := []string{"node-a / uid-gone", "node-a ml/train-0 uid-train", "node-a / "}; !slices.Equal(got, want) {
			t.Errorf("-o %s: pods %q, want %q", format, got, want)
		}
		if p := top.Pods[1]; p.FaultReadBytes != 60*mib || p.MajorFaults != 300 || p.ReadLatency != 0.004 || p.Server != "10.0.0.5" {
			t.Errorf("-o %s: train-0's row %+v, want the agent's rates", format, p)
		}
		var nodes []string
		for _, n := range top.Nodes {
			nodes = append(nodes, n.Name+" "+n.Collector)
		}
		if want := []string{"node-a loaded", "node-b off", "node-c unreachable", "node-d unreachable"}; top.Kind != fleet.KindTop || top.Sort != "latency" || !slices.Equal(nodes, want) {
			t.Errorf("-o %s: kind %s, sort %s, nodes %q; want %q", format, top.Kind, top.Sort, nodes, want)
		}
	}
}

// TestTopPodsForbidden: a user who may not list pods outside the agents' namespace gets
// the rows by UID and a warning, and the listing still exits 0.
func TestTopPodsForbidden(t *testing.T) {
	t.Parallel()
	api, kubeconfig := topFleet(t)
	api.forbidPods = true
	code, out, errOut := run(t, "top", "node-a", "--kubeconfig", kubeconfig)
	if code != ExitCompliant {
		t.Fatalf("exit %d; stderr %s", code, errOut)
	}
	if want := "kubectl nfstune top: pods shown by UID: listing pods to name them: forbidden: the user may not list pods in every namespace\n"; errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	if lines := strings.Split(out, "\n"); len(lines) < 2 || !strings.HasPrefix(lines[1], "uid-train ") {
		t.Errorf("want the first row by its UID:\n%s", out)
	}
}

// TestTopNoCollector: no agent that answers runs the collector: the nodes are named with
// why, and the exit status is 1 with a message saying so.
func TestTopNoCollector(t *testing.T) {
	t.Parallel()
	api, kubeconfig := newFleet(t)
	a := agentStatus("node-a", 1, 1, status.Findings{})
	a.PodIO = &status.PodIO{Why: "no BTF: /sys/kernel/btf/vmlinux missing"}
	api.agents["agent-a"] = serves(a, status.Audit{})
	code, out, errOut := run(t, "top", "node-a", "node-b", "--kubeconfig", kubeconfig)
	if code != ExitNotCompliant || errOut != "kubectl-nfstune: no agent that answered runs the per-pod NFS I/O collector (nfstune agent --pod-io)\n" {
		t.Errorf("exit %d, stderr %q; want 1 and why", code, errOut)
	}
	if want := "node-a: no per-pod I/O: no BTF: /sys/kernel/btf/vmlinux missing\nnode-b: no per-pod I/O: the agent runs without --pod-io\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if code, out, _ := run(t, "top", "node-a", "--kubeconfig", kubeconfig, "-o", "json"); code != ExitNotCompliant || !strings.Contains(out, `"collector": "not-loaded"`) {
		t.Errorf("-o json: exit %d, want 1 and the document:\n%s", code, out)
	}
}
