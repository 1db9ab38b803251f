//go:build lab

package k8slab

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The cases run in this file's order on the one cluster: the agent (enforce) and what it
// does to kubelet's NFS mounts, then observe mode, the per-pod NFS I/O collector, the
// uninstall, and installer mode.

// policy gives every volume of the lab's nfsd the sequential-read profile's fixed 15360 KiB,
// the default adaptive read-ahead off: the cases check a known value at each pod's first
// process, and an agent that writes nothing but read-ahead leaves no state on the node
// (adaptive read-ahead journals; its start is agentlab's TestAgentNoConfigTunes20).
const policy = `apiVersion: nfstune.io/v1alpha1
kind: Policy
defaults:
  readAheadAdaptive: false
rules:
  - name: lab nfsd
    match:
      cidr: 127.0.0.0/8
    workload: sequential-read
`

// agentCPULimit replaces the chart's 100m for the lab: see chartValues.
const agentCPULimit = "1"

var (
	chartPodUIDs = map[string]bool{} // every pod of the chart seen, for nodeState
	agentPod     *corev1.Pod
	watch        *mountWatch
	nodeBefore   []string // the node's nfstune-related state before the chart was installed
)

func requireCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Fatal("the cluster did not start (see the step that failed above)")
	}
}

func requireAgent(t *testing.T) {
	t.Helper()
	requireCluster(t)
	if agentPod == nil {
		t.Fatal("the agent pod did not start (TestAgentInstalled)")
	}
}

// chartValues are the flags every install and upgrade passes: the chart's version in the
// registry, and the registry's repository for the image, whose tag the chart defaults to
// its appVersion.
func chartValues(t *testing.T, mode, policyMode string) []string {
	t.Helper()
	pf := filepath.Join(stateDir, "policy.yaml")
	if err := os.WriteFile(pf, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(chartRef()[1:], "--set", "image.repository="+registryImage,
		// The emulated CPU is tens of times slower than a real one: at the chart's 100m
		// limit the agent was not serving when the liveness probe killed it.
		"--set", "resources.limits.cpu="+agentCPULimit,
		"--set", "mode="+mode, "--set", "agent.policyMode="+policyMode, "--set-file", "policy="+pf)
}

// nodeState lists what the chart may leave on the node: files in the directories it
// mounts from the host, nfstune processes, containers of the nfstune namespace and mounts
// of its pods.
func nodeState(t *testing.T) []string {
	t.Helper()
	var s []string
	for _, dir := range []string{"/opt/nfstune", "/etc/nfstune", "/var/lib/nfstune", "/etc/udev/rules.d"} {
		// The walk function never fails: a missing directory is a part of the state.
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			switch {
			case err != nil || p == dir || (dir == "/etc/udev/rules.d" && !strings.Contains(p, "nfstune")):
			case d.IsDir():
				s = append(s, "directory "+p)
			default:
				s = append(s, "file "+p)
			}
			return nil
		})
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if argv0, _, _ := strings.Cut(string(b), "\x00"); filepath.Base(argv0) == "nfstune" {
			s = append(s, "process "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
		}
	}
	out, err := ctr(30*time.Second, "containers", "ls", "-q", `labels."io.kubernetes.pod.namespace"==`+chartNS)
	if err != nil {
		t.Errorf("listing containers: %v", err)
	}
	for _, id := range strings.Fields(out) {
		s = append(s, "container "+id)
	}
	var pods corev1.PodList
	if err := cluster.get("/api/v1/namespaces/"+chartNS+"/pods", &pods); err == nil {
		for _, p := range pods.Items {
			s = append(s, "pod "+p.Name)
			chartPodUIDs[string(p.UID)] = true
		}
	}
	// What kubelet made for the chart's pods: their directories and mounts.
	ms, _ := readMounts()
	for uid := range chartPodUIDs {
		if fileExists("/var/lib/kubelet/pods/" + uid) {
			s = append(s, "kubelet pod directory "+uid)
		}
		for _, m := range ms {
			if strings.Contains(m.mountPoint, uid) {
				s = append(s, "mount "+m.mountPoint)
			}
		}
	}
	slices.Sort(s)
	return s
}

