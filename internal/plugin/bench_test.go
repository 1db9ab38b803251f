package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nfstune/nfstune/internal/bench"
	"github.com/nfstune/nfstune/internal/fleetbench"
)

// fakeCluster is an API server with the objects kubectl nfstune bench handles: it keeps the
// ConfigMaps and Jobs created, plays the Job controller (one Running pod per completion
// index) and the pods: each pod's log has its "ready" line, and once the ConfigMap holds
// a start time, the lines of every step up to the rates' end, from result(index, step, rate).
type fakeCluster struct {
	t      *testing.T
	mu     sync.Mutex
	nodes  []string
	result func(index, step, rate int) bench.CurveStep
	// failIndex, when >= 0, is a pod that fails with an error line at step 1.
	failIndex int
	// onStart is called when the start time is written.
	onStart func()
	// logsFail makes pods/log fail, as on a cluster whose API server cannot reach kubelet.
	logsFail bool

	configMaps map[string]*corev1.ConfigMap
	jobs       map[string]*batchv1.Job
	pods       map[string]*corev1.Pod
	// terminating counts the listings a deleted pod still appears in.
	terminating map[string]int
	// created are the Jobs as created; jobDeletes the propagation policies of the Jobs'
	// deletions; podDeletes the selectors of pod deletions; cmDeletes the ConfigMaps
	// deleted.
	created    []batchv1.Job
	jobDeletes []string
	podDeletes []string
	cmDeletes  []string
	// listsAfterDelete counts the pod listings after the Job's deletion.
	listsAfterDelete int
}

func newFakeCluster(t *testing.T) (*fakeCluster, fleetbench.Clients) {
	f := &fakeCluster{
		t: t, nodes: []string{"node-a", "node-b", "node-c"}, failIndex: -1,
		configMaps: map[string]*corev1.ConfigMap{}, jobs: map[string]*batchv1.Job{}, pods: map[string]*corev1.Pod{}, terminating: map[string]int{},
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := batchv1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, fleetbench.Clients{Core: core, Batch: batch}
}

func (f *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if err := json.NewEncoder(w).Encode(v); err != nil {
			f.t.Error(err)
		}
	}
	notFound := func(what string) {
		writeJSON(http.StatusNotFound, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: what + " not found"})
	}
	ok := func() {
		writeJSON(http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
	}
	body, _ := io.ReadAll(r.Body)
	const core, batch = "/api/v1/namespaces/eda/", "/apis/batch/v1/namespaces/eda/"
	p := r.URL.Path
	switch {
	case p == core+"configmaps" && r.Method == http.MethodPost:
		var cm corev1.ConfigMap
		if err := json.Unmarshal(body, &cm); err != nil {
			f.t.Error(err)
		}
		f.configMaps[cm.Name] = &cm
		writeJSON(http.StatusCreated, cm)
	case strings.HasPrefix(p, core+"configmaps/"):
		name := strings.TrimPrefix(p, core+"configmaps/")
		if f.configMaps[name] == nil {
			notFound("configmap " + name)
			return
		}
		switch r.Method {
		case http.MethodPut:
			var cm corev1.ConfigMap
			if err := json.Unmarshal(body, &cm); err != nil {
				f.t.Error(err)
			}
			f.configMaps[name] = &cm
			if f.onStart != nil && cm.Data["start"] != "" {
				f.onStart()
			}
			writeJSON(http.StatusOK, cm)
		case http.MethodDelete:
			delete(f.configMaps, name)
			f.cmDeletes = append(f.cmDeletes, name)
			ok()
		}
	case p == batch+"jobs" && r.Method == http.MethodPost:
		var job batchv1.Job
		if err := json.Unmarshal(body, &job); err != nil {
			f.t.Error(err)
		}
		f.created = append(f.created, job)
		f.jobs[job.Name] = &job
		for i := range int(*job.Spec.Completions) {
			name := fmt.Sprintf("%s-%d-x%d", job.Name, i, i)
			f.pods[name] = &corev1.Pod{
				TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "eda", Labels: job.Spec.Template.Labels,
					Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: fmt.Sprint(i)}},
				Spec:   corev1.PodSpec{NodeName: f.nodes[i%len(f.nodes)]},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			}
		}
		writeJSON(http.StatusCreated, job)
	case strings.HasPrefix(p, batch+"jobs/"):
		name := strings.TrimPrefix(p, batch+"jobs/")
		job := f.jobs[name]
		if job == nil {
			notFound("job " + name)
			return
		}
		switch r.Method {
		case http.MethodGet:
			writeJSON(http.StatusOK, job)
		case http.MethodDelete:
			var opts metav1.DeleteOptions
			_ = json.Unmarshal(body, &opts)
			policy := ""
			if opts.PropagationPolicy != nil {
				policy = string(*opts.PropagationPolicy)
			}
			f.jobDeletes = append(f.jobDeletes, policy)
			delete(f.jobs, name)
			// The pods terminate: they stay listed a while, as while they remove
			// their directories.
			for n := range f.pods {
				f.terminating[n] = 2
			}
			ok()
		}
	case p == core+"pods" && r.Method == http.MethodGet:
		sel := r.URL.Query().Get("labelSelector")
		key, val, _ := strings.Cut(sel, "=")
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		if len(f.jobDeletes) > 0 {
			f.listsAfterDelete++
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range f.pods {
				if !yield(n) {
					return
				}
			}
		}) {
			pod := f.pods[name]
			if pod.Labels[key] != val {
				continue
			}
			if left, ok := f.terminating[name]; ok {
				if left == 0 {
					delete(f.pods, name)
					continue
				}
				f.terminating[name] = left - 1
			}
			list.Items = append(list.Items, *pod)
		}
		writeJSON(http.StatusOK, list)
	case p == core+"pods" && r.Method == http.MethodDelete:
		f.podDeletes = append(f.podDeletes, r.URL.Query().Get("labelSelector"))
		for n := range f.pods {
			if _, ok := f.terminating[n]; !ok {
				f.terminating[n] = 2
			}
		}
		ok()
	case strings.HasPrefix(p, core+"pods/") && strings.HasSuffix(p, "/log"):
		name := strings.TrimSuffix(strings.TrimPrefix(p, core+"pods/"), "/log")
		pod := f.pods[name]
		if pod == nil {
			notFound("pod " + name)
			return
		}
		if f.logsFail {
			writeJSON(http.StatusInternalServerError, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: "kubelet: Unauthorized"})
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, f.log(pod))
	default:
		http.NotFound(w, r)
	}
}

