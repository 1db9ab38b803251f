//go:build lab

package k8slab

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nfstune/nfstune/internal/fleet"
	"github.com/nfstune/nfstune/internal/status"
)

// The fleet cases run after the installer case, on a release of their own: kubectl-nfstune
// run in the guest against the lab's apiserver (as the admin, and as a user bound to the
// chart's fleet-viewer roles only), then two node groups with their own policies on the
// one node, moved from one group to the other by its label.

// pluginTimeout is the plugin's --timeout per agent in the lab: the proxied request and the
// agent's read of the host share two emulated CPUs with the whole cluster.
const pluginTimeout = 20 * time.Second

// groupLabel is the node label the node groups select by; defaultGroup is the group of the
// nodes of no group.
const (
	groupLabel   = "nfstune-lab/group"
	defaultGroup = "default"
)

type pluginRun struct {
	code        int
	out, errOut string
	took        time.Duration
}

// runPlugin runs kubectl-nfstune with the kubeconfig of user (admin or viewer).
func runPlugin(user string, args ...string) pluginRun {
	start := time.Now()
	args = append(args, "--kubeconfig", filepath.Join(stateDir, user+".kubeconfig"))
	cmd := exec.Command(filepath.Join(binDir, "kubectl-nfstune"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := pluginRun{out: out.String(), errOut: errOut.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.code, r.errOut = -1, err.Error()
	}
	return r
}

// fleetStatus runs `kubectl nfstune status -o json` and returns the node's entry.
func fleetStatus(t *testing.T, user string, args ...string) (fleet.Node, pluginRun) {
	t.Helper()
	r := runPlugin(user, append([]string{"status", nodeName, "-o", "json"}, args...)...)
	var f fleet.Fleet
	if err := json.Unmarshal([]byte(r.out), &f); err != nil || len(f.Nodes) != 1 {
		t.Fatalf("kubectl-nfstune status: exit %d, %v, stderr %s\n%s", r.code, err, r.errOut, r.out)
	}
	return f.Nodes[0], r
}

// waitFleet runs fleetStatus until ok accepts the node, at most limit; it returns the last.
func waitFleet(t *testing.T, user string, limit time.Duration, ok func(fleet.Node, pluginRun) bool, args ...string) (fleet.Node, pluginRun) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		n, r := fleetStatus(t, user, args...)
		if ok(n, r) || time.Now().After(deadline) {
			return n, r
		}
		time.Sleep(2 * time.Second)
	}
}

