//go:build lab

package k8slab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nfstune/nfstune/lab/labtest"
)

// What lab/k8s-e2e.sh passes to the guest.
const (
	// envBin names the directory with kubelet, kube-apiserver, kube-controller-manager,
	// kube-scheduler, etcd, helm, registry, nfstune and the lab's image tarballs (*.tar).
	envBin = "NFSTUNE_K8S_BIN"
	// envSummary is where summary.json goes (envRelease and envVersion: registry_test.go).
	envSummary = "NFSTUNE_K8S_SUMMARY"
	// envPods is how many pods TestSequentialPods starts (sequential).
	envPods = "NFSTUNE_K8S_PODS"
)

// The node's fixed names and addresses.
const (
	nodeName  = "lab-node"
	nodeIP    = "10.0.0.2" // on a dummy interface with the default route: kubelet needs one
	podSubnet = "10.88.0.0/16"
	apiPort   = "6443"
	stateDir  = "/run/k8slab" // certificates, configurations, component logs
)

// nodeDirs get a tmpfs each: the guest's root is a read-only 9p share (lab-setup creates
// the directories in the k8s root), and overlayfs, containerd's snapshotter, does not work
// on 9p.
var nodeDirs = []string{
	"/var/lib/containerd", "/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/var/log/containers",
	"/etc/cni/net.d", "/opt/nfstune", "/etc/nfstune", "/var/lib/nfstune",
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "k8slab %s %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// stepError is a step of the cluster's start that did not finish: which step, how long it
// waited, and the last lines of the component it waited for.
type stepError struct {
	step, component string
	waited          time.Duration
	err             error
	tail            string
}

func (e *stepError) Error() string {
	s := fmt.Sprintf("step %q failed after %s: %v", e.step, e.waited.Round(100*time.Millisecond), e.err)
	if e.component != "" {
		s += fmt.Sprintf("\nlast lines of %s (%s):\n%s", e.component, logPath(e.component), e.tail)
	}
	return s
}

func logPath(component string) string { return filepath.Join(stateDir, "logs", component+".log") }

// tail returns the last n lines of a component's log.
func tail(component string, n int) string { return labtest.TailFile(logPath(component), n) }

// process is a started component; exited is closed when it ends.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

type node struct {
	bin   string // binaries on the guest's tmpfs
	mu    sync.Mutex
	procs []*process
}

// run runs a short command and returns its combined output, with a time limit.
func run(limit time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// start starts a component with its output in its log file.
func (n *node) start(name, path string, args ...string) (*process, error) {
	f, err := os.Create(logPath(name))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = componentEnv()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	logf("started %s (pid %d)", name, cmd.Process.Pid)
	return p, nil
}

// componentEnv is the guest's environment without the session's XDG_RUNTIME_DIR
// (/run/user/0, which does not exist here): containerd writes its AppArmor profile to a
// temporary file there when it is set, and a node's service manager does not set it.
func componentEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "XDG_RUNTIME_DIR=") {
			env = append(env, e)
		}
	}
	return env
}

// stop ends the components in the reverse order of their start.
func (n *node) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		_ = p.cmd.Process.Signal(os.Interrupt) // one that already exited has closed p.exited
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	n.procs = nil
}

