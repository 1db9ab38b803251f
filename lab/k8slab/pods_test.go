//go:build lab

package k8slab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	testNS     = "default"
	testImage  = "nfstune.test/busybox:lab" // lab/k8slab/mkimages
	chartNS    = "nfstune"
	volumeName = "data"
)

// startScript is the test container's first process. Its first act reads its own volume's
// read_ahead_kb (the bdi of the superblock mounted at /data), then the time, with shell
// builtins only: nothing else runs in the container before them. It then sleeps.
const startScript = `while read -r id parent dev root mp rest; do [ "$mp" = /data ] && break; done </proc/self/mountinfo
read -r ra </sys/class/bdi/$dev/read_ahead_kb
read -r up idle </proc/uptime
echo "k8slab-start uptime=$up dev=$dev read_ahead_kb=$ra"
exec sleep 2147483647`

// nfsPod is a pod of the test image with one NFS volume: inline (server and path) or a
// claim.
func nfsPod(name string, vol corev1.VolumeSource) *corev1.Pod {
	f := false
	var grace int64
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"k8slab": "nfs"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &f,
			DNSPolicy:                     corev1.DNSDefault,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "c", Image: testImage, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/bin/sh", "-c", startScript},
				VolumeMounts: []corev1.VolumeMount{{Name: volumeName, MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: volumeName, VolumeSource: vol}},
		},
	}
}

func inlineNFS(export string) corev1.VolumeSource {
	return corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "127.0.0.1", Path: v4Path(export)}}
}

// podFailure names a container state kubelet will not leave by itself.
func podFailure(p *corev1.Pod) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "CreateContainerError", "CreateContainerConfigError", "CrashLoopBackOff", "RunContainerError", "InvalidImageName":
				return fmt.Sprintf("container %s: %s: %s", cs.Name, w.Reason, w.Message)
			}
		}
	}
	return ""
}

