package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/internal/inventory"
)

// hostPathRule is what a DaemonSet may mount from the host, and whether writably.
// recursive requires the read-only mount to be recursively read-only where the runtime
// can (a host directory with submounts).
type hostPathRule struct {
	mountPath string
	writable  bool
	recursive bool
}

// contract is what a DaemonSet's pod may have beyond the common rules: its host paths, the
// capabilities its containers add, and whether AppArmor may be unconfined.
type contract struct {
	hostPaths    map[string]hostPathRule
	capabilities []corev1.Capability
	unconfined   bool
}

// checkPod returns every way pod exceeds the agent's security contract: not privileged, no
// host namespaces, root only in containers that mount a host path (any other runs as a
// non-root user), every capability dropped and only c's added, no privilege escalation,
// read-only root filesystem, RuntimeDefault seccomp, AppArmor not unconfined unless c
// allows it, and host paths limited to c's (by host path), mounted where c says and
// writable only where it says.
func checkPod(pod corev1.PodSpec, c contract) []error {
	allowed := c.hostPaths
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		bad("host namespaces: network %v pid %v ipc %v", pod.HostNetwork, pod.HostPID, pod.HostIPC)
	}
	if pod.HostUsers != nil && !*pod.HostUsers {
		// In a user namespace, uid 0 cannot write the host's root-owned bdi attributes.
		bad("hostUsers: false")
	}
	if pod.SecurityContext != nil && pod.SecurityContext.AppArmorProfile != nil {
		bad("pod AppArmor profile: set on the container that needs it")
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil ||
		pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("pod seccomp profile is not RuntimeDefault")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		bad("service account token is mounted")
	}
	hostVolumes := map[string]string{} // volume name -> host path
	for _, v := range pod.Volumes {
		switch {
		case v.HostPath != nil:
			if _, ok := allowed[v.HostPath.Path]; !ok {
				bad("volume %s: host path %q is not allowed", v.Name, v.HostPath.Path)
			}
			hostVolumes[v.Name] = v.HostPath.Path
		case v.ConfigMap != nil, v.EmptyDir != nil:
		default:
			bad("volume %s: unexpected volume type", v.Name)
		}
	}
	containers := append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
	for _, ctr := range containers {
		sc := ctr.SecurityContext
		if sc == nil {
			bad("container %s: no security context", ctr.Name)
			continue
		}
		if sc.Privileged == nil || *sc.Privileged {
			bad("container %s: privileged is not false", ctr.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container %s: allowPrivilegeEscalation is not false", ctr.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("container %s: root filesystem is writable", ctr.Name)
		}
		mountsHost := false
		for _, m := range ctr.VolumeMounts {
			_, ok := hostVolumes[m.Name]
			mountsHost = mountsHost || ok
		}
		switch {
		case mountsHost && (sc.RunAsUser == nil || *sc.RunAsUser != 0):
			bad("container %s: runAsUser is not 0 (the bdi attributes are root-owned 0644)", ctr.Name)
		case !mountsHost && (sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot):
			bad("container %s: mounts no host path but may run as root", ctr.Name)
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			bad("container %s: capabilities are not drop [ALL]", ctr.Name)
		}
		if sc.Capabilities != nil && !slices.Equal(sc.Capabilities.Add, c.capabilities) {
			bad("container %s: capabilities add %q, want %q", ctr.Name, sc.Capabilities.Add, c.capabilities)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad("container %s: seccomp profile is not RuntimeDefault", ctr.Name)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			bad("container %s: procMount %s", ctr.Name, *sc.ProcMount)
		}
		if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined && !c.unconfined {
			bad("container %s: AppArmor unconfined", ctr.Name)
		}
		for _, p := range ctr.Ports {
			if p.HostPort != 0 {
				bad("container %s: hostPort %d", ctr.Name, p.HostPort)
			}
		}
		for _, m := range ctr.VolumeMounts {
			hp, ok := hostVolumes[m.Name]
			if !ok {
				continue
			}
			rule := allowed[hp]
			if m.MountPath != rule.mountPath {
				bad("container %s: host path %q mounted at %q, want %q", ctr.Name, hp, m.MountPath, rule.mountPath)
			}
			if !m.ReadOnly && !rule.writable {
				bad("container %s: host path %q is writable", ctr.Name, hp)
			}
			if rule.recursive && (m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == corev1.RecursiveReadOnlyDisabled) {
				bad("container %s: host path %q is not recursively read-only", ctr.Name, hp)
			}
			if m.SubPath != "" || m.SubPathExpr != "" {
				bad("container %s: subPath on host path %q", ctr.Name, hp)
			}
		}
	}
	return errs
}