// log is what a pod has written so far: a progress line on stderr, its ready line, and
// its steps once the start time is known.
func (f *fakeCluster) log(pod *corev1.Pod) string {
	idx, err := strconv.Atoi(pod.Annotations[batchv1.JobCompletionIndexAnnotation])
	if err != nil {
		f.t.Error(err)
	}
	job := f.jobs[pod.Labels[fleetbench.InstanceLabel]]
	if job == nil {
		return ""
	}
	args := job.Spec.Template.Spec.Containers[0].Args
	flag := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	vols := strings.Split(flag("volumes"), ",")
	base := bench.FleetLine{Index: idx, Node: pod.Spec.NodeName, Volume: vols[idx%len(vols)], Dir: flag("dir") + "/" + job.Name + fmt.Sprintf("-%d", idx)}
	var b strings.Builder
	write := func(l bench.FleetLine) {
		out, _ := json.Marshal(l)
		b.Write(out)
		b.WriteByte('\n')
	}
	b.WriteString("fio: laying out files\n")
	ready := base
	ready.Event = bench.FleetReady
	write(ready)
	if cm := f.configMaps[job.Name]; cm == nil || cm.Data["start"] == "" {
		return b.String()
	}
	ra := 4096 * (1 + idx%2)
	for i, rate := range strings.Split(flag("rates"), ",") {
		r, err := strconv.Atoi(rate)
		if err != nil {
			f.t.Error(err)
		}
		l := base
		if idx == f.failIndex {
			l.Event, l.Error = bench.FleetError, "step 1: fio: No space left on device"
			write(l)
			pod.Status.Phase = corev1.PodFailed
			break
		}
		res := f.result(idx, i+1, r)
		l.Event, l.Step, l.Result = bench.FleetStep, i+1, &res
		l.Tuning = &bench.Tuning{MountPoint: "/volumes/0", FSType: "nfs4", ReadAheadKB: &ra}
		write(l)
	}
	return b.String()
}