func TestAgentInstalled(t *testing.T) {
	requireCluster(t)
	nodeBefore = nodeState(t)
	args := append([]string{"install", "nfstune", registryChart}, chartValues(t, "agent", "enforce")...)
	start := time.Now()
	if _, err := helm(args...); err != nil {
		t.Fatal(err)
	}
	logf("helm install (agent, enforce) done after %s", time.Since(start).Round(100*time.Millisecond))
	var pod *corev1.Pod
	deadline := time.Now().Add(5 * time.Minute)
	for pod == nil {
		// The DaemonSet controller creates the pod, the scheduler binds it to the node.
		pods, err := podsWithLabel(chartNS, "app.kubernetes.io/component=agent")
		if err == nil && len(pods) == 1 && pods[0].Spec.NodeName == nodeName {
			p, err := waitPod(chartNS, pods[0].Name, true, time.Until(deadline))
			if err != nil {
				t.Fatal(err)
			}
			pod = p
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agent pod scheduled on %s after 5 minutes (%d pods, %v)\nkube-controller-manager:\n%s\nkube-scheduler:\n%s",
				nodeName, len(pods), err, tail("kube-controller-manager", 15), tail("kube-scheduler", 15))
		}
		time.Sleep(500 * time.Millisecond)
	}
	logf("agent pod %s Ready %s after helm install", pod.Name, time.Since(start).Round(100*time.Millisecond))
	// containerd pulled the image index the registry holds, by the chart's default tag.
	summary.AgentImageID = pod.Status.ContainerStatuses[0].ImageID
	if summary.AgentImageID != summary.RegistryImage {
		t.Errorf("agent container's image %q, want the index pushed to the registry, %s", summary.AgentImageID, summary.RegistryImage)
	}

	// containerd's default AppArmor profile confines the agent: the pod sets no profile,
	// which means RuntimeDefault.
	pid, label := appArmorLabel(t, pod)
	summary.AgentAppArmorProfile = label
	logf("agent container at Ready: %s", cpuStat(pid))
	logf("agent process %d runs under AppArmor profile %q", pid, summary.AgentAppArmorProfile)
	if summary.AgentAppArmorProfile != "cri-containerd.apparmor.d (enforce)" {
		t.Errorf("agent's AppArmor profile = %q, want containerd's default in enforce mode", summary.AgentAppArmorProfile)
	}
	agentPod = pod
	chartPodUIDs[string(pod.UID)] = true
}

func TestMetricsViaPodIP(t *testing.T) {
	requireAgent(t)
	ip := net.ParseIP(agentPod.Status.PodIP)
	_, subnet, _ := net.ParseCIDR(podSubnet)
	if ip == nil || ip.IsLoopback() || !subnet.Contains(ip) {
		t.Fatalf("agent pod IP %q: want an address of the pod network %s", agentPod.Status.PodIP, podSubnet)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + net.JoinHostPort(ip.String(), "9477") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "nfstune_agent_reaction_seconds") {
		t.Fatalf("GET /metrics through %s: %d, %d bytes without nfstune_agent_reaction_seconds", ip, resp.StatusCode, len(body))
	}
	summary.MetricsViaPodIP = true
	logf("scraped %d bytes of /metrics from %s:9477", len(body), ip)
}

// startNFSPod creates a pod, waits for its container's start line and for its volume to be
// tuned, and reports what happened.
type podResult struct {
	pod      *corev1.Pod
	mount    mountEntry
	start    started
	tuned    bool
	reaction time.Duration // from the superblock's appearance to the agent's write
	written  bool          // the agent logged the write
	seen     bool          // the watcher saw the superblock appear
}

