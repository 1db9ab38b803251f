package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nfstune/nfstune/internal/status"
)

const mib = 1 << 20

// topFleet is five nodes: two whose collectors list pods (node-b's in part), one whose
// agent runs without it, one whose collector could not load, one unreachable.
func topFleet() *Fleet {
	withPodIO := func(name string, io *status.PodIO) Node {
		return Node{Name: name, Reachable: true, Agent: &status.Status{Node: name, Ready: true, PodIO: io}}
	}
	return &Fleet{Nodes: []Node{
		withPodIO("node-a", &status.PodIO{Loaded: true, Pods: []status.PodTraffic{
			{PodUID: "uid-train", Device: "0:52", Server: "10.0.0.5", Export: "/data", ReadBytes: 40 * mib, ServerReadBytes: 80 * mib, FaultReadBytes: 60 * mib, ReadLatency: 0.004},
			{PodUID: "", Device: "0:52", Server: "10.0.0.5", Export: "/data", ReadBytes: 1 * mib, ServerReadBytes: 1 * mib, WriteBytes: 2 * mib, ReadLatency: 0.002},
		}}),
		withPodIO("node-b", &status.PodIO{Loaded: true, Why: "fault not loaded: no BTF for filemap_fault", Pods: []status.PodTraffic{
			{PodUID: "uid-gone", Device: "0:60", MountPoint: "/mnt/scratch", ReadBytes: 10 * mib, ServerReadBytes: 10 * mib, WriteBytes: 50 * mib, ReadLatency: 0.020},
			// As busy as node-a's node row on every rate: the node's name breaks the tie.
			{PodUID: "uid-web", Device: "0:61", Server: "fs-1.efs", Export: "/", ReadBytes: 1 * mib, ServerReadBytes: 1 * mib, WriteBytes: 2 * mib, ReadLatency: 0.002},
		}}),
		withPodIO("node-c", nil),
		withPodIO("node-d", &status.PodIO{Why: "the nfs module is not loaded"}),
		{Name: "node-e", Error: "no answer within 5s"},
	}}
}

func rows(t *Top) []string {
	var out []string
	for _, p := range t.Pods {
		out = append(out, p.Node+"/"+p.PodName())
	}
	return out
}

