package fleet

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/nfstune/nfstune/internal/printer"
	"github.com/nfstune/nfstune/internal/status"
)

// KindTop is the kind of the Top document.
const KindTop = "FleetPodIO"

// The orders of Top: the rate a row is ranked by, busiest first.
const (
	SortRead    = "read"    // read(2) bytes
	SortServer  = "server"  // READ payload from the server
	SortMapped  = "mapped"  // READ payload started by page faults (mmap)
	SortWrite   = "write"   // write(2) bytes
	SortLatency = "latency" // mean READ latency
)

// SortKeys are Top's orders, the default first.
var SortKeys = []string{SortServer, SortRead, SortMapped, SortWrite, SortLatency}

// sortRate is the rate each order ranks by.
var sortRate = map[string]func(status.PodTraffic) float64{
	SortRead:    func(t status.PodTraffic) float64 { return t.ReadBytes },
	SortServer:  func(t status.PodTraffic) float64 { return t.ServerReadBytes },
	SortMapped:  func(t status.PodTraffic) float64 { return t.FaultReadBytes },
	SortWrite:   func(t status.PodTraffic) float64 { return t.WriteBytes },
	SortLatency: func(t status.PodTraffic) float64 { return t.ReadLatency },
}

// DefaultTopLimit is how many rows Top keeps unless told otherwise.
const DefaultTopLimit = 20

// The states of a node's per-pod I/O collector (TopNode.Collector).
const (
	CollectorLoaded      = "loaded"      // every part runs
	CollectorPartial     = "partial"     // runs, with parts missing (Why)
	CollectorNotLoaded   = "not-loaded"  // the agent tried and could not (Why)
	CollectorOff         = "off"         // the agent runs without --pod-io (or predates it)
	CollectorUnreachable = "unreachable" // the agent did not answer (Why)
)

// Top is the fleet's pods ranked by their NFS traffic (kubectl nfstune top), from the
// per-pod I/O collector of each agent (agent --pod-io).
type Top struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Sort is the order of Pods (SortKeys).
	Sort string `json:"sort"`
	// Pods are the busiest pairs of a pod and a superblock, at most the limit asked for.
	// Each agent lists its status.MaxListed busiest by READ payload, so another order
	// ranks those.
	Pods []TopPod `json:"pods"`
	// Listed counts the pairs the agents listed, before the limit.
	Listed int `json:"listed"`
	// Nodes is every node asked, sorted by name, with its collector's state.
	Nodes []TopNode `json:"nodes"`
}

// TopPod is one pod's NFS traffic on one superblock of a node, per second over its agent's
// last interval. Namespace and Name are empty for the node's own tasks (no PodUID) and for
// a pod the API server does not know (any more).
type TopPod struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	status.PodTraffic
}

// TopNode is one node's collector: whether it runs, and why not.
type TopNode struct {
	Name      string `json:"name"`
	Collector string `json:"collector"`
	Why       string `json:"why,omitempty"`
	// Pods counts the pairs its agent listed.
	Pods int `json:"pods"`
}

// noCollector is why an agent's /status has no podIO.
const noCollector = "the agent runs without --pod-io"