func startNFSPod(t *testing.T, p *corev1.Pod, boot time.Time, wantTuned bool) podResult {
	t.Helper()
	if err := cluster.create("/api/v1/namespaces/"+testNS+"/pods", p); err != nil {
		t.Fatal(err)
	}
	pod, err := waitPod(testNS, p.Name, false, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	st, err := waitStarted(pod, boot, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := volumeMount(string(pod.UID))
	if !ok {
		t.Fatalf("pod %s: no NFS mount of its volume in the node's mountinfo", pod.Name)
	}
	if m.dev != st.dev {
		t.Fatalf("pod %s: the container sees its volume on %s, the node on %s", pod.Name, st.dev, m.dev)
	}
	r := podResult{pod: pod, mount: m, start: st}
	if wantTuned {
		r.tuned = waitReadAhead(m.dev, wantKB, time.Minute)
		if agentPod != nil {
			var w time.Time
			if w, r.written = agentWrite(agentPod, m.dev); r.written {
				var seen time.Time
				if seen, r.seen = watch.seen(m.dev); r.seen {
					r.reaction = w.Sub(seen)
				}
			}
		}
	}
	return r
}

func TestPVMountOptions(t *testing.T) {
	requireAgent(t)
	out, err := run(time.Minute, filepath.Join(binDir, "nfstune"), "k8s", "volume",
		"--backend", "azure-netapp-files", "--driver", "in-tree", "--static", "--workload", "sequential-read",
		"--server", "127.0.0.1", "--export", v3Path("pv"), "--size", "1Gi", "--name", "lab-pv", "--namespace", testNS)
	if err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	var pvc corev1.PersistentVolumeClaim
	for _, doc := range strings.Split(out, "\n---") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		switch {
		case strings.Contains(doc, "kind: PersistentVolumeClaim"):
			err = yaml.UnmarshalStrict([]byte(doc), &pvc)
		case strings.Contains(doc, "kind: PersistentVolume"):
			err = yaml.UnmarshalStrict([]byte(doc), &pv)
		}
		if err != nil {
			t.Fatalf("decoding nfstune k8s volume's output: %v\n%s", err, doc)
		}
	}
	if pv.Spec.NFS == nil || len(pv.Spec.MountOptions) == 0 || pvc.Name == "" {
		t.Fatalf("nfstune k8s volume rendered no in-tree PV with mount options and claim:\n%s", out)
	}
	if err := cluster.create("/api/v1/persistentvolumes", &pv); err != nil {
		t.Fatal(err)
	}
	if err := cluster.create("/api/v1/namespaces/"+testNS+"/persistentvolumeclaims", &pvc); err != nil {
		t.Fatal(err)
	}
	watch.scan(time.Now())
	r := startNFSPod(t, nfsPod("nfs-pv", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}), bootTime(), true)
	summary.PVMountOptionsRequested = pv.Spec.MountOptions
	super := strings.Split(r.mount.superOptions, ",")
	summary.PVMountOptionsInEffect = []string{}
	for _, o := range pv.Spec.MountOptions {
		if slices.Contains(super, o) {
			summary.PVMountOptionsInEffect = append(summary.PVMountOptionsInEffect, o)
		} else {
			t.Errorf("PV mount option %s is not in effect: mountinfo has %s", o, r.mount.superOptions)
		}
	}
	logf("PV %s mounted by kubelet at %s: %s", pv.Name, r.mount.mountPoint, r.mount.superOptions)
	summary.PVVolumeTuned = r.tuned
	if !r.tuned {
		t.Errorf("PV volume %s: read_ahead_kb = %d, want %d", r.mount.dev, readAhead(r.mount.dev), wantKB)
	}
}

func TestInlineVolumeTuned(t *testing.T) {
	requireAgent(t)
	r := startNFSPod(t, nfsPod("nfs-inline", inlineNFS("inline")), bootTime(), true)
	summary.InlineVolumeTuned = r.tuned
	if !r.tuned {
		t.Fatalf("inline nfs volume %s (%s): read_ahead_kb = %d, want %d", r.mount.dev, r.mount.source, readAhead(r.mount.dev), wantKB)
	}
	logf("inline volume %s at %s tuned (container saw %d)", r.mount.dev, r.mount.mountPoint, r.start.readAheadKB)
}

