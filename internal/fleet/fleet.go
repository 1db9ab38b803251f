// Package fleet gathers what every node's nfstune agent says about itself (package
// status) through the Kubernetes API server, with the user's own credentials: it lists
// the nodes and the agent pods, and asks each agent for /status (or /audit) through the
// pods' proxy subresource (/api/v1/namespaces/NS/pods/POD:PORT/proxy/status), so the
// agents need no API token and no port reachable from the user. Each node is asked in
// parallel with a timeout of its own: a node whose agent is down, unreachable or missing
// is reported as such and never holds up the others. It then judges each node's
// compliance, gathers the volumes' learned read-ahead (Learned) or ranks the pods by their
// NFS traffic (NewTop); kubectl-nfstune (package plugin) prints the result.
package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nfstune/nfstune/internal/audit"
	"github.com/nfstune/nfstune/internal/render"
	"github.com/nfstune/nfstune/internal/status"
)

// Labels of the agent pods the chart and `nfstune k8s render` create.
const (
	// AgentSelector selects every agent pod, of every node group.
	AgentSelector = render.AgentPodSelector
	// GroupLabel names a pod's node group; the default group's pods carry "default".
	GroupLabel = render.GroupLabel
)

// DefaultNamespace is the chart's namespace; DefaultNodeSelector the chart's nodeSelector,
// the nodes an agent is expected on.
const (
	DefaultNamespace    = "nfstune"
	DefaultNodeSelector = "kubernetes.io/os=linux"
	DefaultTimeout      = 5 * time.Second
	DefaultAPITimeout   = 30 * time.Second
	// DefaultPort is the agent's port where the pod names none "metrics".
	DefaultPort = render.MetricsPort
)

// MaxParallel is how many agents are asked at once. The listing of N nodes whose agents
// all time out takes ceil(N / MaxParallel) timeouts.
const MaxParallel = 32

// Options say which agents to ask and how long to wait for each.
type Options struct {
	// Namespace holds the agent pods.
	Namespace string
	// NodeSelector is a label selector over the nodes an agent is expected on; empty
	// for every node.
	NodeSelector string
	// Nodes, when set, limits the listing to these nodes.
	Nodes []string
	// Timeout bounds the request to one agent.
	Timeout time.Duration
	// APITimeout bounds each listing of nodes or pods.
	APITimeout time.Duration
	// FailOn is the lowest finding severity that makes a node not compliant
	// (audit.SeverityError, ...); empty for none.
	FailOn string
}

// Fleet is the state of every node, sorted by name.
type Fleet struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Summary    Summary `json:"summary"`
	Nodes      []Node  `json:"nodes"`
}

// KindFleet is the kind of the Fleet document.
const KindFleet = "FleetStatus"

// Summary counts over the nodes.
type Summary struct {
	Nodes       int             `json:"nodes"`
	Compliant   int             `json:"compliant"`
	Unreachable int             `json:"unreachable"`
	Mounts      int             `json:"mounts"`
	Tuned       int             `json:"tuned"`
	Findings    status.Findings `json:"findings"`
	Stalled     int             `json:"stalled"`
}

// Node is one node and what its agent says.
type Node struct {
	Name string `json:"name"`
	// Group is the agent pod's node group (GroupLabel).
	Group string `json:"group,omitempty"`
	// Pod is the agent pod asked; empty when the node has none.
	Pod string `json:"pod,omitempty"`
	// Pods counts the agent pods on the node that are not being deleted: more than one
	// means two node groups (or two releases) select it.
	Pods int `json:"pods"`
	// Reachable is true when the agent answered.
	Reachable bool `json:"reachable"`
	// Error is why the agent did not answer.
	Error string `json:"error,omitempty"`
	// Agent is the agent's /status.
	Agent *status.Status `json:"agent,omitempty"`
	// Compliant is true when the agent answered, is ready and healthy, every mount is
	// tuned and no finding is at or above Options.FailOn; Problems says why not.
	Compliant bool     `json:"compliant"`
	Problems  []string `json:"problems,omitempty"`
	// Took is how long the agent took to answer, or to fail.
	Took time.Duration `json:"took_ns"`
}