// agentHostPaths are the agent's host paths: /proc read-only, the bdi directory writable
// only in enforce mode; no capability.
func agentHostPaths(enforce bool) contract {
	return contract{hostPaths: map[string]hostPathRule{
		"/proc":                    {mountPath: "/host/proc"},
		"/sys/devices/virtual/bdi": {mountPath: "/host/sys/class/bdi", writable: enforce},
	}}
}

// withHostSys adds the host's /sys/kernel/sunrpc, read-only at the same path below /host
// (agent.hostSys): only that directory, so that no submount of /sys comes with it.
func withHostSys(c contract) contract {
	c.hostPaths["/sys/kernel/sunrpc"] = hostPathRule{mountPath: "/host/sys/kernel/sunrpc"}
	return c
}

// withPodCgroups adds the host's cgroup v2 hierarchy, read-only at the same path below
// /host (agent.podCgroups).
func withPodCgroups(c contract) contract {
	c.hostPaths[HostCgroup] = hostPathRule{mountPath: HostRoot + HostCgroup}
	return c
}

// withProxyHelpers adds the NFS proxy helpers' directories, read-only at their own path
// below /host.
func withProxyHelpers(c contract) contract {
	for _, d := range inventory.ProxyStateDirs() {
		c.hostPaths[d] = hostPathRule{mountPath: HostRoot + d}
	}
	return c
}

// withRecovery adds what the recovery policy's shutdown writes: the NFS superblocks' sysfs
// attributes and the journal.
func withRecovery(c contract) contract {
	c.hostPaths[HostNFS] = hostPathRule{mountPath: HostRoot + HostNFS, writable: true}
	c.hostPaths[StateDir] = hostPathRule{mountPath: HostRoot + StateDir, writable: true}
	return c
}

// withRecoveryObserved adds /sys/fs/nfs read-only (the recovery policy observing).
func withRecoveryObserved(c contract) contract {
	c.hostPaths[HostNFS] = hostPathRule{mountPath: HostRoot + HostNFS}
	return c
}

// withJournal adds the journal's directory, writable: an adaptive read-ahead that writes,
// as the default one does in enforce mode.
func withJournal(c contract) contract {
	c.hostPaths[StateDir] = hostPathRule{mountPath: HostRoot + StateDir, writable: true}
	return c
}

// withPodIO adds the host's tracefs read-only at its own path, and CAP_BPF and CAP_PERFMON
// (agent.podIO).
func withPodIO(c contract) contract {
	c.hostPaths[HostTracing] = hostPathRule{mountPath: HostTracing}
	c.capabilities = append(c.capabilities, PodIOCapabilities...)
	return c
}

// withPtrace adds CAP_SYS_PTRACE (agent.blockedProcesses).
func withPtrace(c contract) contract {
	c.capabilities = []corev1.Capability{"SYS_PTRACE"}
	return c
}

func daemonSets(t *testing.T, name string) map[string]*appsv1.DaemonSet {
	t.Helper()
	out := map[string]*appsv1.DaemonSet{}
	for _, o := range decodeAll(t, renderFile(t, name, FormatYAML)) {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			out[ds.Name] = ds
		}
	}
	return out
}