func TestSequentialPods(t *testing.T) {
	requireAgent(t)
	boot := bootTime()
	var reactions []time.Duration
	devs := map[string]bool{}
	for i := 1; i <= sequential; i++ {
		name := fmt.Sprintf("pod%02d", i)
		r := startNFSPod(t, nfsPod("seq-"+name, inlineNFS(name)), boot, true)
		summary.PodsTotal++
		if devs[r.mount.dev] {
			t.Errorf("pod %s shares superblock %s with an earlier pod", r.pod.Name, r.mount.dev)
		}
		devs[r.mount.dev] = true
		if r.tuned {
			summary.PodsTuned++
		} else {
			t.Errorf("pod %s: volume %s read_ahead_kb = %d, want %d", r.pod.Name, r.mount.dev, readAhead(r.mount.dev), wantKB)
		}
		before := r.start.readAheadKB == wantKB
		if before {
			summary.PodsTunedBeforeFirstProcess++
		}
		if r.written && r.seen {
			reactions = append(reactions, r.reaction)
		} else {
			t.Errorf("pod %s: no agent write of %s in its log, or the superblock was not seen appearing", r.pod.Name, r.mount.dev)
		}
		logf("pod %s: %s reaction %s, container's first read %d KiB (tuned before first process: %v)",
			r.pod.Name, r.mount.dev, r.reaction.Round(time.Millisecond), r.start.readAheadKB, before)
	}
	// The tail is what the promise of a volume tuned before its pod's first process rests
	// on: p99 and the maximum with every reaction, sorted, in the summary and the log.
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	summary.ReactionsMs = []float64{}
	if len(reactions) > 0 {
		slices.Sort(reactions)
		summary.ReactionMsP50 = ms(percentile(reactions, 50))
		summary.ReactionMsP99 = ms(percentile(reactions, 99))
		summary.ReactionMsMax = ms(reactions[len(reactions)-1])
	}
	for _, r := range reactions {
		summary.ReactionsMs = append(summary.ReactionsMs, ms(r))
	}
	logf("%d pods: %d tuned, %d before the container's first process; reaction over %d: p50 %.1f ms, p99 %.1f ms, max %.1f ms; sorted (ms): %v",
		summary.PodsTotal, summary.PodsTuned, summary.PodsTunedBeforeFirstProcess, len(reactions),
		summary.ReactionMsP50, summary.ReactionMsP99, summary.ReactionMsMax, summary.ReactionsMs)
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// TestAgentAppArmorProfile runs the agent with agent.blockedProcesses under
// deploy/apparmor/nfstune-agent: it starts and tunes a new volume without one denial, and a
// container with the agent's capability, mounts and profile can neither read nor write host
// files through /host/proc/1/root, nor read a process's environ, while the same container
// unconfined writes one.
func TestAgentAppArmorProfile(t *testing.T) {
	requireAgent(t)
	pod := confineAgent(t)
	agentPod = pod
	if _, got := appArmorLabel(t, pod); got != "nfstune-agent (enforce)" {
		t.Fatalf("agent's AppArmor profile = %q, want nfstune-agent (enforce)", got)
	}
	logf("agent pod %s Ready under nfstune-agent (enforce), with CAP_SYS_PTRACE", pod.Name)
	r := startNFSPod(t, nfsPod("nfs-apparmor", inlineNFS("apparmor")), bootTime(), true)
	if !r.tuned || !r.written {
		t.Errorf("under the profile the agent did not tune %s: read_ahead_kb %d, write logged %v", r.mount.dev, readAhead(r.mount.dev), r.written)
	}
	if d := agentDenials(t); len(d) > 0 {
		t.Errorf("the profile refused the agent %d times:\n%s", len(d), strings.Join(d, "\n"))
	}

	bin := copyProbe(t)
	local := "nfstune-agent"
	confined := runProbe(t, probePod("apparmor-confined", pod, corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &local}, bin))
	confinedWrote := takeProbeFile()
	unconfined := runProbe(t, probePod("apparmor-unconfined", pod, corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}, bin))
	unconfinedWrote := takeProbeFile()
	summary.AppArmorProbes = map[string]probeResult{"nfstune-agent": confined, "unconfined": unconfined}
	// Unconfined, the capability makes the container root on the node: what the profile
	// is for. A probe that cannot show this proves nothing below.
	if unconfined.ReadThroughRoot != "ok" || unconfined.WriteThroughRoot != "ok" || !unconfinedWrote {
		t.Errorf("unconfined probe: read %s, write %s, file on the node %v; want both ok and the file written", unconfined.ReadThroughRoot, unconfined.WriteThroughRoot, unconfinedWrote)
	}
	if !probeDenied(confined.ReadThroughRoot) || !probeDenied(confined.WriteThroughRoot) || confinedWrote {
		t.Errorf("under nfstune-agent: read %s, write %s, file on the node %v; want both refused", confined.ReadThroughRoot, confined.WriteThroughRoot, confinedWrote)
	}
	if confined.RootLinkText != "ok" || confined.FDInfo != "ok" {
		t.Errorf("under nfstune-agent the blocked-process view cannot read: root link %s, fdinfo %s", confined.RootLinkText, confined.FDInfo)
	}
	// A process's environment: the capability reads it unconfined, the profile denies it.
	if unconfined.Environ != "ok" || !probeDenied(confined.Environ) {
		t.Errorf("/host/proc/1/environ: unconfined %s, under nfstune-agent %s; want ok, then refused", unconfined.Environ, confined.Environ)
	}
}

