package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nfstune/nfstune/internal/status"
)

func pod(name, node string, phase corev1.PodPhase, created time.Time) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: DefaultNamespace, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{GroupLabel: "default"}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func terminating(p corev1.Pod) corev1.Pod {
	p.DeletionTimestamp = new(metav1.Now())
	return p
}

// newClient serves the nodes and pods given, and answers each pod's /status with ready,
// or with 404 for the pods named in old (an agent without the endpoint).
func newClient(t *testing.T, nodes []string, pods []corev1.Pod, old ...string) corev1client.CoreV1Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		const podsPath = "/api/v1/namespaces/nfstune/pods"
		switch p := r.URL.Path; {
		case p == "/api/v1/nodes":
			list := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
			for _, n := range nodes {
				list.Items = append(list.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
			}
			_ = json.NewEncoder(w).Encode(list)
		case p == podsPath:
			_ = json.NewEncoder(w).Encode(corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods})
		case strings.HasSuffix(p, "/proxy"+status.StatusPath):
			name, _, _ := strings.Cut(strings.TrimPrefix(p, podsPath+"/"), ":")
			if slices.Contains(old, name) {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
					Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404, Message: "404 page not found"})
				return
			}
			_ = json.NewEncoder(w).Encode(status.Status{Node: name, Ready: true, Mounts: 1, Tuned: 1})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := corev1client.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGatherPods: a node with several agent pods (two groups, or two releases, select it)
// is not compliant and the running, newest one is asked; a pending pod is not asked; an
// agent without /status says so; a pod being deleted next to the new one is not counted.
func TestGatherPods(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newClient(t, []string{"a", "b", "c"}, []corev1.Pod{
		pod("a-old", "a", corev1.PodRunning, now.Add(-time.Hour)),
		pod("a-new", "a", corev1.PodRunning, now),
		pod("a-pending", "a", corev1.PodPending, now.Add(time.Hour)),
		pod("b-pending", "b", corev1.PodPending, now),
		pod("c-old", "c", corev1.PodRunning, now),
		terminating(pod("c-gone", "c", corev1.PodRunning, now.Add(-time.Hour))),
	}, "c-old")
	f, err := Gather(context.Background(), c, Options{Timeout: time.Second, FailOn: "error"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		pod      string
		problems []string
	}{
		"a": {"a-new", []string{"3 agent pods on the node"}},
		"b": {"b-pending", []string{"unreachable: agent pod b-pending pending"}},
		"c": {"c-old", []string{"unreachable: agent has no /status (nfstune before its status endpoint?)"}},
	}
	for _, n := range f.Nodes {
		w := want[n.Name]
		if n.Pod != w.pod || !slices.Equal(n.Problems, w.problems) || n.Compliant {
			t.Errorf("node %s: pod %s, problems %q; want %s, %q", n.Name, n.Pod, n.Problems, w.pod, w.problems)
		}
	}
	if f.AllCompliant() || f.Summary.Unreachable != 2 {
		t.Errorf("summary %+v: want none compliant, 2 unreachable", f.Summary)
	}
}
