//go:build apiserver

package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/apiservertest"
	"github.com/nfstune/nfstune/internal/fleet"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/render"
	"github.com/nfstune/nfstune/internal/status"
)

// hostAddress is an address of this machine the API server may proxy to: it refuses
// loopback and link-local pod IPs.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this machine for the agents to listen on")
	return ""
}

// realAgent runs nfstune's agent (observe mode, the built-in policy) on the agent package's
// fixture host until the test ends, and returns its HTTP handler.
func realAgent(t *testing.T, node string) http.Handler {
	t.Helper()
	root := hostfs.Root(filepath.Join("..", "agent", "testdata", "root"))
	a, err := agent.New(agent.Config{
		Root: root, PID: 1, Node: node,
		Read: func(context.Context) (*inventory.Inventory, error) {
			return inventory.Read(root, inventory.ReadOptions{PID: 1})
		},
		Load: func() (*agent.Policy, error) { return agent.LoadPolicy("", render.DefaultGroup, true) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Handler(agent.HandlerOptions{MinScrapeInterval: agent.DefaultMinScrapeInterval, ScrapeTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	for end := time.Now().Add(30 * time.Second); !a.Ready(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the agent did not reconcile within 30 s")
		}
	}
	return h
}

// TestAPIServerFleetViewer runs the plugin against a real kube-apiserver, as a user bound
// to the chart's fleet-viewer ClusterRole and Role only, with agents behind the pods'
// proxy subresource: one answers, one never does (reported after --timeout), one node has
// no agent pod, and one runs the real agent's handler on the agent's fixture host. top names
// the answering agent's pod for the admin, and leaves its UID to the viewer, whose roles do
// not list pods outside the agents' namespace. A user without the bindings cannot list the
// fleet (exit 2).
func TestAPIServerFleetViewer(t *testing.T) {
	const viewerToken, nobodyToken = "viewer-token", "nobody-token"
	s := apiservertest.Start(t, map[string]string{viewerToken: "viewer", nobodyToken: "nobody"})
	create := func(path string, obj any) {
		t.Helper()
		b, _ := json.Marshal(obj)
		if code, resp, _ := s.Do(t, http.MethodPost, path, b); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, code, resp)
		}
	}

	// The chart's namespace, service account and fleet-viewer roles, bound to viewer.
	v := render.DefaultValues()
	v.Image.Tag = "v0.0.0"
	v.FleetViewer.ClusterRole.Create = true
	objs, err := render.Render(v, "v0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		switch kind {
		case "Namespace":
			create("/api/v1/namespaces", o)
		case "ServiceAccount":
			create("/api/v1/namespaces/nfstune/serviceaccounts", o)
		case "ClusterRole":
			create("/apis/rbac.authorization.k8s.io/v1/clusterroles", o)
		case "Role":
			create("/apis/rbac.authorization.k8s.io/v1/namespaces/nfstune/roles", o)
		}
	}
	subjects := []map[string]string{{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}}
	create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "viewer"}, "subjects": subjects,
		"roleRef": map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nfstune-fleet-viewer"},
	})
	create("/apis/rbac.authorization.k8s.io/v1/namespaces/nfstune/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "viewer", "namespace": "nfstune"}, "subjects": subjects,
		"roleRef": map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "nfstune-fleet-viewer"},
	})

	// A workload on node-a, whose NFS traffic node-a's agent reports by the pod's UID.
	train := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "nfstune"},
		Spec: corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "nfstune", AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "train", Image: "train"}}},
	}
	body, _ := json.Marshal(train)
	if code, resp, _ := s.Do(t, http.MethodPost, "/api/v1/namespaces/nfstune/pods", body); code != http.StatusCreated || json.Unmarshal(resp, &train) != nil || train.UID == "" {
		t.Fatalf("creating pod train-0: %d %s", code, resp)
	}
	trainUID := string(train.UID)

	// The agents: node-a's answers, node-b's never does; node-c has none.
	addr := hostAddress(t)
	listen := func(h http.Handler) int {
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return ln.Addr().(*net.TCPAddr).Port
	}
	answered := listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != status.StatusPath {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(status.Status{APIVersion: status.APIVersion, Kind: status.KindStatus, Node: "node-a",
			Version: "v0.0.0", Ready: true, Mode: "enforce", Policy: status.Policy{Name: "default"}, Mounts: 2, Tuned: 2,
			PodIO: &status.PodIO{Loaded: true, Pods: []status.PodTraffic{
				{PodUID: trainUID, Device: "0:52", Server: "10.0.0.5", Export: "/data", ReadBytes: 4 << 20, ServerReadBytes: 8 << 20, FaultReadBytes: 6 << 20},
				{Device: "0:52", Server: "10.0.0.5", Export: "/data", WriteBytes: 1 << 20},
			}}})
	}))
	silent := listen(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	real := listen(realAgent(t, "node-d"))
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		create("/api/v1/nodes", corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/os": "linux"}},
		})
	}
	for node, port := range map[string]int{"node-a": answered, "node-b": silent, "node-d": real} {
		p := corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "agent-" + node, Namespace: "nfstune", Labels: map[string]string{
				"app.kubernetes.io/name": "nfstune", "app.kubernetes.io/component": "agent", render.GroupLabel: render.DefaultGroup}},
			Spec: corev1.PodSpec{
				NodeName: node, ServiceAccountName: "nfstune", AutomountServiceAccountToken: new(false),
				Containers: []corev1.Container{{Name: "agent", Image: "agent", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(port)}}}},
			},
		}
		create("/api/v1/namespaces/nfstune/pods", p)
		// What kubelet would report: running, at this machine's address.
		code, b, _ := s.Do(t, http.MethodGet, "/api/v1/namespaces/nfstune/pods/"+p.Name, nil)
		if code != http.StatusOK || json.Unmarshal(b, &p) != nil {
			t.Fatalf("reading pod %s: %d %s", p.Name, code, b)
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: addr, PodIPs: []corev1.PodIP{{IP: addr}}}
		b, _ = json.Marshal(p)
		if code, resp, _ := s.Do(t, http.MethodPut, "/api/v1/namespaces/nfstune/pods/"+p.Name+"/status", b); code != http.StatusOK {
			t.Fatalf("setting pod %s's status: %d %s", p.Name, code, resp)
		}
	}

	kubeconfig := func(token string) string {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: u}}]