func TestObserveMode(t *testing.T) {
	requireAgent(t)
	args := append([]string{"upgrade", "nfstune", registryChart}, chartValues(t, "agent", "observe")...)
	if _, err := helm(args...); err != nil {
		t.Fatal(err)
	}
	logf("helm upgrade to observe mode done")
	// The DaemonSet replaces the pod: wait for the new one.
	pod := replacedAgent(t, string(agentPod.UID), "observe-mode")
	agentPod = pod
	before := map[string]int{}
	ms, _ := readMounts()
	for _, m := range ms {
		if isNFS(m.fsType) {
			before[m.dev] = readAhead(m.dev)
		}
	}
	r := startNFSPod(t, nfsPod("nfs-observe", inlineNFS("observe")), bootTime(), false)
	// The agent sees the new superblock, and says it leaves it alone.
	var saw bool
	for end := time.Now().Add(time.Minute); !saw && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, e := range agentEvents(pod) {
			saw = saw || (e.Device == r.mount.dev && strings.Contains(e.Msg, "observe mode"))
		}
	}
	if !saw {
		t.Errorf("the observe-mode agent did not report the new superblock %s", r.mount.dev)
	}
	for _, e := range agentEvents(pod) {
		if e.Msg == "read-ahead set" {
			summary.ObserveWrites++
			t.Errorf("observe-mode agent wrote: %+v", e)
		}
	}
	before[r.mount.dev] = r.start.readAheadKB
	for dev, kb := range before {
		if now := readAhead(dev); now != kb {
			summary.ObserveWrites++
			t.Errorf("bdi %s read_ahead_kb changed from %d to %d under the observe-mode agent", dev, kb, now)
		}
	}
	if r.start.readAheadKB == wantKB {
		t.Errorf("the observe-mode volume %s started at %d KiB, the enforce value", r.mount.dev, wantKB)
	}
	logf("observe mode: new superblock %s left at %d KiB, %d writes", r.mount.dev, readAhead(r.mount.dev), summary.ObserveWrites)
}

