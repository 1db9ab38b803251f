//go:build lab

package k8slab

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The agent with agent.blockedProcesses (CAP_SYS_PTRACE) under deploy/apparmor/nfstune-agent,
// loaded on the node as its admin would, and set by the chart's agent.appArmorProfile.

// probeEnv makes this test binary, started as a container's /nfstune, run apparmorProbe
// instead of the tests.
const probeEnv = "K8SLAB_APPARMOR_PROBE"

// probeWritten is the host file the probe tries to create through /host/proc/1/root.
const probeWritten = "/run/k8slab/written-by-a-container"

// probeResult is what one probe container could do: "ok", or the error.
type probeResult struct {
	ReadThroughRoot  string `json:"read_through_root"`  // a host file through /host/proc/1/root
	WriteThroughRoot string `json:"write_through_root"` // probeWritten through /host/proc/1/root
	RootLinkText     string `json:"root_link_text"`     // readlink /host/proc/1/root
	FDInfo           string `json:"fdinfo"`             // list /host/proc/1/fdinfo
	Environ          string `json:"environ"`            // read /host/proc/1/environ
}

// apparmorProbe tries, from inside a container, what the agent's capability could do and
// what it needs, and prints the outcome as one JSON line.
func apparmorProbe() int {
	outcome := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	root := "/host/proc/1/root"
	var r probeResult
	_, err := os.ReadFile(root + "/etc/hostname")
	r.ReadThroughRoot = outcome(err)
	r.WriteThroughRoot = outcome(os.WriteFile(root+probeWritten, []byte("written by a container\n"), 0o644))
	_, err = os.Readlink(root)
	r.RootLinkText = outcome(err)
	_, err = os.ReadDir("/host/proc/1/fdinfo")
	r.FDInfo = outcome(err)
	_, err = os.ReadFile("/host/proc/1/environ")
	r.Environ = outcome(err)
	b, _ := json.Marshal(r)
	fmt.Fprintf(os.Stdout, "k8slab-probe %s\n", b)
	return 0
}

// confineAgent loads the profile on the node and upgrades the chart to the agent with
// blockedProcesses under it; it returns the new agent pod, Ready.
func confineAgent(t *testing.T) *corev1.Pod {
	t.Helper()
	profile := filepath.Join(os.Getenv(envBin), "nfstune-agent.apparmor") // lab/k8s-e2e.sh
	if out, err := exec.Command("apparmor_parser", "-r", profile).CombinedOutput(); err != nil {
		t.Fatalf("apparmor_parser -r %s: %v\n%s", profile, err, out)
	}
	args := append([]string{"upgrade", "nfstune", registryChart}, chartValues(t, "agent", "enforce")...)
	args = append(args, "--set", "agent.blockedProcesses.enabled=true",
		"--set", "agent.appArmorProfile.type=Localhost", "--set", "agent.appArmorProfile.localhostProfile=nfstune-agent")
	if _, err := helm(args...); err != nil {
		t.Fatal(err)
	}
	return replacedAgent(t, string(agentPod.UID), "nfstune-agent profile")
}

// agentDenials are the kernel's AppArmor denials of the profile for the agent's binary.
func agentDenials(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		t.Fatalf("dmesg: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, `apparmor="DENIED"`) && strings.Contains(l, `profile="nfstune-agent"`) && strings.Contains(l, `comm="nfstune"`) {
			lines = append(lines, l)
		}
	}
	return lines
}

// probePod is a container like the agent's (its security context, hostPath volumes and
// mounts) with the AppArmor profile given, running this test binary as /nfstune in probe
// mode.
func probePod(name string, agent *corev1.Pod, profile corev1.AppArmorProfile, bin string) *corev1.Pod {
	ac := agent.Spec.Containers[0]
	hostPaths := map[string]bool{}
	var vols []corev1.Volume
	for _, v := range agent.Spec.Volumes {
		if v.HostPath != nil {
			vols = append(vols, v)
			hostPaths[v.Name] = true
		}
	}
	var mounts []corev1.VolumeMount
	for _, m := range ac.VolumeMounts {
		if hostPaths[m.Name] {
			mounts = append(mounts, m)
		}
	}
	file := corev1.HostPathFile
	vols = append(vols, corev1.Volume{Name: "probe", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: bin, Type: &file}}})
	mounts = append(mounts, corev1.VolumeMount{Name: "probe", MountPath: "/nfstune", ReadOnly: true})
	sc := ac.SecurityContext.DeepCopy()
	sc.AppArmorProfile = &profile
	podSC := agent.Spec.SecurityContext.DeepCopy()
	if podSC != nil {
		podSC.AppArmorProfile = nil
	}
	f := false
	var grace int64
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: map[string]string{"k8slab": "apparmor-probe"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &f,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyNever,
			SecurityContext:               podSC,
			Containers: []corev1.Container{{
				Name: "probe", Image: testImage, ImagePullPolicy: corev1.PullNever,
				Command:         []string{"/nfstune"},
				Env:             []corev1.EnvVar{{Name: probeEnv, Value: "1"}},
				SecurityContext: sc,
				VolumeMounts:    mounts,
			}},
			Volumes: vols,
		},
	}
}

// runProbe runs a probe pod to its end and returns what it printed.
func runProbe(t *testing.T, p *corev1.Pod) probeResult {
	t.Helper()
	path := "/api/v1/namespaces/" + testNS + "/pods"
	if err := cluster.create(path, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.remove(path + "/" + p.Name) })
	var pod corev1.Pod
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		if err := cluster.get(path+"/"+p.Name, &pod); err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			break
		}
		if f := podFailure(&pod); f != "" {
			t.Fatalf("probe pod %s: %s", p.Name, f)
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe pod %s not done after 3 minutes: %s", p.Name, pod.Status.Phase)
		}
	}
	for _, l := range containerLog(&pod, "probe") {
		if js, ok := strings.CutPrefix(l, "k8slab-probe "); ok {
			var r probeResult
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatalf("probe pod %s: %q: %v", p.Name, l, err)
			}
			logf("probe %s (%s): %s", p.Name, p.Spec.Containers[0].SecurityContext.AppArmorProfile.Type, js)
			return r
		}
	}
	t.Fatalf("probe pod %s (%s) printed no result: %q", p.Name, pod.Status.Phase, containerLog(&pod, "probe"))
	return probeResult{}
}

// copyProbe copies this test binary where a hostPath volume can mount it.
func copyProbe(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(stateDir, "apparmor-probe")
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// probeDenied reports whether a probe's outcome is a refusal.
func probeDenied(outcome string) bool {
	return strings.Contains(outcome, "permission denied") || strings.Contains(outcome, "operation not permitted")
}

// takeProbeFile reports whether a probe created probeWritten on the node, and removes it.
func takeProbeFile() bool {
	if _, err := os.Stat(probeWritten); err != nil {
		return false
	}
	_ = os.Remove(probeWritten)
	return true
}
