//go:build lab

package k8slab

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The recovery case: pods whose NFS server (127.0.0.2, NFSv3, each volume an export of its
// own) stops answering, and the agent's recovery policy. make k8s-e2e-long runs it
// alone, on Linux 6.12.
const (
	deadServer = "127.0.0.2"
	// recoveryWindow is the policy's window, the shortest it accepts.
	recoveryWindow = 30 * time.Second
	// stuckFor is how long the pod deleted under the observe-mode agent is watched staying
	// Terminating.
	stuckFor = 3 * time.Minute
	// recoveryBound is how long, past the window, the policy may take to free a pod.
	recoveryBound = 2 * time.Minute
)

// recoveryPolicy is the lab policy with recovery on for every server; mode is observe or
// enforce.
func recoveryPolicy(mode string) string {
	return policy + fmt.Sprintf(`recovery:
  enabled: true
  window: %s
  action: shutdown
  mode: %s
`, recoveryWindow, mode)
}

// recoverySummary is what the case measured, in summary.json under "recovery".
type recoverySummary struct {
	Kernel string `json:"kernel"`
	// StuckS is how long the pod deleted under the observe-mode agent was watched
	// Terminating, and StillTerminating whether it still was then.
	StuckS           float64 `json:"stuck_s"`
	StillTerminating bool    `json:"still_terminating"`
	ObservedActions  float64 `json:"observed_actions"`
	// BlindSuperblocks is nfstune_recovery_superblocks{state="blind"} at the same time: 0
	// when the agent found its own pod's processes through kubelet's cgroups and kubelet's
	// root from kubelet's command line (its self-check), which it must before it acts.
	BlindSuperblocks float64 `json:"blind_superblocks"`
	// FreedAfterAgentS is from the enforce agent's Ready to that pod's removal;
	// FreedAfterDeleteS from the deletion of a second pod, past the agent's window, to its
	// removal.
	FreedAfterAgentS  float64 `json:"freed_after_agent_ready_s"`
	FreedAfterDeleteS float64 `json:"freed_after_delete_s"`
	ShutdownsDone     float64 `json:"shutdowns_done"`
	HeldPodUntouched  bool    `json:"held_pod_untouched"`
	HealthyReads      int     `json:"healthy_pod_reads"`
	HealthyUntouched  bool    `json:"healthy_pod_untouched"`
}

var recoveryResult recoverySummary

// TestRecoveryTerminatingPod: four pods, each with an NFS volume of its own. On 127.0.0.2,
// which goes away, PersistentVolumes over NFSv3: "stuck" and "freed" (deleted) and "held"
// (never deleted). On 127.0.0.1, inline: "healthy", which reads its volume every second.
// With the agent's recovery policy in observe mode, "stuck" is deleted: it stays
// Terminating for stuckFor, kubelet blocked on its volume; the agent counts what it would
// do and writes nothing. With the policy turned to enforce (helm upgrade), "stuck" is gone
// within the window and recoveryBound of the new agent's start, and "freed", deleted once
// the agent's window has run, soon after its deletion; kubelet unmounted both. "held"
// keeps its mount, not shut down, and "healthy" reads on.
func TestRecoveryTerminatingPod(t *testing.T) {
	requireCluster(t)
	recoveryResult.Kernel = summary.Kernel
	defer func() {
		b, _ := json.MarshalIndent(recoveryResult, "", "  ")
		logf("recovery summary:\n%s", b)
		writeRecoverySummary(t)
	}()
	// A release an earlier case left would hold the name.
	if _, err := helm("uninstall", "nfstune", "--ignore-not-found", "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	names := []string{"rec-stuck", "rec-freed", "rec-held", "rec-healthy"}
	if err := addExports(names, 200); err != nil {
		t.Fatal(err)
	}

	agent := installRecoveryAgent(t, "install", "observe", "")
	stuck := startRecoveryPod(t, "rec-stuck", deadServer, true, "sleep")
	freed := startRecoveryPod(t, "rec-freed", deadServer, true, "sleep")
	held := startRecoveryPod(t, "rec-held", deadServer, true, "sleep")
	healthy := startRecoveryPod(t, "rec-healthy", "127.0.0.1", false, "read")
	t.Cleanup(func() {
		_ = exec.Command("labctl", "server-back").Run() // the cleanup goes on; the case has its result
		for _, p := range []recoveryPod{stuck, freed, held, healthy} {
			_ = cluster.remove("/api/v1/namespaces/" + testNS + "/pods/" + p.pod.Name) // helm uninstall below clears the rest
		}
		if _, err := helm("uninstall", "nfstune", "--ignore-not-found", "--wait", "--timeout", "5m"); err != nil {
			t.Logf("helm uninstall: %v", err)
		}
	})

	if out, err := exec.Command("labctl", "server-gone", "loss", deadServer).CombinedOutput(); err != nil {
		t.Fatalf("labctl server-gone loss %s: %v\n%s", deadServer, err, out)
	}
	gone := time.Now()
	logf("recovery: %s unreachable", deadServer)

	// 1. Observe mode: the deleted pod stays Terminating.
	if err := deletePod(stuck); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if podGoneWithin(stuck, stuckFor) {
		t.Fatalf("pod %s went within %s of its deletion, its server gone, without recovery: nothing to recover", stuck.pod.Name, stuckFor)
	}
	recoveryResult.StuckS = time.Since(deleted).Seconds()
	recoveryResult.StillTerminating = true
	logf("recovery: pod %s still Terminating %s after its deletion (observe mode)", stuck.pod.Name, time.Since(deleted).Round(time.Second))
	recoveryResult.ObservedActions = agentMetric(t, agent, `nfstune_recovery_actions_total{action="shutdown",result="observed"}`)
	if recoveryResult.ObservedActions < 1 {
		t.Errorf("the observe-mode agent counted %v would-be shutdowns, want at least 1 (%s)", recoveryResult.ObservedActions, stuck.mount.dev)
	}
	// The self-check on a real kubelet: the agent's pod (POD_UID from the chart) is found
	// through the cgroups kubelet and containerd made, and kubelet's root from its command
	// line; a blind agent would count no would-be shutdown at all.
	recoveryResult.BlindSuperblocks = agentMetric(t, agent, `nfstune_recovery_superblocks{state="blind"}`)
	if recoveryResult.BlindSuperblocks != 0 {
		t.Errorf("nfstune_recovery_superblocks{state=\"blind\"} = %v, want 0: the agent does not see its own pod's processes or kubelet's root\nagent:\n%s",
			recoveryResult.BlindSuperblocks, recoveryLog(agent))
	}
	for _, p := range []recoveryPod{stuck, freed, held, healthy} {
		if v := shutdownAttr(p.mount.dev); v != "0" {
			t.Errorf("observe mode: %s (pod %s) shutdown = %q, want 0", p.mount.dev, p.pod.Name, v)
		}
	}

	// 2. Enforce.
	upgraded := time.Now()
	agent = installRecoveryAgent(t, "upgrade", "enforce", string(agent.UID))
	ready := time.Now()
	logf("recovery: enforce-mode agent %s Ready %s after helm upgrade", agent.Name, ready.Sub(upgraded).Round(time.Second))
	if !podGoneWithin(stuck, recoveryWindow+recoveryBound) {
		t.Fatalf("pod %s still there %s after the enforce agent's start (%s after its deletion)\nagent:\n%s",
			stuck.pod.Name, time.Since(ready).Round(time.Second), time.Since(deleted).Round(time.Second), recoveryLog(agent))
	}
	recoveryResult.FreedAfterAgentS = time.Since(ready).Seconds()
	logf("recovery: pod %s gone %s after the enforce agent's start, %s after its deletion, %s after %s went",
		stuck.pod.Name, time.Since(ready).Round(time.Second), time.Since(deleted).Round(time.Second), time.Since(gone).Round(time.Second), deadServer)

	if wait := time.Until(ready.Add(recoveryWindow)); wait > 0 {
		time.Sleep(wait)
	}
	if err := deletePod(freed); err != nil {
		t.Fatal(err)
	}
	deleted = time.Now()
	if !podGoneWithin(freed, recoveryWindow+recoveryBound) {
		t.Fatalf("pod %s still there %s after its deletion under the enforce agent\nagent:\n%s", freed.pod.Name, time.Since(deleted).Round(time.Second), recoveryLog(agent))
	}
	recoveryResult.FreedAfterDeleteS = time.Since(deleted).Seconds()
	logf("recovery: pod %s gone %s after its deletion", freed.pod.Name, time.Since(deleted).Round(time.Second))

	recoveryResult.ShutdownsDone = agentMetric(t, agent, `nfstune_recovery_actions_total{action="shutdown",result="done"}`)
	if recoveryResult.ShutdownsDone != 2 {
		t.Errorf(`nfstune_recovery_actions_total{action="shutdown",result="done"} = %v, want 2`, recoveryResult.ShutdownsDone)
	}
	for _, p := range []recoveryPod{stuck, freed} {
		if m, ok := volumeMount(string(p.pod.UID)); ok {
			t.Errorf("pod %s is gone, yet its volume is still mounted at %s", p.pod.Name, m.mountPoint)
		}
		// kubelet removes a deleted pod's directory at a housekeeping pass after the API
		// object has gone (cleanupOrphanedPodDirs): give it a minute.
		dir := "/var/lib/kubelet/pods/" + string(p.pod.UID)
		for end := time.Now().Add(time.Minute); fileExists(dir) && time.Now().Before(end); {
			time.Sleep(time.Second)
		}
		if fileExists(dir) {
			t.Errorf("pod %s is gone, yet kubelet kept its directory a minute later", p.pod.Name)
		}
	}

	// 3. The pod not deleted and the healthy server's pod: left alone.
	recoveryResult.HeldPodUntouched = podUntouched(t, held)
	before := healthyReads(healthy)
	time.Sleep(5 * time.Second)
	recoveryResult.HealthyReads = healthyReads(healthy)
	recoveryResult.HealthyUntouched = podUntouched(t, healthy) && recoveryResult.HealthyReads > before
	if recoveryResult.HealthyReads <= before {
		t.Errorf("pod %s read its volume %d times, then %d 5 s later: its reads stopped", healthy.pod.Name, before, recoveryResult.HealthyReads)
	}
	logf("recovery: pod %s untouched: %v; pod %s read %d times, untouched: %v", held.pod.Name, recoveryResult.HeldPodUntouched,
		healthy.pod.Name, recoveryResult.HealthyReads, recoveryResult.HealthyUntouched)
	logf("recovery: the agent's recovery log:\n%s", recoveryLog(agent))
}

// recoveryPod is a pod of the recovery case and its volume's mount on the node.
type recoveryPod struct {
	pod   *corev1.Pod
	mount mountEntry
}

// startRecoveryPod creates a pod whose volume is the export name on server over NFSv3,
// through a PersistentVolume and its claim with mount options vers=3,hard (pv), or inline
// with kubelet's default options (NFSv4.2 on this kernel; an NFSv4.1+ mount of 127.0.0.2
// would join 127.0.0.1's client, the same nfsd found by trunking detection, so the dead
// server's volumes are PersistentVolumes over NFSv3), and waits until it runs. Its
// container sleeps, or reads its volume every second and says so (what "read").
func startRecoveryPod(t *testing.T, name, server string, pv bool, what string) recoveryPod {
	t.Helper()
	src := corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: v3Path(name)}}
	if pv {
		fs := corev1.PersistentVolumeFilesystem
		vol := &corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				VolumeMode:                    &fs,
				// actimeo=0: kubelet's stat of the mount point before its unmount goes to
				// the server every time. With cached attributes (acdirmin, nfs(5)) a pod
				// deleted within seconds of its server going unmounts cleanly, and the case
				// has nothing to recover.
				MountOptions:           []string{"vers=3", "hard", "actimeo=0"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: src.NFS},
			},
		}
		empty := ""
		claim := &corev1.PersistentVolumeClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				StorageClassName: &empty,
				VolumeName:       name,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := cluster.create("/api/v1/persistentvolumes", vol); err != nil {
			t.Fatal(err)
		}
		if err := cluster.create("/api/v1/namespaces/"+testNS+"/persistentvolumeclaims", claim); err != nil {
			t.Fatal(err)
		}
		src = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	} else {
		// An inline volume takes no mount options: NFSv4.2, by its NFSv4 path.
		src.NFS.Path = v4Path(name)
	}
	p := nfsPod(name, src)
	if what == "read" {
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", `echo hello >/data/f
while read -r id parent dev root mp rest; do [ "$mp" = /data ] && break; done </proc/self/mountinfo
read -r up idle </proc/uptime
echo "k8slab-start uptime=$up dev=$dev read_ahead_kb=0"
i=0; while :; do cat /data/f >/dev/null && i=$((i+1)) && echo "k8slab-read $i"; sleep 1; done`}
	}
	r := startNFSPod(t, p, bootTime(), false)
	logf("recovery: pod %s runs, its volume %s (%s) at %s", name, r.mount.dev, r.mount.source, r.mount.mountPoint)
	return recoveryPod{pod: r.pod, mount: r.mount}
}

// installRecoveryAgent installs (verb "install") or upgrades the chart with the recovery
// policy in mode, the agent in enforce mode, and waits for an agent pod other than
// previous to be Ready. The agent runs unconfined: under the runtime's default AppArmor
// profile it cannot inspect the processes of other pods, and the holder scan is never
// complete.
func installRecoveryAgent(t *testing.T, verb, mode, previous string) *corev1.Pod {
	t.Helper()
	pf := filepath.Join(stateDir, "recovery-policy.yaml")
	if err := os.WriteFile(pf, []byte(recoveryPolicy(mode)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{verb, "nfstune", registryChart}, chartValues(t, "agent", "enforce")...)
	args = append(args, "--set-file", "policy="+pf, "--set", "agent.blockedProcesses.enabled=true",
		"--set", "agent.appArmorProfile.type=Unconfined")
	if _, err := helm(args...); err != nil {
		t.Fatal(err)
	}
	return replacedAgent(t, previous, "recovery "+mode)
}

// deletePod deletes a pod as kubectl delete does, gracefully: the API server keeps it,
// Terminating, until kubelet has stopped its containers and unmounted its volumes.
// (cluster.remove forces the deletion: the object goes at once, whatever kubelet does.)
func deletePod(p recoveryPod) error {
	path := "/api/v1/namespaces/" + testNS + "/pods/" + p.pod.Name
	code, b, err := cluster.do(http.MethodDelete, path+"?gracePeriodSeconds=1", nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK && code != http.StatusAccepted {
		return fmt.Errorf("DELETE %s: %d %s", path, code, clip(b))
	}
	return nil
}

// podGoneWithin polls the API server until the pod is gone (404), for at most limit.
func podGoneWithin(p recoveryPod, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		code, _, err := cluster.do(http.MethodGet, "/api/v1/namespaces/"+testNS+"/pods/"+p.pod.Name, nil)
		if err == nil && code == http.StatusNotFound {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Second)
	}
}

// podUntouched reports whether a pod still runs, ready, without a restart, its volume
// still mounted on the same superblock, not shut down.
func podUntouched(t *testing.T, p recoveryPod) bool {
	t.Helper()
	var now corev1.Pod
	if err := cluster.get("/api/v1/namespaces/"+testNS+"/pods/"+p.pod.Name, &now); err != nil {
		t.Errorf("pod %s: %v", p.pod.Name, err)
		return false
	}
	ok := true
	if now.DeletionTimestamp != nil || now.Status.Phase != corev1.PodRunning || !podReady(&now) {
		t.Errorf("pod %s: phase %s, conditions %s, deleting %v; want it running and ready", p.pod.Name, now.Status.Phase, conditions(&now), now.DeletionTimestamp != nil)
		ok = false
	}
	for _, cs := range now.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("pod %s: container %s restarted %d times", p.pod.Name, cs.Name, cs.RestartCount)
			ok = false
		}
	}
	if m, found := volumeMount(string(p.pod.UID)); !found || m.dev != p.mount.dev {
		t.Errorf("pod %s: its volume is no longer %s (found %v, %s)", p.pod.Name, p.mount.dev, found, m.dev)
		ok = false
	}
	if v := shutdownAttr(p.mount.dev); v != "0" {
		t.Errorf("pod %s: its superblock %s was shut down (%q)", p.pod.Name, p.mount.dev, v)
		ok = false
	}
	return ok
}

// healthyReads is the count of reads the reading pod reported.
func healthyReads(p recoveryPod) int {
	n := 0
	for _, l := range containerLog(p.pod, "c") {
		if v, ok := strings.CutPrefix(l, "k8slab-read "); ok {
			if i, err := strconv.Atoi(v); err == nil && i > n {
				n = i
			}
		}
	}
	return n
}

// shutdownAttr reads /sys/fs/nfs/<dev>/shutdown, or says why it cannot.
func shutdownAttr(dev string) string {
	b, err := os.ReadFile("/sys/fs/nfs/" + dev + "/shutdown")
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}

// agentMetric scrapes the agent pod's /metrics and returns one series' value, -1 when it
// is absent.
func agentMetric(t *testing.T, p *corev1.Pod, series string) float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + net.JoinHostPort(p.Status.PodIP, "9477") + "/metrics")
	if err != nil {
		t.Errorf("scraping the agent: %v", err)
		return -1
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// recoveryLog is the agent's log lines about recovery.
func recoveryLog(p *corev1.Pod) string {
	var b strings.Builder
	for _, l := range containerLog(p, "agent") {
		if strings.Contains(l, "recovery") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// writeRecoverySummary writes recoveryResult next to summary.json.
func writeRecoverySummary(t *testing.T) {
	path := os.Getenv(envSummary)
	if path == "" {
		return
	}
	b, err := json.MarshalIndent(recoveryResult, "", "  ")
	if err != nil {
		t.Errorf("recovery summary: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "recovery.json"), append(b, '\n'), 0o644); err != nil {
		t.Errorf("writing recovery.json: %v", err)
	}
}