// Gather lists the nodes and the agent pods and asks every node's agent for its status.
// It fails only when the API server cannot be asked; every per-node failure is in the
// node's Error.
func Gather(ctx context.Context, client corev1client.CoreV1Interface, opts Options) (*Fleet, error) {
	opts = withDefaults(opts)
	nodes, pods, err := listNodesAndPods(ctx, client, opts)
	if err != nil {
		return nil, err
	}
	out := make([]Node, len(nodes))
	sem := make(chan struct{}, MaxParallel)
	var wg sync.WaitGroup
	for i, name := range nodes {
		n := &out[i]
		n.Name = name
		agents := pods[name]
		for _, p := range agents {
			if p.DeletionTimestamp == nil {
				n.Pods++
			}
		}
		if len(agents) == 0 {
			n.Error = "no agent pod on the node"
			continue
		}
		pod := pickPod(agents)
		n.Pod, n.Group = pod.Name, pod.Labels[GroupLabel]
		if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
			n.Error = "agent pod " + podState(pod)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			var s status.Status
			if err := get(ctx, client, opts, pod, status.StatusPath, &s); err != nil {
				n.Error = err.Error()
			} else {
				n.Reachable, n.Agent = true, &s
			}
			n.Took = time.Since(start)
		}()
	}
	wg.Wait()
	f := &Fleet{APIVersion: status.APIVersion, Kind: KindFleet, Nodes: out}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		n.Problems = problems(n, opts.FailOn)
		n.Compliant = len(n.Problems) == 0
		f.Summary.add(n)
	}
	return f, nil
}

// AllCompliant reports whether every node is compliant (and there is at least one).
func (f *Fleet) AllCompliant() bool {
	return f.Summary.Nodes > 0 && f.Summary.Compliant == f.Summary.Nodes
}

func (s *Summary) add(n *Node) {
	s.Nodes++
	if n.Compliant {
		s.Compliant++
	}
	if !n.Reachable {
		s.Unreachable++
		return
	}
	a := n.Agent
	s.Mounts += a.Mounts
	s.Tuned += a.Tuned
	s.Findings.Error += a.Findings.Error
	s.Findings.Warning += a.Findings.Warning
	s.Findings.Info += a.Findings.Info
	s.Stalled += len(a.Stalled)
}

// problems says why a node is not compliant; none when it is.
func problems(n *Node, failOn string) []string {
	var p []string
	if n.Pods > 1 {
		p = append(p, fmt.Sprintf("%d agent pods on the node", n.Pods))
	}
	if !n.Reachable {
		return append(p, "unreachable: "+n.Error)
	}
	a := n.Agent
	if !a.Ready {
		p = append(p, "agent not ready")
	}
	if a.Unhealthy != "" {
		p = append(p, "agent unhealthy: "+a.Unhealthy)
	}
	if a.ReadError != "" {
		p = append(p, "cannot read the host: "+a.ReadError)
	}
	if u := a.Mounts - a.Tuned; u > 0 {
		p = append(p, fmt.Sprintf("%d of %d mounts not tuned", u, a.Mounts))
	}
	if failOn != "" {
		if c := a.Findings.AtLeast(failOn); c > 0 {
			p = append(p, fmt.Sprintf("%d findings at or above %s", c, failOn))
		}
	}
	return p
}

// Audit asks the agent on node for its full audit.
func Audit(ctx context.Context, client corev1client.CoreV1Interface, opts Options, node string) (*status.Audit, error) {
	opts = withDefaults(opts)
	listCtx, cancel := context.WithTimeout(ctx, opts.APITimeout)
	defer cancel()
	pods, err := client.Pods(opts.Namespace).List(listCtx, metav1.ListOptions{
		LabelSelector: AgentSelector, FieldSelector: "spec.nodeName=" + node,
	})
	if err != nil {
		return nil, &APIError{Err: fmt.Errorf("listing agent pods in namespace %s: %w", opts.Namespace, err)}
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("node %s: no agent pod in namespace %s", node, opts.Namespace)
	}
	pod := pickPod(pods.Items)
	if pod.Status.Phase != corev1.PodRunning {
		return nil, fmt.Errorf("node %s: agent pod %s", node, podState(pod))
	}
	var doc status.Audit
	if err := get(ctx, client, opts, pod, status.AuditPath, &doc); err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	if doc.Findings == nil {
		doc.Findings = []audit.Finding{}
	}
	return &doc, nil
}