// NewTop ranks the pairs the reachable agents of f list by the rate sort names (SortKeys),
// busiest first, and keeps the first limit (all for 0). Ties fall to the READ payload,
// read(2) bytes and write bytes, then to the node, the pod UID and the device, so that one
// fleet always gives one order.
func NewTop(f *Fleet, sort string, limit int) (*Top, error) {
	rate, ok := sortRate[sort]
	if !ok {
		return nil, fmt.Errorf("unknown sort %q (want %s)", sort, strings.Join(SortKeys, ", "))
	}
	if limit < 0 {
		return nil, fmt.Errorf("negative limit %d", limit)
	}
	t := &Top{APIVersion: status.APIVersion, Kind: KindTop, Sort: sort, Pods: []TopPod{}, Nodes: []TopNode{}}
	for _, n := range f.Nodes {
		tn := TopNode{Name: n.Name}
		switch pio := podIO(n); {
		case !n.Reachable:
			tn.Collector, tn.Why = CollectorUnreachable, n.Error
		case pio == nil:
			tn.Collector, tn.Why = CollectorOff, noCollector
		case !pio.Loaded:
			tn.Collector, tn.Why = CollectorNotLoaded, pio.Why
		default:
			tn.Collector, tn.Why = CollectorLoaded, pio.Why
			if pio.Why != "" {
				tn.Collector = CollectorPartial
			}
			for _, p := range pio.Pods {
				t.Pods = append(t.Pods, TopPod{Node: n.Name, PodTraffic: p})
			}
			tn.Pods = len(pio.Pods)
		}
		t.Nodes = append(t.Nodes, tn)
	}
	slices.SortFunc(t.Nodes, func(a, b TopNode) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(t.Pods, func(a, b TopPod) int {
		return cmp.Or(cmp.Compare(rate(b.PodTraffic), rate(a.PodTraffic)),
			cmp.Compare(b.ServerReadBytes, a.ServerReadBytes), cmp.Compare(b.ReadBytes, a.ReadBytes), cmp.Compare(b.WriteBytes, a.WriteBytes),
			strings.Compare(a.Node, b.Node), strings.Compare(a.PodUID, b.PodUID), strings.Compare(a.Device, b.Device))
	})
	t.Listed = len(t.Pods)
	if limit > 0 && len(t.Pods) > limit {
		t.Pods = t.Pods[:limit]
	}
	return t, nil
}

func podIO(n Node) *status.PodIO {
	if n.Agent == nil {
		return nil
	}
	return n.Agent.PodIO
}

// Collecting reports whether any node's collector runs, fully or in part.
func (t *Top) Collecting() bool {
	return slices.ContainsFunc(t.Nodes, func(n TopNode) bool {
		return n.Collector == CollectorLoaded || n.Collector == CollectorPartial
	})
}

// NamePods names the pods of t's rows from the API server: one listing of pods, of the one
// node involved (a field selector) or of every namespace. A pod the listing lacks keeps
// only its UID: it is gone, or was created since. A user who may not list pods outside the
// agents' namespace gets the UIDs and the error, an APIError.
func (t *Top) NamePods(ctx context.Context, client corev1client.CoreV1Interface, opts Options) error {
	opts = withDefaults(opts)
	var nodes []string
	for _, p := range t.Pods {
		if p.PodUID != "" && !slices.Contains(nodes, p.Node) {
			nodes = append(nodes, p.Node)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	list := metav1.ListOptions{}
	if len(nodes) == 1 {
		list.FieldSelector = "spec.nodeName=" + nodes[0]
	}
	ctx, cancel := context.WithTimeout(ctx, opts.APITimeout)
	defer cancel()
	pods, err := client.Pods("").List(ctx, list)
	if err != nil {
		if apierrors.IsForbidden(err) {
			err = fmt.Errorf("forbidden: the user may not list pods in every namespace")
		}
		return &APIError{Err: fmt.Errorf("listing pods to name them: %w", err)}
	}
	byUID := make(map[types.UID]*metav1.ObjectMeta, len(pods.Items))
	for i := range pods.Items {
		byUID[pods.Items[i].UID] = &pods.Items[i].ObjectMeta
	}
	for i := range t.Pods {
		p := &t.Pods[i]
		if m := byUID[types.UID(p.PodUID)]; p.PodUID != "" && m != nil {
			p.Namespace, p.Name = m.Namespace, m.Name
		}
	}
	return nil
}

// bytesPerMiB turns the agents' bytes per second into the table's MiB/s.
const bytesPerMiB = 1 << 20

// WriteTopTable writes one line per row, then one line per node whose collector does not
// run in full, with why.
func WriteTopTable(w io.Writer, t *Top) error {
	ew := printer.New(w)
	switch {
	case len(t.Pods) > 0:
		cols := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		tw := printer.New(cols)
		tw.Printf("POD\tNODE\tVOLUME\tREAD(MiB/s)\tSERVER(MiB/s)\tMMAP(MiB/s)\tWRITE(MiB/s)\tLATENCY(ms)\n")
		for _, p := range t.Pods {
			latency := "-"
			if p.ReadLatency > 0 {
				latency = fmt.Sprintf("%.1f", p.ReadLatency*1000)
			}
			tw.Printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.PodName(), p.Node, p.Volume(),
				mibs(p.ReadBytes), mibs(p.ServerReadBytes), mibs(p.FaultReadBytes), mibs(p.WriteBytes), latency)
		}
		if err := cols.Flush(); err != nil {
			return err
		}
		if more := t.Listed - len(t.Pods); more > 0 {
			ew.Printf("... and %d more (--limit)\n", more)
		}
	case t.Collecting():
		ew.Printf("no pod read or wrote on NFS in the agents' last interval\n")
	}
	var notes []string
	for _, n := range t.Nodes {
		switch n.Collector {
		case CollectorUnreachable:
			notes = append(notes, n.Name+": unreachable: "+n.Why)
		case CollectorOff, CollectorNotLoaded:
			notes = append(notes, n.Name+": no per-pod I/O: "+n.Why)
		case CollectorPartial:
			notes = append(notes, n.Name+": per-pod I/O in part: "+n.Why)
		}
	}
	if len(notes) > 0 && (len(t.Pods) > 0 || t.Collecting()) {
		ew.Printf("\n")
	}
	for _, note := range notes {
		ew.Printf("%s\n", note)
	}
	return ew.Err()
}

// PodName is how the table names the row's pod: namespace/name, "(node)" for the node's
// own tasks, the UID for a pod the API server does not know.
func (p TopPod) PodName() string {
	switch {
	case p.PodUID == "":
		return "(node)"
	case p.Name == "":
		return p.PodUID
	}
	return p.Namespace + "/" + p.Name
}

// Volume is server:export, or the mount point, or the device, whichever the agent knew.
func (p TopPod) Volume() string {
	switch {
	case p.Server != "":
		return p.Server + ":" + p.Export
	case p.MountPoint != "":
		return p.MountPoint
	}
	return p.Device
}

// mibs formats bytes per second as MiB/s with two decimals, "<0.01" for traffic too small
// to show as more than none.
func mibs(b float64) string {
	switch v := b / bytesPerMiB; {
	case v == 0:
		return "0"
	case v < 0.005:
		return "<0.01"
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
