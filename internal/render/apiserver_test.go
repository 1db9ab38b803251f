//go:build apiserver

package render

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nfstune/nfstune/internal/apiservertest"
)

// These tests send the rendered objects to a real kube-apiserver backed by etcd, with the
// default admission plugins (PodSecurity, Priority, ResourceQuota, ServiceAccount) and
// strict server-side field validation. `make apiserver-test` builds both binaries from the
// Go module proxy and passes them in NFSTUNE_KUBE_APISERVER and NFSTUNE_ETCD.

type apiServer struct {
	*apiservertest.Server
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	return &apiServer{apiservertest.Start(t, nil)}
}

func (s *apiServer) do(t *testing.T, method, path string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	return s.Do(t, method, path, body)
}

// collection is the REST path objects of o's kind are created under.
func collection(o Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	plural := strings.ToLower(kind) + "s"
	switch kind {
	case "StorageClass":
		plural = "storageclasses"
	case "NetworkPolicy":
		plural = "networkpolicies"
	}
	prefix := "/api/v1"
	switch kind {
	case "DaemonSet":
		prefix = "/apis/apps/v1"
	case "StorageClass":
		prefix = "/apis/storage.k8s.io/v1"
	case "NetworkPolicy":
		prefix = "/apis/networking.k8s.io/v1"
	case "ClusterRole", "Role":
		prefix = "/apis/rbac.authorization.k8s.io/v1"
	}
	if ns := o.GetNamespace(); ns != "" {
		return prefix + "/namespaces/" + ns + "/" + plural
	}
	return prefix + "/" + plural
}

// create posts o with strict field validation and returns the status and warnings.
func (s *apiServer) create(t *testing.T, o Object, query string) (int, string, []string) {
	t.Helper()
	m, err := manifest(o)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(m)
	code, resp, hdr := s.do(t, http.MethodPost, collection(o)+"?fieldValidation=Strict"+query, body)
	return code, string(resp), hdr.Values("Warning")
}

// readyQuota sets a ResourceQuota's status as kube-controller-manager would, since quota
// admission rejects pods while a matching quota has no status.
func (s *apiServer) readyQuota(t *testing.T, q *corev1.ResourceQuota) {
	t.Helper()
	q = q.DeepCopy()
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	code, got, _ := s.do(t, http.MethodGet, collection(q)+"/"+q.Name, nil)
	if code != http.StatusOK {
		t.Fatalf("reading quota: %d %s", code, got)
	}
	var cur corev1.ResourceQuota
	if err := json.Unmarshal(got, &cur); err != nil {
		t.Fatal(err)
	}
	q.ResourceVersion = cur.ResourceVersion
	body, _ := json.Marshal(q)
	if code, resp, _ := s.do(t, http.MethodPut, collection(q)+"/"+q.Name+"/status", body); code != http.StatusOK {
		t.Fatalf("setting quota status: %d %s", code, resp)
	}
}

// podFrom is the Pod a DaemonSet controller would create from the template.
func podFrom(ds *appsv1.DaemonSet, ns string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-probe", Namespace: ns, Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
}

func TestAPIServerAcceptsRenderedObjects(t *testing.T) {
	s := startAPIServer(t)
	for _, name := range renderCases {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name+".values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := LoadValues("values.yaml", b)
			if err != nil {
				t.Fatal(err)
			}
			v.Namespace = "t-" + name
			v.Policy = DefaultPolicy
			if v.PriorityClassName == "nfstune-node" {
				// A custom class the test cluster does not have.
				v.PriorityClassName = "system-node-critical"
			}
			objs, err := Render(v, "v0.0.0")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if IsMonitoringKind(o) {
					// The Prometheus Operator's CRDs are not installed in this cluster:
					// TestMonitoringObjects and promtool check these objects instead.
					t.Logf("%s %s: a custom resource, not sent", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
					continue
				}
				code, resp, warnings := s.create(t, o, "")
				if code != http.StatusCreated {
					t.Fatalf("creating %s %s: %d %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), code, resp)
				}
				switch o := o.(type) {
				case *corev1.ResourceQuota:
					s.readyQuota(t, o)
				case *appsv1.DaemonSet:
					// warn=baseline on the namespace: the hostPath use is reported.
					t.Logf("DaemonSet %s warnings: %q", o.Name, warnings)
					if !strings.Contains(strings.Join(warnings, "\n"), "hostPath") {
						t.Errorf("DaemonSet %s: no PodSecurity baseline warning about hostPath: %q", o.Name, warnings)
					}
					// And so are each added capability (ptrace, the per-pod collector's BPF and
					// PERFMON) and an unconfined AppArmor profile (not a Localhost one).
					sc := o.Spec.Template.Spec.Containers[0].SecurityContext
					for _, c := range sc.Capabilities.Add {
						if !strings.Contains(strings.Join(warnings, "\n"), `\"`+string(c)+`\"`) {
							t.Errorf("DaemonSet %s: no PodSecurity baseline warning about %s: %q", o.Name, c, warnings)
						}
					}
					if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined &&
						!strings.Contains(strings.Join(warnings, "\n"), "AppArmor") {
						t.Errorf("DaemonSet %s: no PodSecurity baseline warning about AppArmor: %q", o.Name, warnings)
					}
					// The pods the controller would create pass admission (PodSecurity
					// privileged, Priority, ResourceQuota, ServiceAccount).
					code, resp, _ := s.create(t, podFrom(o, v.Namespace), "&dryRun=All")
					if code != http.StatusCreated {
						t.Errorf("pod of %s rejected: %d %s", o.Name, code, resp)
					}
				}
			}
		})
	}

	// The same pod in a Baseline or Restricted namespace is refused, for its host paths.
	v := DefaultValues()
	ds := agentDaemonSet(v, "v0.0.0", agentGroups(v)[0])
	for _, level := range []string{"baseline", "restricted"} {
		ns := &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: "psa-" + level, Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}},
		}
		sa := serviceAccount(Values{Namespace: ns.Name})
		for _, o := range []Object{ns, sa} {
			if code, resp, _ := s.create(t, o, ""); code != http.StatusCreated {
				t.Fatalf("creating %s: %d %s", o.GetName(), code, resp)
			}
		}
		pod := podFrom(ds, ns.Name)
		pod.Spec.PriorityClassName = "" // no quota in this namespace
		code, resp, _ := s.create(t, pod, "&dryRun=All")
		t.Logf("%s namespace: %d %.300s", level, code, resp)
		if code != http.StatusForbidden || !strings.Contains(resp, "violates PodSecurity") || !strings.Contains(resp, "hostPath") {
			t.Errorf("%s namespace: pod got %d %s, want 403 for hostPath", level, code, resp)
		}
	}

	// Volumes.
	for _, tt := range volumeTests {
		if tt.wantErr != "" {
			continue
		}
		t.Run("volume-"+tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Name = "v-" + strings.ReplaceAll(tt.name, "_", "-")
			objs, _, err := Volume(spec)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Static {
				ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: spec.Namespace}}
				s.create(t, ns, "") // may exist already
			}
			for _, o := range objs {
				if code, resp, _ := s.create(t, o, ""); code != http.StatusCreated {
					t.Errorf("creating %s %s: %d %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), code, resp)
				}
			}
		})
	}
}
