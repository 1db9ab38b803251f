//go:build lab

package k8slab

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// summary is bin/k8s-e2e/summary.json: what the run verified, with its figures. The tests
// fill it in as they go; TestMain writes it, also when a case or the cluster fails.
var summary struct {
	KubeletVersion              string    `json:"kubelet_version"`
	ContainerdVersion           string    `json:"containerd_version"`
	RuncVersion                 string    `json:"runc_version"`
	Kernel                      string    `json:"kernel"`
	AppArmorEnabled             bool      `json:"apparmor_enabled"`
	AgentAppArmorProfile        string    `json:"agent_apparmor_profile"`
	AgentCPULimit               string    `json:"agent_cpu_limit"`
	RegistryImage               string    `json:"registry_image"`
	AgentImageID                string    `json:"agent_image_id"`
	ClusterStartS               float64   `json:"cluster_start_s"`
	PodsTotal                   int       `json:"pods_total"`
	PodsTuned                   int       `json:"pods_tuned"`
	PodsTunedBeforeFirstProcess int       `json:"pods_tuned_before_first_process"`
	ReactionMsP50               float64   `json:"reaction_ms_p50"`
	ReactionMsP99               float64   `json:"reaction_ms_p99"`
	ReactionMsMax               float64   `json:"reaction_ms_max"`
	ReactionsMs                 []float64 `json:"reactions_ms"`
	MetricsViaPodIP             bool      `json:"metrics_via_pod_ip"`
	InlineVolumeTuned           bool      `json:"inline_volume_tuned"`
	PVMountOptionsRequested     []string  `json:"pv_mount_options_requested"`
	PVMountOptionsInEffect      []string  `json:"pv_mount_options_in_effect"`
	PVVolumeTuned               bool      `json:"pv_volume_tuned"`
	ObserveWrites               int       `json:"observe_writes"`
	InstallerUdevTuned          bool      `json:"installer_udev_tuned"`
	UninstallClean              bool      `json:"uninstall_clean"`
	UninstallLeftovers          []string  `json:"uninstall_leftovers"`
	InstallerUninstallLeftovers []string  `json:"installer_uninstall_leftovers"`
	FleetCompliant              bool      `json:"fleet_compliant"`
	FleetUntunedReported        bool      `json:"fleet_untuned_reported"`
	FleetStoppedAgentS          float64   `json:"fleet_stopped_agent_s"`
	FleetNoPodS                 float64   `json:"fleet_no_pod_s"`
	FleetGroups                 []string  `json:"fleet_groups"`
	InlineDropInOptions         string    `json:"inline_dropin_options"`
	// FleetBenchTotals are the fleet curve's ops/s per step, the sums of its pods';
	// FleetBenchKilledClean is whether the interrupted run left no pod, object or file.
	FleetBenchTotals      []float64 `json:"fleet_bench_totals,omitempty"`
	FleetBenchKilledClean bool      `json:"fleet_bench_killed_clean"`
	// AppArmorProbes are what a container with the agent's capability and mounts could do
	// under the nfstune-agent profile and unconfined.
	AppArmorProbes map[string]probeResult `json:"apparmor_probes,omitempty"`
	GuestElapsedS  float64                `json:"guest_elapsed_s"`
	FailedStep     string                 `json:"failed_step,omitempty"`
}

// The cluster the tests share: started once by TestMain.
var (
	cluster *api
	theNode *node
	binDir  string
)

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		// A container's /nfstune (TestAgentAppArmorProfile), not the tests.
		os.Exit(apparmorProbe())
	}
	if os.Getenv(readerEnv) != "" {
		// A reader pod's /nfstune (TestPodIOKubelet).
		os.Exit(fileReader())
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	start := time.Now()
	defer func() {
		summary.GuestElapsedS = time.Since(start).Seconds()
		writeSummary()
	}()
	for _, env := range []string{envBin, envRelease, envVersion} {
		if os.Getenv(env) == "" {
			fmt.Fprintf(os.Stderr, "k8slab: %s is not set: run make k8s-e2e\n", env)
			return 2
		}
	}
	if s := os.Getenv(envPods); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			fmt.Fprintf(os.Stderr, "k8slab: %s=%q: want a number of pods from 1 to 100\n", envPods, s)
			return 2
		}
		sequential = n
	}
	summary.AgentCPULimit = agentCPULimit
	theNode = &node{bin: "/run/k8slab/bin"}
	binDir = theNode.bin
	defer theNode.stop()
	if err := up(theNode); err != nil {
		logf("FAILED: %v", err)
		if se, ok := err.(*stepError); ok {
			summary.FailedStep = se.step
			for _, c := range []string{"containerd", "kubelet"} {
				if c != se.component && fileExists(logPath(c)) {
					logf("last lines of %s:\n%s", c, tail(c, 15))
				}
			}
		} else {
			summary.FailedStep = "node prepare"
		}
		return 1
	}
	summary.ClusterStartS = time.Since(start).Seconds()
	w, err := watchMounts()
	if err != nil {
		logf("FAILED: watching mountinfo: %v", err)
		return 1
	}
	defer w.close()
	watch = w
	logf("cluster up after %.0f s", summary.ClusterStartS)
	return m.Run()
}

// up makes the guest a one-node cluster: the node's kernel side, containerd with the
// images, the control plane, the NFS exports of the cases, and kubelet.
func up(n *node) error {
	logf("step copy binaries")
	if err := copyBinaries(os.Getenv(envBin), n.bin); err != nil {
		return &stepError{step: "copy binaries", err: err}
	}
	logf("step node prepare (AppArmor, cgroup v2, tmpfs state directories, network)")
	if err := n.prepare(); err != nil {
		return &stepError{step: "node prepare", err: err}
	}
	b, _ := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	summary.AppArmorEnabled = strings.TrimSpace(string(b)) == "Y"
	if !summary.AppArmorEnabled {
		return &stepError{step: "node prepare", err: fmt.Errorf("AppArmor is not enabled in the kernel (/sys/module/apparmor/parameters/enabled = %q): boot with apparmor=1 security=apparmor", b)}
	}
	summary.KubeletVersion = version(filepath.Join(n.bin, "kubelet"))
	summary.ContainerdVersion = version("containerd")
	summary.RuncVersion = version("runc")
	if u, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		summary.Kernel = strings.TrimSpace(string(u))
	}
	logf("kubelet %s, containerd %s, runc %s, kernel %s, AppArmor on", summary.KubeletVersion, summary.ContainerdVersion, summary.RuncVersion, summary.Kernel)
	if err := n.startContainerd(); err != nil {
		return err
	}
	if err := n.startRegistry(); err != nil {
		return err
	}
	a, err := n.startControlPlane()
	if err != nil {
		return err
	}
	if err := makeExports(); err != nil {
		return &stepError{step: "nfs exports", err: err}
	}
	if err := n.startKubelet(a); err != nil {
		return err
	}
	cluster = a
	return nil
}

func writeSummary() {
	path := os.Getenv(envSummary)
	if path == "" {
		return
	}
	b, err := json.MarshalIndent(&summary, "", "  ")
	if err != nil {
		logf("summary: %v", err)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		logf("summary: %v", err)
		return
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		logf("summary: %v", err)
		return
	}
	logf("wrote %s", path)
}
