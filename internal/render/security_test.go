package render

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/internal/inventory"
)

// hostPathRule is what a DaemonSet may mount from the host, and whether writably.
type hostPathRule struct {
	mountPath string
	writable  bool
}

// checkPod returns every way pod exceeds the agent's security contract: not privileged, no
// host namespaces, root without capabilities only in containers that mount a host path
// (any other runs as a non-root user), no privilege escalation, read-only root
// filesystem, RuntimeDefault seccomp, and host paths limited to allowed (by host path),
// mounted where allowed says and writable only where it says.
func checkPod(pod corev1.PodSpec, allowed map[string]hostPathRule) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		bad("host namespaces: network %v pid %v ipc %v", pod.HostNetwork, pod.HostPID, pod.HostIPC)
	}
	if pod.HostUsers != nil && !*pod.HostUsers {
		// In a user namespace, uid 0 cannot write the host's root-owned bdi attributes.
		bad("hostUsers: false")
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
	for _, c := range containers {
		sc := c.SecurityContext
		if sc == nil {
			bad("container %s: no security context", c.Name)
			continue
		}
		if sc.Privileged == nil || *sc.Privileged {
			bad("container %s: privileged is not false", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			bad("container %s: root filesystem is writable", c.Name)
		}
		mountsHost := false
		for _, m := range c.VolumeMounts {
			_, ok := hostVolumes[m.Name]
			mountsHost = mountsHost || ok
		}
		switch {
		case mountsHost && (sc.RunAsUser == nil || *sc.RunAsUser != 0):
			bad("container %s: runAsUser is not 0 (the bdi attributes are root-owned 0644)", c.Name)
		case !mountsHost && (sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot):
			bad("container %s: mounts no host path but may run as root", c.Name)
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Add) > 0 ||
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			bad("container %s: capabilities are not exactly drop [ALL]", c.Name)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			bad("container %s: seccomp profile is not RuntimeDefault", c.Name)
		}
		if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
			bad("container %s: procMount %s", c.Name, *sc.ProcMount)
		}
		if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined {
			bad("container %s: AppArmor unconfined", c.Name)
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				bad("container %s: hostPort %d", c.Name, p.HostPort)
			}
		}
		for _, m := range c.VolumeMounts {
			hp, ok := hostVolumes[m.Name]
			if !ok {
				continue
			}
			rule := allowed[hp]
			if m.MountPath != rule.mountPath {
				bad("container %s: host path %q mounted at %q, want %q", c.Name, hp, m.MountPath, rule.mountPath)
			}
			if !m.ReadOnly && !rule.writable {
				bad("container %s: host path %q is writable", c.Name, hp)
			}
			if m.SubPath != "" || m.SubPathExpr != "" {
				bad("container %s: subPath on host path %q", c.Name, hp)
			}
		}
	}
	return errs
}

// agentHostPaths are the agent's host paths: /proc read-only, the bdi directory writable
// only in enforce mode.
func agentHostPaths(enforce bool) map[string]hostPathRule {
	return map[string]hostPathRule{
		"/proc":                    {mountPath: "/host/proc"},
		"/sys/devices/virtual/bdi": {mountPath: "/host/sys/class/bdi", writable: enforce},
	}
}

// withProxyHelpers adds the NFS proxy helpers' directories, read-only at their own path
// below /host.
func withProxyHelpers(rules map[string]hostPathRule) map[string]hostPathRule {
	for _, d := range inventory.ProxyStateDirs() {
		rules[d] = hostPathRule{mountPath: HostRoot + d}
	}
	return rules
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
		allowed map[string]hostPathRule
	}{
		{"agent-default", "nfstune-agent", agentHostPaths(false)},
		{"agent-enforce-cas", "nfstune-agent", agentHostPaths(true)},
		{"agent-proxy-helpers", "nfstune-agent", withProxyHelpers(agentHostPaths(true))},
		{"installer", "nfstune-validate", agentHostPaths(false)},
		{"installer", "nfstune-installer", map[string]hostPathRule{
			"/var/lib/nfstune/bin": {mountPath: "/host/var/lib/nfstune/bin", writable: true},
			"/etc/nfstune":         {mountPath: "/host/etc/nfstune", writable: true},
			"/etc/udev/rules.d":    {mountPath: "/host/etc/udev/rules.d", writable: true},
			"/var/lib/nfstune":     {mountPath: "/host/var/lib/nfstune", writable: true},
		}},
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
		{"wider hostPath", func(p *corev1.PodSpec) { p.Volumes[1].HostPath.Path = "/sys" }, `host path "/sys" is not allowed`},
		{"whole host", func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, hostPathVolume("root", "/", corev1.HostPathDirectory))
		}, `host path "/" is not allowed`},
		{"writable proc", func(p *corev1.PodSpec) { p.Containers[0].VolumeMounts[0].ReadOnly = false }, `host path "/proc" is writable`},
		{"writable bdi in observe mode", func(p *corev1.PodSpec) { p.Containers[0].VolumeMounts[1].ReadOnly = false }, `"/sys/devices/virtual/bdi" is writable`},
		{"capability added", func(p *corev1.PodSpec) {
			p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "capabilities"},
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
			pod := *agentDaemonSet(DefaultValues(), "v0").Spec.Template.Spec.DeepCopy()
			if errs := checkPod(pod, agentHostPaths(false)); len(errs) != 0 {
				t.Fatalf("unmodified pod fails: %v", errs)
			}
			m.mutate(&pod)
			errs := checkPod(pod, agentHostPaths(false))
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