// waitPod waits for a pod to be Running (and Ready if ready is set) and returns it. A
// failure names the pod's state, its events and kubelet's last lines.
func waitPod(ns, name string, ready bool, limit time.Duration) (*corev1.Pod, error) {
	start := time.Now()
	var p corev1.Pod
	var last string
	for {
		err := cluster.get(fmt.Sprintf("/api/v1/namespaces/%s/pods/%s", ns, name), &p)
		switch {
		case err != nil:
			last = err.Error()
		case podFailure(&p) != "":
			return nil, fmt.Errorf("pod %s/%s: %s\n%s", ns, name, podFailure(&p), podDiagnosis(ns, name))
		case p.Status.Phase == corev1.PodRunning && (!ready || podReady(&p)):
			return &p, nil
		default:
			last = fmt.Sprintf("phase %s, conditions %s", p.Status.Phase, conditions(&p))
		}
		if time.Since(start) > limit {
			return nil, fmt.Errorf("pod %s/%s not %s after %s: %s\n%s", ns, name, map[bool]string{true: "Ready", false: "Running"}[ready], limit, last, podDiagnosis(ns, name))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func conditions(p *corev1.Pod) string {
	var s []string
	for _, c := range p.Status.Conditions {
		s = append(s, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	return strings.Join(s, ",")
}

// podDiagnosis is what explains a pod that does not start: its events and kubelet's and
// containerd's last lines.
func podDiagnosis(ns, name string) string {
	var events corev1.EventList
	var b strings.Builder
	if err := cluster.get(fmt.Sprintf("/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name=%s", ns, name), &events); err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "event: %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	var p corev1.Pod
	if cluster.get(fmt.Sprintf("/api/v1/namespaces/%s/pods/%s", ns, name), &p) == nil {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			lines := containerLog(&p, c.Name)
			if len(lines) > 15 {
				lines = lines[len(lines)-15:]
			}
			fmt.Fprintf(&b, "container %s log:\n%s\n", c.Name, strings.Join(lines, "\n"))
		}
		// A container that ended before its log was written (the runtime failed to start it)
		// tells only here.
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if t := cs.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, "container %s, last attempt: %s, exit %d, %s\n", cs.Name, t.Reason, t.ExitCode, t.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if pid, err := containerPID(cs.ContainerID); err == nil {
				fmt.Fprintf(&b, "container %s: pid %d, %s\n", cs.Name, pid, cpuStat(pid))
			}
		}
	}
	fmt.Fprintf(&b, "kubelet:\n%s\ncontainerd:\n%s", tail("kubelet", 15), tail("containerd", 10))
	return b.String()
}

// podsWithLabel lists a namespace's pods by label selector.
func podsWithLabel(ns, selector string) ([]corev1.Pod, error) {
	var l corev1.PodList
	err := cluster.get(fmt.Sprintf("/api/v1/namespaces/%s/pods?labelSelector=%s", ns, selector), &l)
	return l.Items, err
}

// containerLog returns the lines a pod's container wrote, from kubelet's log files.
func containerLog(p *corev1.Pod, container string) []string {
	files, _ := filepath.Glob(fmt.Sprintf("/var/log/pods/%s_%s_%s/%s/*.log", p.Namespace, p.Name, p.UID, container))
	var lines []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			// CRI log format: TIME STREAM TAG MESSAGE
			if f := strings.SplitN(sc.Text(), " ", 4); len(f) == 4 {
				lines = append(lines, f[3])
			}
		}
		fh.Close()
	}
	return lines
}

// started is what a test container's first process reported.
type started struct {
	dev         string
	readAheadKB int
	at          time.Time
}

// waitStarted waits for the test container's start line.
func waitStarted(p *corev1.Pod, boot time.Time, limit time.Duration) (started, error) {
	deadline := time.Now().Add(limit)
	for {
		for _, l := range containerLog(p, "c") {
			if !strings.HasPrefix(l, "k8slab-start ") {
				continue
			}
			var s started
			var up float64
			for _, kv := range strings.Fields(l)[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "uptime":
					up, _ = strconv.ParseFloat(v, 64)
				case "dev":
					s.dev = v
				case "read_ahead_kb":
					s.readAheadKB, _ = strconv.Atoi(v)
				}
			}
			s.at = boot.Add(time.Duration(up * float64(time.Second)))
			return s, nil
		}
		if time.Now().After(deadline) {
			return started{}, fmt.Errorf("pod %s wrote no start line in %s", p.Name, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentEvent is one JSON log line of the agent.
type agentEvent struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	Device  string    `json:"device"`
	WantKB  int       `json:"want_kb"`
	Reason  string    `json:"reason"`
	Err     string    `json:"err"`
	Current int       `json:"current_kb"`
}

func agentEvents(p *corev1.Pod) []agentEvent {
	var out []agentEvent
	for _, l := range containerLog(p, "agent") {
		var e agentEvent
		if json.Unmarshal([]byte(l), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// agentWrite returns when the agent logged setting dev's read-ahead.
func agentWrite(p *corev1.Pod, dev string) (time.Time, bool) {
	for _, e := range agentEvents(p) {
		if e.Msg == "read-ahead set" && e.Device == dev {
			return e.Time, true
		}
	}
	return time.Time{}, false
}

// containerPID is the host PID of a running container's first process.
func containerPID(containerID string) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := ctr(30*time.Second, "tasks", "ls")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("no task for container %s", id)
}

// cpuStat is the CPU time and throttling of a process's cgroup (cgroup v2 cpu.stat).
func cpuStat(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return err.Error()
	}
	path := strings.TrimPrefix(strings.TrimSpace(string(b)), "0::")
	st, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", path, "cpu.stat"))
	if err != nil {
		return err.Error()
	}
	max, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", path, "cpu.max"))
	return fmt.Sprintf("cpu.max %s, %s", strings.TrimSpace(string(max)), strings.Join(strings.Fields(string(st)), " "))
}

// helm runs the chart's client against the cluster.
func helm(args ...string) (string, error) {
	home := filepath.Join(stateDir, "helm")
	cmd := exec.Command(filepath.Join(binDir, "helm"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(stateDir, "admin.kubeconfig"),
		"HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// replacedAgent waits up to 5 minutes, after a helm install or upgrade, for a Ready agent pod
// other than the one whose UID is previous ("" for none), records it for the uninstall
// check and returns it. what names the pod in the failure.
func replacedAgent(t *testing.T, previous, what string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods, _ := podsWithLabel(chartNS, "app.kubernetes.io/component=agent")
		for i := range pods {
			if string(pods[i].UID) != previous && pods[i].DeletionTimestamp == nil {
				p, err := waitPod(chartNS, pods[i].Name, true, time.Until(deadline))
				if err != nil {
					t.Fatal(err)
				}
				chartPodUIDs[string(p.UID)] = true
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s agent pod Ready after 5 minutes", what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// appArmorLabel is the AppArmor label of a pod's first container's process, e.g.
// "cri-containerd.apparmor.d (enforce)", and that process's PID.
func appArmorLabel(t *testing.T, p *corev1.Pod) (int, string) {
	t.Helper()
	pid, err := containerPID(p.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	label, err := os.ReadFile(fmt.Sprintf("/proc/%d/attr/current", pid))
	if err != nil {
		t.Fatal(err)
	}
	return pid, strings.TrimSpace(strings.TrimRight(string(label), "\x00"))
}