// TestTopOrder: each --sort ranks the pairs of every node by its rate, busiest first, with
// the same tie-breaks every time; the limit keeps the first rows and counts the rest.
func TestTopOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sort  string
		limit int
		want  []string
	}{
		{SortServer, 0, []string{"node-a/uid-train", "node-b/uid-gone", "node-a/(node)", "node-b/uid-web"}},
		{SortRead, 0, []string{"node-a/uid-train", "node-b/uid-gone", "node-a/(node)", "node-b/uid-web"}},
		{SortMapped, 0, []string{"node-a/uid-train", "node-b/uid-gone", "node-a/(node)", "node-b/uid-web"}},
		{SortWrite, 0, []string{"node-b/uid-gone", "node-a/(node)", "node-b/uid-web", "node-a/uid-train"}},
		{SortLatency, 0, []string{"node-b/uid-gone", "node-a/uid-train", "node-a/(node)", "node-b/uid-web"}},
		{SortWrite, 2, []string{"node-b/uid-gone", "node-a/(node)"}},
	} {
		// The same order whatever the order the agents are asked in.
		reversed := topFleet()
		slices.Reverse(reversed.Nodes)
		for _, f := range []*Fleet{topFleet(), reversed} {
			top, err := NewTop(f, tt.sort, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := rows(top); !slices.Equal(got, tt.want) {
				t.Errorf("--sort %s --limit %d, nodes from %s: %q, want %q", tt.sort, tt.limit, f.Nodes[0].Name, got, tt.want)
			}
		}
		top, err := NewTop(topFleet(), tt.sort, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if top.Listed != 4 || top.Sort != tt.sort {
			t.Errorf("--sort %s: listed %d, sort %q; want 4 and the sort", tt.sort, top.Listed, top.Sort)
		}
	}
	if _, err := NewTop(topFleet(), "cpu", 0); err == nil {
		t.Error("an unknown sort is accepted")
	}
	if _, err := NewTop(topFleet(), SortRead, -1); err == nil {
		t.Error("a negative limit is accepted")
	}
}

// TestTopNodes: every node's collector, with why it does not run in full.
func TestTopNodes(t *testing.T) {
	t.Parallel()
	top, err := NewTop(topFleet(), SortServer, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []TopNode{
		{Name: "node-a", Collector: CollectorLoaded, Pods: 2},
		{Name: "node-b", Collector: CollectorPartial, Why: "fault not loaded: no BTF for filemap_fault", Pods: 2},
		{Name: "node-c", Collector: CollectorOff, Why: noCollector},
		{Name: "node-d", Collector: CollectorNotLoaded, Why: "the nfs module is not loaded"},
		{Name: "node-e", Collector: CollectorUnreachable, Why: "no answer within 5s"},
	}
	if !slices.Equal(top.Nodes, want) {
		t.Errorf("nodes %+v, want %+v", top.Nodes, want)
	}
	if !top.Collecting() {
		t.Error("Collecting() is false with two collectors running")
	}
	f := topFleet()
	f.Nodes = slices.DeleteFunc(f.Nodes, func(n Node) bool { return n.Name == "node-a" || n.Name == "node-b" })
	if top, _ := NewTop(f, SortServer, 0); top.Collecting() || len(top.Pods) != 0 {
		t.Errorf("without a running collector: Collecting() %v, %d rows", top.Collecting(), len(top.Pods))
	}
}

// podsAPI serves the pods given at /api/v1/pods (every namespace), filtered by the
// spec.nodeName field selector, or 403 when forbidden; it records each listing's query.
type podsAPI struct {
	pods      []corev1.Pod
	forbidden bool
	mu        sync.Mutex
	queries   []string
}

func (a *podsAPI) client(t *testing.T) corev1client.CoreV1Interface {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/pods" {
			http.NotFound(w, r)
			return
		}
		a.mu.Lock()
		a.queries = append(a.queries, r.URL.RawQuery)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if a.forbidden {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403, Message: `pods is forbidden: User "viewer" cannot list resource "pods"`})
			return
		}
		node, _ := strings.CutPrefix(r.URL.Query().Get("fieldSelector"), "spec.nodeName=")
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, p := range a.pods {
			if node == "" || p.Spec.NodeName == node {
				list.Items = append(list.Items, p)
			}
		}
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	c, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func workload(ns, name, node, uid string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node}}
}