// podResult is a pod's step: every pod keeps up with its load, a little more the higher
// its index, until the third step, where each achieves half of it.
func podResult(index, step, rate int) bench.CurveStep {
	achieved := float64(rate) + float64(index)*1.5
	if step >= 3 {
		achieved = float64(rate)/2 + float64(index)
	}
	return bench.CurveStep{OfferedIOPS: float64(rate), IOPS: achieved, P50ms: 1 + float64(index)/10, P99ms: 4 + float64(index)}
}

func benchOptions() fleetbench.Options {
	return fleetbench.Options{
		Namespace: "eda", Name: "curve", Image: "lab/nfstune-fio:1", PVCs: []string{"data-a", "data-b"}, Dir: "bench",
		Pods: 5, Rates: []int{100, 200, 400, 800}, Runtime: 2 * time.Second, StepGap: time.Second, StartDelay: time.Millisecond,
		RunAsUser: 65532, LatencyBound: 50 * time.Millisecond, Poll: 5 * time.Millisecond, CleanupTimeout: 30 * time.Second, ReadyTimeout: time.Minute,
	}
}

// TestBenchJobSpec: the Job is Indexed with a pod per completion, all at once, spread over
// the nodes, least privileged, with no host path and no API token, each claim mounted and
// the ConfigMap of the start time.
func TestBenchJobSpec(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	f.result = podResult
	var out, errOut bytes.Buffer
	if err := runBench(context.Background(), &globals{}, Streams{Out: &out, ErrOut: &errOut}, c, benchOptions()); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if len(f.created) != 1 {
		t.Fatalf("%d Jobs created, want 1", len(f.created))
	}
	job := f.created[0]
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 5 || *s.Parallelism != 5 || *s.BackoffLimit != 0 {
		t.Errorf("Job spec: mode %v, completions %d, parallelism %d, backoff %d; want Indexed, 5, 5, 0",
			s.CompletionMode, *s.Completions, *s.Parallelism, *s.BackoffLimit)
	}
	pod := s.Template.Spec
	if len(pod.TopologySpreadConstraints) != 1 {
		t.Fatalf("topology spread: %+v", pod.TopologySpreadConstraints)
	}
	ts := pod.TopologySpreadConstraints[0]
	if ts.TopologyKey != corev1.LabelHostname || ts.MaxSkew != 1 || ts.WhenUnsatisfiable != corev1.DoNotSchedule ||
		ts.LabelSelector.MatchLabels[fleetbench.InstanceLabel] != "curve" || s.Template.Labels[fleetbench.InstanceLabel] != "curve" {
		t.Errorf("topology spread %+v does not spread the Job's pods over the nodes", ts)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v, want non-root and RuntimeDefault seccomp", psc)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("pod shares host namespaces or mounts an API token: %+v", pod)
	}
	var claims []string
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a host path", v.Name)
		}
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
		if v.ConfigMap != nil && v.ConfigMap.Name != "curve" {
			t.Errorf("ConfigMap volume %s, want the Job's", v.ConfigMap.Name)
		}
	}
	if !slices.Equal(claims, []string{"data-a", "data-b"}) {
		t.Errorf("claims %q, want data-a and data-b", claims)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	sc := ctr.SecurityContext
	if sc == nil || sc.Privileged != nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v, want no escalation, every capability dropped, read-only root", sc)
	}
	if ctr.Image != "lab/nfstune-fio:1" || !slices.Contains(ctr.Args, "--dir=bench") || !slices.Contains(ctr.Args, "--job=curve") ||
		!slices.Contains(ctr.Args, "--rates=100,200,400,800") || !slices.Contains(ctr.Args, "--step-period=3s") ||
		!slices.Contains(ctr.Args, "--profile=eda-mix") {
		t.Errorf("container %s %q", ctr.Image, ctr.Args)
	}
}