current-context: test
`, s.URL, token)
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	const timeout = 2 * time.Second
	start := time.Now()
	code, out, errOut := run(t, "status", "-o", "json", "--timeout", timeout.String(), "--kubeconfig", kubeconfig(viewerToken))
	took := time.Since(start)
	if code != ExitNotCompliant {
		t.Fatalf("as viewer: exit %d, want 1; stderr %s\n%s", code, errOut, out)
	}
	var f fleet.Fleet
	if err := json.Unmarshal([]byte(out), &f); err != nil || len(f.Nodes) != 4 {
		t.Fatalf("decoding %s: %v", out, err)
	}
	a, b, c, d := f.Nodes[0], f.Nodes[1], f.Nodes[2], f.Nodes[3]
	if !d.Reachable || d.Agent == nil || d.Agent.Node != "node-d" || !d.Agent.Ready || d.Agent.Mode != "observe" ||
		d.Agent.Policy.Name != render.DefaultGroup || d.Agent.Mounts == 0 || d.Agent.GatheredAt.IsZero() {
		t.Errorf("node-d = %+v (agent %+v); want the real agent's status: ready, observe, its mounts", d, d.Agent)
	}
	if !a.Compliant || a.Agent == nil || a.Agent.Node != "node-a" || a.Group != render.DefaultGroup {
		t.Errorf("node-a = %+v; want compliant, its agent's status through the proxy", a)
	}
	if b.Reachable || b.Error != "no answer within "+timeout.String() || b.Took > timeout+2*time.Second {
		t.Errorf("node-b = %+v; want unreachable after the %s timeout", b, timeout)
	}
	if c.Reachable || c.Error != "no agent pod on the node" {
		t.Errorf("node-c = %+v; want no agent pod", c)
	}
	if took > timeout+10*time.Second {
		t.Errorf("the listing took %s with a %s timeout", took, timeout)
	}
	t.Logf("as viewer: exit %d after %s; node-a %s, node-b %q after %s, node-c %q, node-d %d mounts, %d tuned, %q",
		code, took.Round(time.Millisecond), map[bool]string{true: "compliant", false: "not compliant"}[a.Compliant],
		b.Error, b.Took.Round(time.Millisecond), c.Error, d.Agent.Mounts, d.Agent.Tuned, d.Problems)

	// top: node-a's pods by NFS traffic. The viewer may not list pods outside the agents'
	// namespace (the chart's roles do not grant it): the rows keep their UIDs, with a
	// warning; the admin's listing, of node-a alone, names the pod.
	for _, tt := range []struct{ user, token, name, stderr string }{
		{"viewer", viewerToken, "", "pods shown by UID: listing pods to name them: forbidden"},
		{"admin", apiservertest.AdminToken, "train-0", ""},
	} {
		code, out, errOut := run(t, "top", "-o", "json", "--timeout", timeout.String(), "--kubeconfig", kubeconfig(tt.token))
		var top fleet.Top
		if err := json.Unmarshal([]byte(out), &top); err != nil || code != ExitCompliant {
			t.Fatalf("top as %s: exit %d, %v; stderr %s\n%s", tt.user, code, err, errOut, out)
		}
		if len(top.Pods) != 2 || top.Pods[0].PodUID != trainUID || top.Pods[0].Name != tt.name || top.Pods[1].PodName() != "(node)" {
			t.Errorf("top as %s: rows %+v; want %s's row named %q, then the node's", tt.user, top.Pods, trainUID, tt.name)
		}
		if tt.stderr == "" && errOut != "" || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("top as %s: stderr %q, want %q", tt.user, errOut, tt.stderr)
		}
		var nodes []string
		for _, n := range top.Nodes {
			nodes = append(nodes, n.Name+" "+n.Collector)
		}
		if want := []string{"node-a loaded", "node-b unreachable", "node-c unreachable", "node-d off"}; !slices.Equal(nodes, want) {
			t.Errorf("top as %s: nodes %q, want %q", tt.user, nodes, want)
		}
	}

	// Without the bindings the user may not list the nodes: the fleet cannot be asked.
	code, _, errOut = run(t, "status", "--kubeconfig", kubeconfig(nobodyToken))
	if code != ExitError || !strings.Contains(errOut, "forbidden") {
		t.Errorf("as a user without the roles: exit %d, %s; want 2 and forbidden", code, errOut)
	}
}