// waitAgentPod waits for a Ready agent pod on the node that is not one of old, and of group
// when group is set.
func waitAgentPod(t *testing.T, old map[types.UID]bool, group string) *corev1.Pod {
	t.Helper()
	selector := "app.kubernetes.io/component=agent"
	if group != "" {
		selector += "," + fleet.GroupLabel + "=" + group
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods, _ := podsWithLabel(chartNS, selector)
		for i := range pods {
			p := &pods[i]
			if old[p.UID] || p.DeletionTimestamp != nil || p.Spec.NodeName != nodeName {
				continue
			}
			p, err := waitPod(chartNS, p.Name, true, time.Until(deadline))
			if err != nil {
				t.Fatal(err)
			}
			chartPodUIDs[string(p.UID)] = true
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new Ready agent pod (%s) on %s after 5 minutes\nkube-controller-manager:\n%s", selector, nodeName, tail("kube-controller-manager", 15))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// agentPods returns the UIDs of the agent pods there are now.
func agentPods() map[types.UID]bool {
	uids := map[types.UID]bool{}
	pods, _ := podsWithLabel(chartNS, "app.kubernetes.io/component=agent")
	for _, p := range pods {
		uids[p.UID] = true
	}
	return uids
}

// fleetChart is chartValues with the fleet viewer's roles and flags of the case.
func fleetChart(t *testing.T, verb, policyMode string, extra ...string) {
	t.Helper()
	args := append([]string{verb, "nfstune", registryChart}, chartValues(t, "agent", policyMode)...)
	args = append(args, "--set", "fleetViewer.clusterRole.create=true")
	if _, err := helm(append(args, extra...)...); err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var fleetAgent *corev1.Pod

func requireFleetAgent(t *testing.T) {
	t.Helper()
	requireCluster(t)
	if fleetAgent == nil {
		t.Fatal("no agent of the fleet cases (TestFleetCompliant)")
	}
}

// TestFleetCompliant: with the agent enforcing, kubectl nfstune status shows the node
// compliant, every mount tuned, and exits 0, for the admin and for a user with only the
// chart's fleet-viewer roles.
func TestFleetCompliant(t *testing.T) {
	requireCluster(t)
	if _, err := helm("uninstall", "nfstune", "--ignore-not-found", "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	fleetChart(t, "install", "enforce")
	fleetAgent = waitAgentPod(t, nil, defaultGroup)
	r := startNFSPod(t, nfsPod("nfs-fleet", inlineNFS("fleet")), bootTime(), true)
	if !r.tuned {
		t.Fatalf("the enforce agent did not tune %s", r.mount.dev)
	}
	// The user viewer gets the chart's roles and nothing else.
	for path, obj := range map[string]any{
		"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings":                     roleBinding("ClusterRoleBinding", "", "ClusterRole"),
		"/apis/rbac.authorization.k8s.io/v1/namespaces/" + chartNS + "/rolebindings": roleBinding("RoleBinding", chartNS, "Role"),
	} {
		if err := cluster.create(path, obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, user := range []string{"admin", "viewer"} {
		n, run := waitFleet(t, user, 2*time.Minute, func(n fleet.Node, r pluginRun) bool { return r.code == 0 },
			"--timeout", pluginTimeout.String())
		a := n.Agent
		if run.code != 0 || !n.Compliant || a == nil || a.Mounts == 0 || a.Tuned != a.Mounts || n.Group != defaultGroup ||
			a.Policy.Name != defaultGroup || a.Policy.SHA256 != sha256Hex(policy) || a.Mode != "enforce" {
			t.Fatalf("kubectl nfstune status as %s: exit %d, %+v (agent %+v); stderr %s", user, run.code, n, a, run.errOut)
		}
		logf("kubectl nfstune status as %s: exit 0 after %s, %d mounts, all tuned", user, run.took.Round(time.Millisecond), a.Mounts)
	}
	table := runPlugin("viewer", "status", "--timeout", pluginTimeout.String())
	logf("kubectl nfstune status (exit %d):\n%s", table.code, table.out)
	audit := runPlugin("viewer", "audit", nodeName, "--timeout", pluginTimeout.String())
	if audit.code != 0 || !strings.Contains(audit.out, "("+r.mount.dev+")") {
		t.Errorf("kubectl nfstune audit %s: exit %d without %s: %s\n%s", nodeName, audit.code, r.mount.dev, audit.errOut, audit.out)
	}
	summary.FleetCompliant = true
}

func roleBinding(kind, ns, roleKind string) map[string]any {
	meta := map[string]any{"name": "nfstune-fleet-viewer-lab"}
	if ns != "" {
		meta["namespace"] = ns
	}
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": roleKind, "name": "nfstune-fleet-viewer"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}},
	}
}

// TestFleetUntuned: in observe mode a new volume keeps the kernel's read-ahead; kubectl
// nfstune status lists it as untuned, the node as not compliant, and exits 1.
func TestFleetUntuned(t *testing.T) {
	requireFleetAgent(t)
	old := agentPods()
	fleetChart(t, "upgrade", "observe")
	fleetAgent = waitAgentPod(t, old, defaultGroup)
	r := startNFSPod(t, nfsPod("nfs-fleet-observe", inlineNFS("fleet-observe")), bootTime(), false)
	untune(t, r.mount.dev)
	// The new agent's first read of the host can outlast its deadline on a busy node: the
	// status then says so (readError) and exits 1 with nothing listed, which is not yet the
	// answer this test waits for.
	n, run := waitFleet(t, "admin", 2*time.Minute, func(n fleet.Node, r pluginRun) bool {
		return r.code != 0 && n.Agent != nil && n.Agent.ReadError == ""
	}, "--timeout", pluginTimeout.String())
	a := n.Agent
	if run.code != 1 || n.Compliant || a == nil || a.Mode != "observe" ||
		!slices.ContainsFunc(a.Untuned, func(m status.Mount) bool { return m.Device == r.mount.dev }) {
		t.Fatalf("kubectl nfstune status with %s untuned: exit %d, %+v (agent %+v); want 1 and the mount listed", r.mount.dev, run.code, n, a)
	}
	table := runPlugin("admin", "status", "--timeout", pluginTimeout.String())
	logf("kubectl nfstune status with %s untuned (exit %d):\n%s", r.mount.dev, table.code, table.out)
	summary.FleetUntunedReported = true
}

// untune leaves dev at the kernel's 128 KiB, as a node without nfstune would have it. The
// installer case's udev rule stays on the node after its uninstall (by design) and tunes
// every new NFS bdi; it is let finish first, so that it cannot write after this does.
func untune(t *testing.T, dev string) {
	t.Helper()
	if _, err := os.Stat(installerRule); err == nil {
		waitReadAhead(dev, wantKB, 30*time.Second)
	}
	if err := os.WriteFile("/sys/class/bdi/"+dev+"/read_ahead_kb", []byte("128"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAhead(dev); got != 128 {
		t.Fatalf("%s: read_ahead_kb = %d after writing 128", dev, got)
	}
}

// TestFleetUnreachable: an agent that does not answer (stopped with SIGSTOP) is reported
// after the plugin's --timeout; a node whose agent pod is gone, the DaemonSet kept off it by
// a nodeSelector, is reported at once. Both exit 1.
func TestFleetUnreachable(t *testing.T) {
	requireFleetAgent(t)
	pid, err := containerPID(fleetAgent.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 5 * time.Second
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }() // also when the status below fails the case
	n, run := fleetStatus(t, "admin", "--timeout", timeout.String())
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	summary.FleetStoppedAgentS = run.took.Seconds()
	// The bound: the timeout, and the listings and the process's start on the emulated CPUs.
	const slack = 15 * time.Second
	if run.code != 1 || n.Reachable || n.Error != "no answer within "+timeout.String() || run.took > timeout+slack {
		t.Errorf("a stopped agent: exit %d after %s, %+v; want 1, unreachable, within %s + %s", run.code, run.took, n, timeout, slack)
	}
	logf("a stopped agent: reported unreachable (%q) after %s", n.Error, run.took.Round(time.Millisecond))

	// Keep the DaemonSet off the node, and delete its pod.
	fleetChart(t, "upgrade", "observe", "--set-string", "nodeSelector.nfstune-lab-blocked=yes")
	deadline := time.Now().Add(5 * time.Minute)
	for len(agentPods()) > 0 {
		pods, _ := podsWithLabel(chartNS, "app.kubernetes.io/component=agent")
		for _, p := range pods {
			_ = cluster.remove("/api/v1/namespaces/" + chartNS + "/pods/" + p.Name)
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent pod is still there 5 minutes after the DaemonSet's nodeSelector excluded the node")
		}
		time.Sleep(time.Second)
	}
	n, run = fleetStatus(t, "admin", "--timeout", timeout.String())
	summary.FleetNoPodS = run.took.Seconds()
	if run.code != 1 || n.Reachable || n.Error != "no agent pod on the node" || run.took > slack {
		t.Errorf("no agent pod: exit %d after %s, %+v; want 1, unreachable, within %s", run.code, run.took, n, slack)
	}
	logf("no agent pod: reported unreachable (%q) after %s", n.Error, run.took.Round(time.Millisecond))
	fleetAgent = nil
}

// patchNode merge-patches the node's labels; a nil value removes the label.
func patchNode(t *testing.T, labels map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	req, err := http.NewRequest(http.MethodPatch, cluster.url+"/api/v1/nodes/"+nodeName, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := cluster.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("labelling %s: %d", nodeName, resp.StatusCode)
	}
}

// TestFleetNodeGroups: two node groups with policies of their own in one release. The
// unlabelled node runs the default agent; labelled for group a, its agent is group a's with
// a's policy; relabelled for b, b's. kubectl nfstune shows each.
func TestFleetNodeGroups(t *testing.T) {
	requireCluster(t)
	defer patchNode(t, map[string]any{groupLabel: nil})
	policyA := policy + "defaults:\n  mode: enforce\n"
	policyB := policy + "defaults:\n  mode: observe\n"
	groups, _ := json.Marshal([]map[string]any{
		{"name": "lab-a", "nodeSelector": map[string]string{groupLabel: "a"}, "policy": policyA},
		{"name": "lab-b", "nodeSelector": map[string]string{groupLabel: "b"}, "policy": policyB},
	})
	old := agentPods()
	fleetChart(t, "upgrade", "enforce", "--set-json", "nodeGroups="+string(groups))
	waitAgentPod(t, old, defaultGroup)
	for _, g := range []struct{ label, group, policy, mode string }{
		{"", defaultGroup, policy, "enforce"},
		{"a", "lab-a", policyA, "enforce"},
		{"b", "lab-b", policyB, "observe"},
	} {
		if g.label != "" {
			old = agentPods()
			patchNode(t, map[string]any{groupLabel: g.label})
			waitAgentPod(t, old, g.group)
		}
		n, run := waitFleet(t, "admin", 2*time.Minute, func(n fleet.Node, r pluginRun) bool {
			return n.Pods == 1 && n.Agent != nil && n.Agent.Policy.Name == g.group
		}, "--timeout", pluginTimeout.String())
		a := n.Agent
		if n.Pods != 1 || n.Group != g.group || a == nil || a.Policy.Name != g.group || a.Policy.SHA256 != sha256Hex(g.policy) || a.Mode != g.mode {
			t.Fatalf("node labelled %q: exit %d, %+v (agent %+v); want one agent of group %s, policy %s, mode %s",
				g.label, run.code, n, a, g.group, sha256Hex(g.policy)[:8], g.mode)
		}
		summary.FleetGroups = append(summary.FleetGroups, fmt.Sprintf("%s:%s@%s", g.label, a.Policy.Name, a.Policy.SHA256[:8]))
		logf("node labelled %q: one agent, group %s, policy %s@%s, mode %s", g.label, n.Group, a.Policy.Name, a.Policy.SHA256[:8], a.Mode)
	}
	table := runPlugin("admin", "status", "--timeout", pluginTimeout.String())
	logf("kubectl nfstune status in group lab-b (exit %d):\n%s", table.code, table.out)
	uninstall(t)
	_ = cluster.remove("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/nfstune-fleet-viewer-lab")
}