// waitStep polls ready until it returns nil, the component exits, or limit passes.
func waitStep(step string, p *process, limit time.Duration, ready func() error) error {
	start := time.Now()
	logf("step %s: waiting up to %s", step, limit)
	fail := func(err error) error {
		se := &stepError{step: step, waited: time.Since(start), err: err}
		if p != nil {
			se.component, se.tail = p.name, tail(p.name, 40)
		}
		return se
	}
	for {
		err := ready()
		if err == nil {
			logf("step %s: ready after %s", step, time.Since(start).Round(10*time.Millisecond))
			return nil
		}
		if p != nil {
			select {
			case <-p.exited:
				return fail(fmt.Errorf("%s exited (%v) before it was ready; last check: %w", p.name, p.err, err))
			default:
			}
		}
		if time.Since(start) > limit {
			return fail(fmt.Errorf("not ready after %s: %w", limit, err))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// prepare readies the guest to be a node: AppArmor's securityfs, cgroup v2 with its
// controllers delegated to the root's children, a tmpfs for each state directory, the
// kernel modules containerd and the bridge CNI plugin need, and a routable node address.
func (n *node) prepare() error {
	if err := os.MkdirAll(filepath.Join(stateDir, "logs"), 0o755); err != nil {
		return err
	}
	if !mounted("/sys/kernel/security") {
		if _, err := run(10*time.Second, "mount", "-t", "securityfs", "securityfs", "/sys/kernel/security"); err != nil {
			return err
		}
	}
	if !fileExists("/sys/fs/cgroup/cgroup.controllers") {
		if _, err := run(10*time.Second, "mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup"); err != nil {
			return err
		}
	}
	ctrl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err != nil {
		return err
	}
	for _, c := range strings.Fields(string(ctrl)) {
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+"+c), 0o644); err != nil {
			return fmt.Errorf("enabling the %s controller: %w", c, err)
		}
	}
	for _, d := range nodeDirs {
		if mounted(d) {
			continue
		}
		// Under a tmpfs of the guest's (/var/log) the directory is made here.
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if _, err := run(10*time.Second, "mount", "-t", "tmpfs", "-o", "mode=755", "k8slab", d); err != nil {
			return fmt.Errorf("%w (lab-setup creates %s in the k8s root)", err, d)
		}
	}
	// Volumes kubelet mounts under its root must propagate to the containers that ask.
	if _, err := run(10*time.Second, "mount", "--make-rshared", "/var/lib/kubelet"); err != nil {
		return err
	}
	for _, m := range []string{"overlay", "bridge", "veth", "dummy"} {
		if _, err := run(30*time.Second, "modprobe", m); err != nil {
			return err
		}
	}
	for _, c := range [][]string{
		{"link", "add", "k8s0", "type", "dummy"},
		{"addr", "add", nodeIP + "/24", "dev", "k8s0"},
		{"link", "set", "k8s0", "up"},
		{"route", "add", "default", "via", "10.0.0.1", "dev", "k8s0"},
	} {
		if _, err := run(10*time.Second, "ip", c...); err != nil {
			return err
		}
	}
	return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// mounted reports whether dir is a mount point in this mount namespace.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "nfstune.test/pause:lab"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + registryHosts + `"
`

// The bridge plugin with host-local addresses: pod IPs are reachable from the node through
// cni0, which is all the tests need (no kube-proxy, no masquerading).
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "lab",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + podSubnet + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}
    }
  ]
}
`

const containerdSock = "/run/containerd/containerd.sock"

func ctr(limit time.Duration, args ...string) (string, error) {
	return run(limit, "ctr", append([]string{"--address", containerdSock, "--namespace", "k8s.io"}, args...)...)
}

// startContainerd starts containerd with the CRI plugin and imports the lab's image
// tarballs (the agent's image comes from the registry).
func (n *node) startContainerd() error {
	cfg := filepath.Join(stateDir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig), 0o644); err != nil {
		return err
	}
	if err := writeRegistryHosts(); err != nil {
		return err
	}
	if err := os.WriteFile("/etc/cni/net.d/10-lab.conflist", []byte(cniConfig), 0o644); err != nil {
		return err
	}
	p, err := n.start("containerd", "containerd", "--config", cfg)
	if err != nil {
		return err
	}
	if err := waitStep("containerd", p, 2*time.Minute, func() error {
		_, err := ctr(20*time.Second, "version")
		return err
	}); err != nil {
		return err
	}
	tars, _ := filepath.Glob(filepath.Join(n.bin, "*.tar"))
	if len(tars) == 0 {
		return &stepError{step: "images", err: fmt.Errorf("no image tarballs in %s", n.bin)}
	}
	for _, tar := range tars {
		start := time.Now()
		if _, err := ctr(5*time.Minute, "images", "import", tar); err != nil {
			return &stepError{step: "images", component: "containerd", waited: time.Since(start), err: err, tail: tail("containerd", 20)}
		}
		logf("imported %s in %s", filepath.Base(tar), time.Since(start).Round(10*time.Millisecond))
	}
	return nil
}

// copyBinaries copies the binaries from the 9p share to the guest's memory: executed from
// 9p under emulation, every page fault is a round trip to the host.
func copyBinaries(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		out, err := os.OpenFile(filepath.Join(dst, e.Name()), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// version runs `bin --version` and returns its first line.
func version(bin string, args ...string) string {
	out, err := run(time.Minute, bin, append(args, "--version")...)
	if err != nil {
		return "unknown: " + err.Error()
	}
	return strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
}

// clip shortens a log or response for an error message.
func clip(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 600 {
		b = append(b[:600:600], "..."...)
	}
	return string(b)
}