func TestSecurityContract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		values  string
		ds      string
		allowed contract
	}{
		{"agent-default", "nfstune-agent", withPodCgroups(withHostSys(agentHostPaths(false)))},
		{"agent-enforce-cas", "nfstune-agent", withPodCgroups(withJournal(agentHostPaths(true)))},
		{"agent-proxy-helpers", "nfstune-agent", withPodCgroups(withJournal(withProxyHelpers(withHostSys(agentHostPaths(true)))))},
		{"agent-blocked-processes", "nfstune-agent", withPodCgroups(withPtrace(withHostSys(agentHostPaths(false))))},
		{"agent-pod-io", "nfstune-agent", withPodIO(withPodCgroups(withHostSys(agentHostPaths(false))))},
		{"agent-recovery", "nfstune-agent", withPodCgroups(withRecovery(withPtrace(withHostSys(agentHostPaths(true)))))},
		{"agent-recovery-observe", "nfstune-agent", withPodCgroups(withJournal(withRecoveryObserved(withPtrace(withHostSys(agentHostPaths(true))))))},
		{"agent-adaptive", "nfstune-agent", withPodCgroups(withJournal(withHostSys(agentHostPaths(true))))},
		{"agent-adaptive", "nfstune-agent-batch", withPodCgroups(withJournal(withHostSys(agentHostPaths(true))))},
		{"installer", "nfstune-validate", agentHostPaths(false)},
		{"installer", "nfstune-installer", contract{hostPaths: map[string]hostPathRule{
			"/var/lib/nfstune/bin": {mountPath: "/host/var/lib/nfstune/bin", writable: true},
			"/etc/nfstune":         {mountPath: "/host/etc/nfstune", writable: true},
			"/etc/udev/rules.d":    {mountPath: "/host/etc/udev/rules.d", writable: true},
			"/var/lib/nfstune":     {mountPath: "/host/var/lib/nfstune", writable: true},
		}}},
		{"revert", "nfstune-revert", contract{hostPaths: map[string]hostPathRule{
			"/var/lib/nfstune/bin": {mountPath: "/host/var/lib/nfstune/bin", writable: true},
			"/etc/nfstune":         {mountPath: "/host/etc/nfstune", writable: true},
			"/etc/udev/rules.d":    {mountPath: "/host/etc/udev/rules.d", writable: true},
			"/var/lib/nfstune":     {mountPath: "/host/var/lib/nfstune", writable: true},
		}}},
		{"revert-nfsmount", "nfstune-revert", contract{hostPaths: map[string]hostPathRule{
			"/opt/nfstune/bin":     {mountPath: "/host/opt/nfstune/bin", writable: true},
			"/etc/nfstune":         {mountPath: "/host/etc/nfstune", writable: true},
			"/etc/udev/rules.d":    {mountPath: "/host/etc/udev/rules.d", writable: true},
			"/var/lib/nfstune":     {mountPath: "/host/var/lib/nfstune", writable: true},
			"/etc/nfsmount.conf.d": {mountPath: "/host/etc/nfsmount.conf.d", writable: true},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.values+"/"+tt.ds, func(t *testing.T) {
			t.Parallel()
			ds := daemonSets(t, tt.values)[tt.ds]
			if ds == nil {
				t.Fatalf("no DaemonSet %s", tt.ds)
			}
			for _, err := range checkPod(ds.Spec.Template.Spec, tt.allowed) {
				t.Error(err)
			}
		})
	}
}

// TestSecurityContractCatches proves the checker fails on each change it exists to stop.
func TestSecurityContractCatches(t *testing.T) {
	t.Parallel()
	mutations := []struct {
		name   string
		mutate func(p *corev1.PodSpec)
		want   string
	}{
		{"privileged", func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Privileged = new(true) }, "privileged"},
		{"hostNetwork", func(p *corev1.PodSpec) { p.HostNetwork = true }, "host namespaces"},
		{"hostPID", func(p *corev1.PodSpec) { p.HostPID = true }, "host namespaces"},
		{"wider hostPath", func(p *corev1.PodSpec) { volume(p, "host-bdi").HostPath.Path = "/sys/devices" }, `host path "/sys/devices" is not allowed`},
		{"whole host", func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, hostPathVolume("root", "/", corev1.HostPathDirectory))
		}, `host path "/" is not allowed`},
		{"writable proc", func(p *corev1.PodSpec) { mount(p, "host-proc").ReadOnly = false }, `host path "/proc" is writable`},
		{"writable sunrpc", func(p *corev1.PodSpec) { mount(p, "host-sunrpc").ReadOnly = false }, `host path "/sys/kernel/sunrpc" is writable`},
		{"writable cgroup hierarchy", func(p *corev1.PodSpec) { mount(p, "host-cgroup").ReadOnly = false }, `host path "/sys/fs/cgroup" is writable`},
		{"tracefs without podIO", func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, hostPathVolume("host-tracing", HostTracing, corev1.HostPathDirectory))
		}, `host path "/sys/kernel/tracing" is not allowed`},
		{"BPF without podIO", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = PodIOCapabilities
		}, "capabilities add"},
		{"whole sys, with its submounts", func(p *corev1.PodSpec) {
			volume(p, "host-sunrpc").HostPath.Path = "/sys"
			mount(p, "host-sunrpc").MountPath = "/host/sys"
		}, `host path "/sys" is not allowed`},
		{"writable bdi in observe mode", func(p *corev1.PodSpec) { mount(p, "host-bdi").ReadOnly = false }, `"/sys/devices/virtual/bdi" is writable`},
		{"capability added", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "capabilities add"},
		{"ptrace without blockedProcesses", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{PtraceCapability}
		}, "capabilities add"},
		{"capabilities not dropped", func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.Capabilities.Drop = nil }, "not drop [ALL]"},
		{"AppArmor unconfined", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, "AppArmor unconfined"},
		{"pod AppArmor", func(p *corev1.PodSpec) {
			p.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		}, "pod AppArmor profile"},
		{"escalation", func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil }, "allowPrivilegeEscalation"},
		{"writable root fs", func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.ReadOnlyRootFilesystem = new(false) }, "root filesystem"},
		{"unconfined seccomp", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
		}, "seccomp"},
		{"hostPort", func(p *corev1.PodSpec) { p.Containers[0].Ports[0].HostPort = 9477 }, "hostPort"},
		{"token", func(p *corev1.PodSpec) { p.AutomountServiceAccountToken = nil }, "token"},
		{"root without host paths", func(p *corev1.PodSpec) {
			pause := pauseContainer(DefaultValues(), "v0")
			pause.SecurityContext.RunAsUser = new(int64(0))
			p.Containers = append(p.Containers, pause)
		}, "container pause: mounts no host path but may run as root"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			pod := *agentDaemonSet(DefaultValues(), "v0", agentGroups(DefaultValues())[0]).Spec.Template.Spec.DeepCopy()
			if errs := checkPod(pod, withPodCgroups(withHostSys(agentHostPaths(false)))); len(errs) != 0 {
				t.Fatalf("unmodified pod fails: %v", errs)
			}
			m.mutate(&pod)
			errs := checkPod(pod, withPodCgroups(withHostSys(agentHostPaths(false))))
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), m.want) {
				t.Errorf("checker missed %s: got %q, want an error containing %q", m.name, msgs, m.want)
			}
		})
	}
}