// TestPodIOKubelet runs the agent with agent.podIO on the real kubelet: pods A and B share
// one superblock (the same server and export, two inline volumes), A reads 64 MiB with
// read(2) and B 256 MiB through a mapping; pod C reads 32 MiB of another export. Each
// pod's figures must match what it read within 5 %, the pods' READ payload on the shared
// superblock must sum to its mountstats figure within 5 %, and C must not show on it.
func TestPodIOKubelet(t *testing.T) {
	requireAgent(t)
	names := []string{"podio", "podio-other"}
	if err := addExportsSized(names, 320, "400m"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		export, name string
		mib          int
	}{{"podio", "a", 64}, {"podio", "b", 256}, {"podio-other", "c", 32}} {
		if out, err := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(v3Path(f.export), f.name), "bs=1M", "count="+strconv.Itoa(f.mib), "status=none").CombinedOutput(); err != nil {
			t.Fatalf("dd: %v: %s", err, out)
		}
	}
	// In the agent's pod, with CAP_BPF and CAP_PERFMON, the collector's hooks in the nfs
	// module attach as perf events (kprobes, tracepoints): their BTF ways need the module's
	// BTF object, which the kernel hands only to CAP_SYS_ADMIN. Debian's kernel refuses
	// perf events to all but CAP_SYS_ADMIN at its default kernel.perf_event_paranoid of 3;
	// at 2, the upstream kernel's default, CAP_PERFMON suffices (docs/kernels.md). The
	// node here is set as docs/kubernetes.md tells an admin to.
	const paranoid = "/proc/sys/kernel/perf_event_paranoid"
	was, err := os.ReadFile(paranoid)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paranoid, []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(paranoid, was, 0o644) })
	args := append([]string{"upgrade", "nfstune", registryChart}, chartValues(t, "agent", "observe")...)
	if _, err := helm(append(args, "--set", "agent.podIO.enabled=true")...); err != nil {
		t.Fatal(err)
	}
	pod := replacedAgent(t, string(agentPod.UID), "pod-io")
	agentPod = pod
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, "9477") + "/metrics"
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
		body := scrapeBody(url)
		if strings.Contains(body, `nfstune_pod_io_collector_part{part="rpc"} 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not load within 2 minutes:\n%s\nagent log:\n%s", grepPrefix(body, "nfstune_pod_io"), strings.Join(containerLog(pod, "agent"), "\n"))
		}
	}
	logf("per-pod collector loaded in agent pod %s", pod.Name)
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}

	bin := copyProbe(t)
	start := func(name, export, reader string) (*corev1.Pod, mountEntry) {
		p := readerPod(name, inlineNFS(export), bin, reader)
		path := "/api/v1/namespaces/" + testNS + "/pods"
		if err := cluster.create(path, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.remove(path + "/" + p.Name) })
		got, err := waitPod(testNS, p.Name, true, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := volumeMount(string(got.UID))
		if !ok {
			t.Fatalf("pod %s: no NFS mount of its volume in the node's mountinfo", p.Name)
		}
		return got, m
	}
	waitRead := func(p *corev1.Pod) {
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
			for _, l := range containerLog(p, "c") {
				if strings.HasPrefix(l, "k8slab-read bytes=") {
					return
				}
				if strings.HasPrefix(l, "k8slab-read error") {
					t.Fatalf("pod %s: %s", p.Name, l)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s did not finish reading in 5 minutes", p.Name)
			}
		}
	}
	podA, mountA := start("podio-a", "podio", "read:/data/a")
	waitRead(podA)
	podB, mountB := start("podio-b", "podio", "mmap:/data/b")
	waitRead(podB)
	podC, mountC := start("podio-c", "podio-other", "read:/data/c")
	waitRead(podC)
	// The export is this test's own, so its superblock came with pod A's volume and its
	// counters run from there: everything it read, the pods' READs and nothing else.
	_, server := mountReadBytes(t, mountA.dev)
	if mountB.dev != mountA.dev || mountC.dev == mountA.dev {
		t.Fatalf("superblocks: A %s, B %s, C %s; want A and B shared, C apart", mountA.dev, mountB.dev, mountC.dev)
	}

	series := func(body string, p *corev1.Pod, dev, source string) float64 {
		return seriesValue(body, `nfstune_pod_read_bytes_total{device="`+dev+`",pod_uid="`+string(p.UID)+`",source="`+source+`"}`)
	}
	const mib = 1 << 20
	var body string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		body = scrapeBody(url)
		if series(body, podC, mountC.dev, "application") >= 32*mib*0.95 {
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if got < 0.95*want || got > 1.05*want {
			t.Errorf("%s: %.0f bytes, want %.0f within 5 %%", what, got, want)
		}
	}
	near("pod A read(2)", series(body, podA, mountA.dev, "application"), 64*mib)
	near("pod A READ payload", series(body, podA, mountA.dev, "server"), 64*mib)
	near("pod B READ payload in faults", series(body, podB, mountA.dev, "fault"), 256*mib)
	near("pod C read(2)", series(body, podC, mountC.dev, "application"), 32*mib)
	if v := series(body, podC, mountA.dev, "server"); v >= 0 {
		t.Errorf("pod C on the shared superblock %s: %.0f bytes", mountA.dev, v)
	}
	sum := series(body, podA, mountA.dev, "server") + series(body, podB, mountA.dev, "server")
	near("pods' READ payload against mountstats", sum, float64(server))
	logf("per-pod NFS I/O: A %.1f MiB read(2), B %.1f MiB through mmap, C %.1f MiB; shared superblock %.1f MiB in mountstats, %.1f MiB over its pods",
		series(body, podA, mountA.dev, "application")/mib, series(body, podB, mountA.dev, "fault")/mib,
		series(body, podC, mountC.dev, "application")/mib, float64(server)/mib, sum/mib)
	if t.Failed() {
		t.Logf("series:\n%s", grepPrefix(body, "nfstune_pod_"))
	}
}

// uninstall removes the release and waits until the chart's namespace is gone.
func uninstall(t *testing.T) {
	t.Helper()
	if _, err := helm("uninstall", "nfstune", "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		code, _, err := cluster.do(http.MethodGet, "/api/v1/namespaces/"+chartNS, nil)
		if err == nil && code == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s still there 5 minutes after helm uninstall", chartNS)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settle waits, at most 2 minutes, until the node has no pod, container, process or mount
// of the chart left: kubelet removes them after the API objects are gone. It returns the
// state then.
func settle(t *testing.T) []string {
	t.Helper()
	var now []string
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		now = nodeState(t)
		if !slices.ContainsFunc(now, func(s string) bool { return !strings.HasPrefix(s, "file ") && !strings.HasPrefix(s, "directory ") }) {
			break
		}
	}
	return now
}

func TestUninstallClean(t *testing.T) {
	requireAgent(t)
	uninstall(t)
	after := settle(t)
	summary.UninstallLeftovers = []string{}
	for _, s := range after {
		if !slices.Contains(nodeBefore, s) {
			summary.UninstallLeftovers = append(summary.UninstallLeftovers, s)
		}
	}
	summary.UninstallClean = slices.Equal(after, nodeBefore)
	if !summary.UninstallClean {
		t.Errorf("the node after helm uninstall differs from before helm install:\nbefore: %q\nafter:  %q", nodeBefore, after)
	}
	agentPod = nil
}

// installerRule is the udev rule the installer mode writes on the node.
const installerRule = "/etc/udev/rules.d/99-zz-nfstune-readahead.rules"

// waitInstallerPod waits, at most 5 minutes, for the installer pod to be Running: its init
// container, nfstune k8s install-node, has finished.
func waitInstallerPod(t *testing.T) *corev1.Pod { return waitComponentPod(t, "installer") }

// waitComponentPod waits for the one pod of the chart's component (installer, revert) to
// run: its init container has finished.
func waitComponentPod(t *testing.T, component string) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		pods, _ := podsWithLabel(chartNS, "app.kubernetes.io/component="+component)
		if len(pods) == 1 {
			p, err := waitPod(chartNS, pods[0].Name, false, time.Until(deadline))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s pod after 5 minutes", component)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestInstallerUdev(t *testing.T) {
	requireCluster(t)
	// A release an earlier case failed to remove would hold the name.
	if _, err := helm("uninstall", "nfstune", "--ignore-not-found", "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
	before := nodeState(t)
	args := append([]string{"install", "nfstune", registryChart}, chartValues(t, "installer", "enforce")...)
	if _, err := helm(args...); err != nil {
		t.Fatal(err)
	}
	pod := waitInstallerPod(t)
	logf("installer pod %s Running: its init container has finished", pod.Name)
	if _, err := os.Stat(installerRule); err != nil {
		t.Fatalf("the installer's init container did not install the udev rule: %v", err)
	}
	for _, s := range nodeState(t) {
		if strings.HasPrefix(s, "process ") && !strings.Contains(s, "k8s pause") {
			t.Fatalf("installer mode, yet an nfstune process other than the pause runs: %s", s)
		}
	}
	// udevd looks for changed rule files at most every 3 seconds.
	time.Sleep(4 * time.Second)
	r := startNFSPod(t, nfsPod("nfs-installer", inlineNFS("installer")), bootTime(), false)
	summary.InstallerUdevTuned = waitReadAhead(r.mount.dev, wantKB, time.Minute)
	if !summary.InstallerUdevTuned {
		t.Errorf("with the installer's udev rule and no agent, the new volume %s has read_ahead_kb %d, want %d", r.mount.dev, readAhead(r.mount.dev), wantKB)
	}
	logf("installer mode: udev tuned %s to %d KiB (container's first read %d)", r.mount.dev, readAhead(r.mount.dev), r.start.readAheadKB)

	// Undo it from the cluster: revert mode, then uninstall.
	args = append([]string{"upgrade", "nfstune", registryChart}, chartValues(t, "revert", "enforce")...)
	if _, err := helm(append(args, "--wait", "--timeout", "5m")...); err != nil {
		t.Fatal(err)
	}
	pod = waitComponentPod(t, "revert")
	logf("revert pod %s Running: its init container has reverted the node", pod.Name)
	for _, p := range []string{installerRule, "/opt/nfstune/bin/nfstune", "/etc/nfstune/policy.yaml", "/var/lib/nfstune/journal.json"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the revert pod ran: %v", p, err)
		}
	}
	uninstall(t)
	after := settle(t)
	summary.InstallerUninstallLeftovers = []string{}
	for _, s := range after {
		if !slices.Contains(before, s) {
			summary.InstallerUninstallLeftovers = append(summary.InstallerUninstallLeftovers, s)
			if !strings.HasPrefix(s, "directory ") {
				t.Errorf("after revert mode and helm uninstall the node keeps %s", s)
			}
		}
	}
	logf("installer mode: after revert mode and helm uninstall the node keeps %q (the empty directories kubelet made for the hostPath volumes)", summary.InstallerUninstallLeftovers)
}