// TestBenchAggregates: the report's totals are the sums of the pods' own results, the
// spread their min, median and max, the volumes' and nodes' ops/s their sums; the knee is
// judged on the totals and stops the curve; each pod's read-ahead is as it reported it;
// and the Job, its pods and its ConfigMap are gone at the end.
func TestBenchAggregates(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	f.result = podResult
	var out, errOut bytes.Buffer
	g := &globals{output: "json"}
	if err := runBench(context.Background(), g, Streams{Out: &out, ErrOut: &errOut}, c, benchOptions()); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep fleetbench.Report
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	// Step 3 achieves half its offered load: the knee, and no fourth step gathered.
	if len(rep.Steps) != 3 || rep.Knee == nil || rep.Knee.Step != 2 || rep.Knee.Rule != bench.KneeFellBehind {
		t.Fatalf("%d steps, knee %+v; want 3 and the knee at the third", len(rep.Steps), rep.Knee)
	}
	for i, s := range rep.Steps {
		rate := []int{100, 200, 400}[i]
		var sum, offered, p99 float64
		var ops []float64
		vols := map[string]float64{}
		for idx := range 5 {
			r := podResult(idx, i+1, rate)
			sum += r.IOPS
			offered += r.OfferedIOPS
			p99 = math.Max(p99, r.P99ms)
			ops = append(ops, r.IOPS)
			vols[[]string{"data-a", "data-b"}[idx%2]] += r.IOPS
		}
		slices.Sort(ops)
		if s.OpsS != sum || s.OfferedOpsS != offered || s.P99ms != p99 {
			t.Errorf("step %d: ops/s %v of %v offered, p99 %v; want the pods' sums %v of %v and their slowest p99 %v",
				s.Step, s.OpsS, s.OfferedOpsS, s.P99ms, sum, offered, p99)
		}
		var podSum float64
		for _, p := range s.Pods {
			podSum += p.IOPS
		}
		if len(s.Pods) != 5 || podSum != s.OpsS {
			t.Errorf("step %d: %d pods adding up to %v, total %v", s.Step, len(s.Pods), podSum, s.OpsS)
		}
		if want := (fleetbench.Spread{Min: ops[0], Median: ops[2], Max: ops[4]}); s.Spread != want {
			t.Errorf("step %d: spread %+v, want %+v", s.Step, s.Spread, want)
		}
		if len(s.Volumes) != 2 || s.Volumes[0] != (fleetbench.Group{Name: "data-a", Pods: 3, OpsS: vols["data-a"]}) ||
			s.Volumes[1] != (fleetbench.Group{Name: "data-b", Pods: 2, OpsS: vols["data-b"]}) {
			t.Errorf("step %d: volumes %+v, want %v", s.Step, s.Volumes, vols)
		}
		if len(s.Nodes) != 3 || s.Nodes[0].Name != "node-a" || s.Nodes[0].Pods != 2 {
			t.Errorf("step %d: nodes %+v", s.Step, s.Nodes)
		}
	}
	if len(rep.Tuning) != 5 || rep.Tuning[1].Tuning == nil || *rep.Tuning[1].Tuning.ReadAheadKB != 8192 || rep.Tuning[1].Volume != "data-b" ||
		rep.Tuning[1].Dir != "bench/curve-1" {
		t.Errorf("tuning %+v, want pod 1's 8192 KiB on data-b in bench/curve-1", rep.Tuning)
	}
	if len(f.jobs) != 0 || len(f.pods) != 0 || len(f.configMaps) != 0 || !slices.Equal(f.jobDeletes, []string{"Foreground"}) {
		t.Errorf("left: %d Jobs, %d pods, %d ConfigMaps; Job deletions %q", len(f.jobs), len(f.pods), len(f.configMaps), f.jobDeletes)
	}

	// The table carries the same figures.
	out.Reset()
	rep2 := rep
	// A name from a pod's log reaches the terminal escaped.
	rep2.Tuning[0].Node = "node-a\x1b[2J"
	if err := fleetbench.WriteTable(&out, &rep2); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"knee at step 3", "data-a", "8192 KiB", "read-ahead as each pod read it from /sys/class/bdi", `node-a\x1b[2J`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchInterrupt: cancelled once every pod is ready, the command deletes the Job in
// the foreground, the pods and the ConfigMap, and waits until the pods are gone; the
// exit status is 1 with the report marked interrupted.
func TestBenchInterrupt(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	f.result = podResult
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onStart = cancel
	var out, errOut bytes.Buffer
	err := runBench(ctx, &globals{output: "json"}, Streams{Out: &out, ErrOut: &errOut}, c, benchOptions())
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != ExitNotCompliant || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want exit 1 for the interruption", err)
	}
	var rep fleetbench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.Interrupted {
		t.Errorf("report %+v (%v), want it marked interrupted", rep, err)
	}
	if !slices.Equal(f.jobDeletes, []string{"Foreground"}) || !slices.Equal(f.podDeletes, []string{"app.kubernetes.io/instance=curve"}) ||
		!slices.Equal(f.cmDeletes, []string{"curve"}) {
		t.Errorf("deletions: Job %q, pods %q, ConfigMaps %q", f.jobDeletes, f.podDeletes, f.cmDeletes)
	}
	if len(f.jobs) != 0 || len(f.pods) != 0 || len(f.configMaps) != 0 {
		t.Errorf("left: %d Jobs, %d pods, %d ConfigMaps", len(f.jobs), len(f.pods), len(f.configMaps))
	}
	// The pods stayed listed for two listings while terminating: the command listed them
	// until none was left.
	if f.listsAfterDelete < 3 {
		t.Errorf("pods listed %d times after the deletion, want until they were gone", f.listsAfterDelete)
	}
}