// volume and mount return the pod's volume and its first container's mount of that name.
func volume(p *corev1.PodSpec, name string) *corev1.Volume {
	for i := range p.Volumes {
		if p.Volumes[i].Name == name {
			return &p.Volumes[i]
		}
	}
	panic("no volume " + name)
}

func mount(p *corev1.PodSpec, name string) *corev1.VolumeMount {
	for i := range p.Containers[0].VolumeMounts {
		if p.Containers[0].VolumeMounts[i].Name == name {
			return &p.Containers[0].VolumeMounts[i]
		}
	}
	panic("no mount " + name)
}

// TestAgentCapabilityOnlyWithValue checks that the agent container adds CAP_SYS_PTRACE
// only with agent.blockedProcesses, and nothing else even then, that no other container
// ever adds it, and that the host's /sys comes and goes with agent.hostSys.
func TestAgentCapabilityOnlyWithValue(t *testing.T) {
	t.Parallel()
	for _, blocked := range []bool{false, true} {
		for _, hostSys := range []bool{false, true} {
			v := DefaultValues()
			v.Agent.HostSys = hostSys
			v.Agent.BlockedProcesses.Enabled = blocked
			err := v.Validate()
			if blocked && !hostSys {
				if err == nil || !strings.Contains(err.Error(), "agent.blockedProcesses: needs agent.hostSys") {
					t.Errorf("blockedProcesses without hostSys: %v, want refused", err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			want := withPodCgroups(agentHostPaths(false))
			if hostSys {
				want = withHostSys(want)
			}
			if blocked {
				want.capabilities = []corev1.Capability{"SYS_PTRACE"}
			}
			pod := agentDaemonSet(v, "v0", agentGroups(v)[0]).Spec.Template.Spec
			for _, err := range checkPod(pod, want) {
				t.Errorf("hostSys=%v blockedProcesses=%v: %v", hostSys, blocked, err)
			}
			// The same pod against a contract one capability short fails.
			if blocked {
				want.capabilities = nil
				if len(checkPod(pod, want)) == 0 {
					t.Errorf("blockedProcesses: pod passes a contract without SYS_PTRACE")
				}
			}
		}
	}
	v := DefaultValues()
	v.Mode = ModeInstaller
	v.Agent.BlockedProcesses.Enabled = true
	v.Agent.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
	objs, err := Render(v, "v0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		ds, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		p := ds.Spec.Template.Spec
		for _, c := range append(p.InitContainers, p.Containers...) {
			if len(c.SecurityContext.Capabilities.Add) != 0 || c.SecurityContext.AppArmorProfile != nil {
				t.Errorf("%s container %s: the agent's values reach it: %+v", ds.Name, c.Name, c.SecurityContext)
			}
		}
	}
}

// TestAppArmorProfileValues checks agent.appArmorProfile's validation: the three types
// Kubernetes knows, a profile name with Localhost and only there.
func TestAppArmorProfileValues(t *testing.T) {
	t.Parallel()
	name := "nfstune"
	tests := []struct {
		profile corev1.AppArmorProfile
		want    string // "" for valid
	}{
		{corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}, ""},
		{corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}, ""},
		{corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}, ""},
		{corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost}, "type Localhost needs localhostProfile"},
		{corev1.AppArmorProfile{Type: "Confined"}, `agent.appArmorProfile.type "Confined"`},
		{corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined, LocalhostProfile: &name}, "localhostProfile: only with type Localhost"},
	}
	for _, tt := range tests {
		v := DefaultValues()
		v.Agent.AppArmorProfile = &tt.profile
		err := v.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.profile, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: %v, want an error with %q", tt.profile, err, tt.want)
		case tt.want == "":
			sc := agentDaemonSet(v, "v0", agentGroups(v)[0]).Spec.Template.Spec.Containers[0].SecurityContext
			if sc.AppArmorProfile == nil || sc.AppArmorProfile.Type != tt.profile.Type {
				t.Errorf("%+v: container profile %+v", tt.profile, sc.AppArmorProfile)
			}
		}
	}
}