// APIError is a failure to ask the API server itself (listing nodes or pods), as opposed
// to one agent not answering.
type APIError struct{ Err error }

func (e *APIError) Error() string { return e.Err.Error() }
func (e *APIError) Unwrap() error { return e.Err }

func withDefaults(opts Options) Options {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.APITimeout <= 0 {
		opts.APITimeout = DefaultAPITimeout
	}
	return opts
}

// listNodesAndPods returns the names of the nodes to show, sorted, and the agent pods by
// node name.
func listNodesAndPods(ctx context.Context, client corev1client.CoreV1Interface, opts Options) ([]string, map[string][]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.APITimeout)
	defer cancel()
	nodeList, err := client.Nodes().List(ctx, metav1.ListOptions{LabelSelector: opts.NodeSelector})
	if err != nil {
		return nil, nil, &APIError{Err: fmt.Errorf("listing nodes: %w", err)}
	}
	podList, err := client.Pods(opts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
	if err != nil {
		return nil, nil, &APIError{Err: fmt.Errorf("listing agent pods in namespace %s: %w", opts.Namespace, err)}
	}
	var names []string
	for _, n := range nodeList.Items {
		if len(opts.Nodes) == 0 || slices.Contains(opts.Nodes, n.Name) {
			names = append(names, n.Name)
		}
	}
	for _, want := range opts.Nodes {
		if !slices.Contains(names, want) {
			return nil, nil, fmt.Errorf("node %s: not found (or not selected by %q)", want, opts.NodeSelector)
		}
	}
	slices.Sort(names)
	pods := map[string][]corev1.Pod{}
	for _, p := range podList.Items {
		if p.Spec.NodeName != "" {
			pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p)
		}
	}
	return names, pods, nil
}

// pickPod is the pod to ask among a node's agent pods: a running one not being deleted,
// the newest first.
func pickPod(pods []corev1.Pod) corev1.Pod {
	rank := func(p corev1.Pod) int {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return 1
		}
		return 0
	}
	return slices.MaxFunc(pods, func(a, b corev1.Pod) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
}

func podState(p corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return p.Name + " terminating"
	}
	return p.Name + " " + strings.ToLower(string(p.Status.Phase))
}

// agentPort is the pod's port named metrics, DefaultPort when it names none.
func agentPort(p corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == "metrics" {
				return strconv.Itoa(int(port.ContainerPort))
			}
		}
	}
	return strconv.Itoa(DefaultPort)
}

// maxBody bounds what is read of one agent's answer (an /audit of thousands of mounts is a
// few MiB).
const maxBody = 64 << 20

// get asks the agent in pod for path through the API server's pod proxy and decodes the
// JSON answer into out, within opts.Timeout.
func get(ctx context.Context, client corev1client.CoreV1Interface, opts Options, pod corev1.Pod, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	rc, err := client.Pods(pod.Namespace).ProxyGet("", pod.Name, agentPort(pod), path, nil).Stream(ctx)
	if err != nil {
		return describe(ctx, err, path, opts.Timeout)
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, maxBody+1))
	if err != nil {
		return describe(ctx, err, path, opts.Timeout)
	}
	if len(body) > maxBody {
		return fmt.Errorf("%s: answer larger than %d bytes", path, maxBody)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: decoding the agent's answer: %w", path, err)
	}
	return nil
}

// describe turns a failed proxy request into one short line.
func describe(ctx context.Context, err error, path string, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", timeout)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("agent has no %s (nfstune before its status endpoint?)", path)
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("forbidden: the user may not get pods/proxy in the agent's namespace")
	}
	msg := err.Error()
	if se, ok := err.(apierrors.APIStatus); ok && se.Status().Message != "" {
		msg = se.Status().Message
	}
	return errors.New(firstLine(msg))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