// TestBenchPodFails: a pod that fails fails the command with its error, and everything
// is deleted.
func TestBenchPodFails(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	f.result = podResult
	f.failIndex = 3
	var out, errOut bytes.Buffer
	err := runBench(context.Background(), &globals{}, Streams{Out: &out, ErrOut: &errOut}, c, benchOptions())
	if err == nil || !strings.Contains(err.Error(), "curve-3-x3") || !strings.Contains(err.Error(), "No space left on device") {
		t.Fatalf("err %v, want pod 3's error", err)
	}
	if len(f.jobs) != 0 || len(f.pods) != 0 || len(f.configMaps) != 0 || !slices.Equal(f.jobDeletes, []string{"Foreground"}) {
		t.Errorf("left: %d Jobs, %d pods, %d ConfigMaps; Job deletions %q", len(f.jobs), len(f.pods), len(f.configMaps), f.jobDeletes)
	}
}

// TestBenchRefusesWithoutDir: without --dir, or with one that is not a subdirectory, the
// command refuses before asking the API server anything.
func TestBenchRefusesWithoutDir(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		t.Errorf("API server asked %s %s", r.Method, r.URL)
	}))
	t.Cleanup(api.Close)
	kubeconfig := writeKubeconfig(t, api.URL)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--pvc", "data-a"}, "--dir: name a subdirectory"},
		{[]string{"--pvc", "data-a", "--dir", "."}, `--dir ".": want a subdirectory`},
		{[]string{"--pvc", "data-a", "--dir", "/srv"}, `--dir "/srv": want a subdirectory`},
		{[]string{"--pvc", "data-a", "--dir", "a/../.."}, `want a subdirectory`},
		{[]string{"--dir", "bench"}, "--pvc: name at least one"},
		{[]string{"--pvc", "data-a", "--dir", "bench", "--image", "x", "--run-as-user", "0"}, "want a user other than root"},
		{[]string{"--pvc", "data-a", "--dir", "bench"}, "--image: name an image with nfstune"},
		{[]string{"--pvc", "data-a", "--dir", "bench", "--image", "x", "--profile", "seq-read"}, `--profile "seq-read": want one of eda-mix, eda-tools`},
	} {
		code, _, errOut := run(t, append([]string{"bench", "--kubeconfig", kubeconfig}, tt.args...)...)
		if code != ExitError || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// TestBenchLogsUnreadable: when no pod's log can be read, the wait for the pods names
// that error, each pod's failure is printed once, and everything is deleted.
func TestBenchLogsUnreadable(t *testing.T) {
	t.Parallel()
	f, c := newFakeCluster(t)
	f.result = podResult
	f.logsFail = true
	o := benchOptions()
	o.ReadyTimeout = 300 * time.Millisecond
	var out, errOut bytes.Buffer
	err := runBench(context.Background(), &globals{}, Streams{Out: &out, ErrOut: &errOut}, c, o)
	if err == nil || !strings.Contains(err.Error(), "the last pod log could not be read") {
		t.Fatalf("err %v, want the log error named", err)
	}
	if n := strings.Count(errOut.String(), "reading pod "); n != 5 {
		t.Errorf("%d lines about unreadable logs, want one per pod:\n%s", n, errOut.String())
	}
	if n := strings.Count(errOut.String(), "0 of 5 pods ready"); n != 1 {
		t.Errorf("the ready count printed %d times, want once while it does not change", n)
	}
	if len(f.jobs) != 0 || len(f.pods) != 0 || len(f.configMaps) != 0 {
		t.Errorf("left: %d Jobs, %d pods, %d ConfigMaps", len(f.jobs), len(f.pods), len(f.configMaps))
	}
}