// TestTopNamePods: one listing names the pods by UID; the node row stays "(node)" and a
// pod the listing lacks keeps its UID. With the rows on one node the listing is of that
// node; with none of a pod, there is none. A forbidden listing is an APIError and leaves
// the UIDs.
func TestTopNamePods(t *testing.T) {
	t.Parallel()
	api := &podsAPI{pods: []corev1.Pod{
		workload("ml", "train-0", "node-a", "uid-train"),
		workload("shop", "web-7f9c", "node-b", "uid-web"),
		workload("other", "unrelated", "node-z", "uid-other"),
	}}
	c := api.client(t)
	top, err := NewTop(topFleet(), SortServer, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := top.NamePods(context.Background(), c, Options{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"node-a/ml/train-0", "node-b/uid-gone", "node-a/(node)", "node-b/shop/web-7f9c"}
	if got := rows(top); !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	if len(api.queries) != 1 || strings.Contains(api.queries[0], "fieldSelector") {
		t.Errorf("listings %q, want one of every pod", api.queries)
	}

	// The first row alone: node-a's pod, listed by its node.
	api.queries = nil
	top, _ = NewTop(topFleet(), SortServer, 1)
	if err := top.NamePods(context.Background(), c, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := rows(top); !slices.Equal(got, []string{"node-a/ml/train-0"}) || !slices.Equal(api.queries, []string{"fieldSelector=spec.nodeName%3Dnode-a"}) {
		t.Errorf("rows %q after listings %q, want node-a's pod named from a listing of node-a", got, api.queries)
	}

	// Only the node's own row: nothing to name, no listing.
	api.queries = nil
	f := &Fleet{Nodes: []Node{{Name: "node-a", Reachable: true, Agent: &status.Status{PodIO: &status.PodIO{Loaded: true,
		Pods: []status.PodTraffic{{Device: "0:52", ReadBytes: mib}}}}}}}
	top, _ = NewTop(f, SortServer, 0)
	if err := top.NamePods(context.Background(), c, Options{}); err != nil || len(api.queries) != 0 {
		t.Errorf("node row only: %v after listings %q, want none", err, api.queries)
	}

	api.forbidden = true
	top, _ = NewTop(topFleet(), SortServer, 0)
	err = top.NamePods(context.Background(), c, Options{})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || !strings.Contains(err.Error(), "may not list pods in every namespace") {
		t.Errorf("forbidden listing: %v, want an APIError that says so", err)
	}
	if got := rows(top); !slices.Equal(got, []string{"node-a/uid-train", "node-b/uid-gone", "node-a/(node)", "node-b/uid-web"}) {
		t.Errorf("rows after a forbidden listing %q, want the UIDs", got)
	}
}

// TestWriteTopTable: the rates in MiB/s and ms, the volume as server:export or the mount
// point, the rows left out, and one line per node whose collector does not run in full.
func TestWriteTopTable(t *testing.T) {
	t.Parallel()
	top, err := NewTop(topFleet(), SortServer, 3)
	if err != nil {
		t.Fatal(err)
	}
	top.Pods[0].Namespace, top.Pods[0].Name = "ml", "train-0"
	var b bytes.Buffer
	if err := WriteTopTable(&b, top); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	want := [][]string{
		{"POD", "NODE", "VOLUME", "READ(MiB/s)", "SERVER(MiB/s)", "MMAP(MiB/s)", "WRITE(MiB/s)", "LATENCY(ms)"},
		{"ml/train-0", "node-a", "10.0.0.5:/data", "40.00", "80.00", "60.00", "0", "4.0"},
		{"uid-gone", "node-b", "/mnt/scratch", "10.00", "10.00", "0", "50.00", "20.0"},
		{"(node)", "node-a", "10.0.0.5:/data", "1.00", "1.00", "0", "2.00", "2.0"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !slices.Equal(got, w) {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}
	tail := strings.Join(lines[len(want):], "\n")
	for _, w := range []string{
		"... and 1 more (--limit)\n\n",
		"node-b: per-pod I/O in part: fault not loaded: no BTF for filemap_fault\n",
		"node-c: no per-pod I/O: the agent runs without --pod-io\n",
		"node-d: no per-pod I/O: the nfs module is not loaded\n",
		"node-e: unreachable: no answer within 5s\n",
	} {
		if !strings.Contains(tail, w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
	if strings.Contains(tail, "node-a:") {
		t.Errorf("node-a's collector runs in full, yet it is named:\n%s", b.String())
	}
	// A collector that saw no traffic: no table, a line that says so, then the notes.
	quiet := &Fleet{Nodes: []Node{
		{Name: "node-a", Reachable: true, Agent: &status.Status{PodIO: &status.PodIO{Loaded: true}}},
		{Name: "node-c", Reachable: true, Agent: &status.Status{}},
	}}
	top, _ = NewTop(quiet, SortServer, 0)
	b.Reset()
	if err := WriteTopTable(&b, top); err != nil {
		t.Fatal(err)
	}
	if want := "no pod read or wrote on NFS in the agents' last interval\n\nnode-c: no per-pod I/O: the agent runs without --pod-io\n"; b.String() != want {
		t.Errorf("without traffic: %q, want %q", b.String(), want)
	}
	for v, want := range map[float64]string{0: "0", 1024: "<0.01", 1.5 * mib: "1.50"} {
		if got := mibs(v); got != want {
			t.Errorf("mibs(%v) = %q, want %q", v, got, want)
		}
	}
}
