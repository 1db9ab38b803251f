package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
	"github.com/nfstune/nfstune/internal/podcgroup"
)

// fixtureHost lays out one of inventory's fixture hosts as a node's filesystem: the bdi
// directories where the kernel has them (/sys/devices/virtual/bdi), each
// /sys/class/bdi/<dev> a relative link to its directory as sysfs makes it, /var/run a
// relative link to /run as on current distributions, and /proc/1 the host's namespaces,
// which the agent reads with --pid=1.
func fixtureHost(t *testing.T, fixture string) string {
	t.Helper()
	host := t.TempDir()
	if err := os.CopyFS(host, os.DirFS(filepath.Join("..", "inventory", "testdata", fixture))); err != nil {
		t.Fatal(err)
	}
	mustRename := func(from, to string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, to)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(host, from), filepath.Join(host, to)); err != nil {
			t.Fatal(err)
		}
	}
	mustRename("sys/class/bdi", "sys/devices/virtual/bdi")
	bdis, err := os.ReadDir(filepath.Join(host, "sys", "devices", "virtual", "bdi"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(host, "sys", "class", "bdi"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range bdis {
		if err := os.Symlink("../../devices/virtual/bdi/"+d.Name(), filepath.Join(host, "sys", "class", "bdi", d.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(host, "var", "run")); err == nil {
		mustRename("var/run", "run")
	}
	if err := os.MkdirAll(filepath.Join(host, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../run", filepath.Join(host, "var", "run")); err != nil {
		t.Fatal(err)
	}
	mustRename("proc/self", "proc/1")
	mustRename("proc/fs/nfsfs", "proc/1/net/nfsfs")
	// A pod's cgroup (cgroupfs driver, BestEffort), as a cgroup v2 node has it.
	podDir := filepath.Join(host, "sys", "fs", "cgroup", "kubepods", "besteffort", "pod"+fixturePod)
	if err := os.MkdirAll(podDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"memory.stat":   "file 4096\nfile_mapped 0\npgmajfault 7\nworkingset_refault_file 3\n",
		"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"memory.max":    "max\n",
	} {
		if err := os.WriteFile(filepath.Join(podDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

// fixturePod is the pod whose cgroup fixtureHost lays out.
const fixturePod = "8f3d2c1a-5b6e-4f70-9a81-2b3c4d5e6f70"

// TestAgentPodReadsPodCgroups: with agent.podCgroups the rendered agent pod reads a pod's
// memory counters from the host's cgroup hierarchy, read-only; without it, none.
func TestAgentPodReadsPodCgroups(t *testing.T) {
	t.Parallel()
	host := fixtureHost(t, "lab-6.1.0-50-amd64")
	for _, on := range []bool{true, false} {
		v := DefaultValues()
		v.Agent.PodCgroups = on
		spec := agentDaemonSet(v, "v0", agentGroups(v)[0]).Spec.Template.Spec
		view := newPodView(t, spec, host)
		c, err := podcgroup.Read(view.root, fixturePod)
		switch {
		case on && (err != nil || c.PgMajFault != 7):
			t.Errorf("podCgroups on: %+v, %v; want the pod's pgmajfault 7", c, err)
		case !on && !errors.Is(err, podcgroup.ErrNoPodCgroup):
			t.Errorf("podCgroups off: %+v, %v; want no pod cgroup", c, err)
		}
		for _, m := range spec.Containers[0].VolumeMounts {
			if m.MountPath == HostRoot+HostCgroup && !m.ReadOnly {
				t.Errorf("the cgroup hierarchy is mounted writable")
			}
		}
	}
}

// podView is what the agent container sees: its --root and --pid, and its host mounts.
type podView struct {
	root   hostfs.Root
	pid    int
	mounts []viewMount
}

// viewMount is a hostPath volume as the container sees it: its path in the test's
// filesystem, and whether it is mounted read-only.
type viewMount struct {
	name     string
	path     string
	readOnly bool
}

// mountOf returns the mount that holds path (a path with no link left in it): the last
// one mounted at or above it, as a later mount shadows an earlier one.
func (v podView) mountOf(path string) (viewMount, bool) {
	for i := len(v.mounts) - 1; i >= 0; i-- {
		m := v.mounts[i]
		if path == m.path || strings.HasPrefix(path, m.path+string(filepath.Separator)) {
			return m, true
		}
	}
	return viewMount{}, false
}

// newPodView builds what the agent container of pod sees on host: each hostPath volume,
// resolved on the host as a bind mount is, copied to its mount path, in the order the
// mounts are listed; a mount hides what an earlier one put at its path, and a mount may
// not come after one below it, which it would hide. A missing directory of a volume
// without a type is created empty, as containerd and CRI-O do; of any other type it fails
// the test, as kubelet fails the pod.
func newPodView(t *testing.T, pod corev1.PodSpec, host string) podView {
	t.Helper()
	ctr := t.TempDir()
	c := pod.Containers[0]
	var view podView
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			t.Fatalf("mount %s: no volume", m.Name)
		}
		hp := pod.Volumes[i].HostPath
		if hp == nil {
			continue
		}
		dst := filepath.Join(ctr, m.MountPath)
		for _, earlier := range view.mounts {
			if strings.HasPrefix(earlier.path, dst+string(filepath.Separator)) {
				t.Fatalf("mount %s at %s comes after %s below it, which it hides: list parents first", m.Name, m.MountPath, earlier.name)
			}
		}
		view.mounts = append(view.mounts, viewMount{name: m.Name, path: dst, readOnly: m.ReadOnly})
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
		if hp.Type != nil && *hp.Type == corev1.HostPathDirectoryOrCreate {
			// The kubelet creates it on the node, as for the state directory.
			if err := os.MkdirAll(filepath.Join(host, hp.Path), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		src, err := filepath.EvalSymlinks(filepath.Join(host, hp.Path))
		switch {
		case errors.Is(err, fs.ErrNotExist) && (hp.Type == nil || *hp.Type == corev1.HostPathUnset):
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		case err != nil:
			t.Fatalf("volume %s: host path %s: %v", m.Name, hp.Path, err)
		case src != host && !strings.HasPrefix(src, host+string(filepath.Separator)):
			t.Fatalf("volume %s: host path %s resolves outside the host: %s", m.Name, hp.Path, src)
		}
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
	}
	var root string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--root="); ok {
			root = v
		}
		if v, ok := strings.CutPrefix(a, "--pid="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("agent flag %s: %v", a, err)
			}
			view.pid = n
		}
	}
	if root == "" {
		t.Fatalf("agent has no --root: %q", c.Args)
	}
	view.root = hostfs.Root(filepath.Join(ctr, root))
	return view
}

// TestAgentPodAttributesProxiedMounts checks that the directories the chart mounts are the
// ones the agent reads: a node with efs-utils' or AZNFS' state, seen through the rendered
// agent pod, has its proxied mounts attributed to their service, with efs-utils'
// configuration read too; without agent.proxyHelpers the same mounts are bare loopback
// proxies.
func TestAgentPodAttributesProxiedMounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture string
		// edit changes the host before the pod starts.
		edit    func(t *testing.T, host string)
		backend map[string]string // device -> backend
		kind    map[string]string // device -> proxy kind
	}{
		{
			fixture: "synthetic-efs-proxy",
			// optimize_readahead off: efs-utils writes no read-ahead, which the agent learns
			// only from /etc/amazon/efs (without the file it takes the shipped value, on).
			edit: func(t *testing.T, host string) {
				p := filepath.Join(host, "etc", "amazon", "efs", "efs-utils.conf")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				off := strings.Replace(string(b), "optimize_readahead = true", "optimize_readahead = false", 1)
				if off == string(b) {
					t.Fatal("efs-utils.conf has no optimize_readahead = true")
				}
				if err := os.WriteFile(p, []byte(off), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			backend: map[string]string{"0:60": "aws-efs", "0:61": "aws-efs", "0:62": "generic"},
			kind:    map[string]string{"0:60": inventory.ProxyEFS, "0:61": inventory.ProxyEFSStunnel, "0:62": inventory.ProxyLoopback},
		},
		{
			fixture: "synthetic-aznfs-stunnel",
			backend: map[string]string{"0:70": "azure-files", "0:71": "azure-files", "0:72": "azure-files"},
			kind:    map[string]string{"0:70": inventory.ProxyAZNFS, "0:71": inventory.ProxyAZNFS, "0:72": inventory.ProxyAZNFS},
		},
	}
	for _, tt := range tests {
		for _, enabled := range []bool{true, false} {
			t.Run(tt.fixture+"/enabled="+strconv.FormatBool(enabled), func(t *testing.T) {
				t.Parallel()
				host := fixtureHost(t, tt.fixture)
				if tt.edit != nil {
					tt.edit(t, host)
				}
				v := DefaultValues()
				v.Agent.ProxyHelpers.Enabled = enabled
				view := newPodView(t, agentDaemonSet(v, "v0", agentGroups(v)[0]).Spec.Template.Spec, host)
				root, pid := view.root, view.pid

				inv, err := inventory.Read(root, inventory.ReadOptions{PID: pid})
				if err != nil {
					t.Fatal(err)
				}
				table, err := agent.ReadMountTable(root, pid)
				if err != nil {
					t.Fatal(err)
				}
				for _, read := range []struct {
					name   string
					mounts []inventory.Mount
					warn   []string
				}{{"inventory.Read", inv.Mounts, inv.Warnings}, {"agent.ReadMountTable", table.Mounts, table.Warnings}} {
					// Nothing may warn of the helpers' state.
					for _, w := range read.warn {
						if strings.Contains(w, "efs-utils") || strings.Contains(w, "AZNFS") {
							t.Errorf("%s: warning %q", read.name, w)
						}
					}
					if len(read.mounts) != len(tt.kind) {
						t.Fatalf("%s: %d mounts, want %d", read.name, len(read.mounts), len(tt.kind))
					}
					for _, m := range read.mounts {
						backend, kind := tt.backend[m.Device], tt.kind[m.Device]
						if !enabled {
							backend, kind = "generic", inventory.ProxyLoopback
						}
						if m.Backend != backend || m.Proxy == nil || m.Proxy.Kind != kind {
							t.Errorf("%s: %s: backend %q proxy %+v, want %q through %s", read.name, m.Device, m.Backend, m.Proxy, backend, kind)
							continue
						}
						// No helper writes read-ahead here: efs-utils' is off, AZNFS' is not read.
						if m.Proxy.ReadAheadKB != 0 {
							t.Errorf("%s: %s: helper read-ahead %d KiB, want 0", read.name, m.Device, m.Proxy.ReadAheadKB)
						}
					}
				}
			})
		}
	}
}

// TestProxyHelperDirsAreRead keeps the chart's default directories among those the agent
// reads, and every directory the agent reads allowed in the values and the chart's schema.
func TestProxyHelperDirsAreRead(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "nfstune", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Agent struct {
				Properties struct {
					ProxyHelpers struct {
						Properties struct {
							Directories struct {
								Items struct {
									Enum []string `json:"enum"`
								} `json:"items"`
							} `json:"directories"`
						} `json:"properties"`
					} `json:"proxyHelpers"`
				} `json:"properties"`
			} `json:"agent"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	enum := schema.Properties.Agent.Properties.ProxyHelpers.Properties.Directories.Items.Enum
	if !slices.Equal(enum, inventory.ProxyStateDirs()) {
		t.Errorf("values.schema.json agent.proxyHelpers.directories: %q, want the directories the agent reads %q", enum, inventory.ProxyStateDirs())
	}
	for _, d := range DefaultValues().Agent.ProxyHelpers.Directories {
		if !slices.Contains(inventory.ProxyStateDirs(), d) {
			t.Errorf("default directory %s: the agent does not read it (%q)", d, inventory.ProxyStateDirs())
		}
	}
	for _, d := range inventory.ProxyStateDirs() {
		v := DefaultValues()
		v.Agent.ProxyHelpers.Directories = []string{d}
		if err := v.Validate(); err != nil {
			t.Errorf("directory %s: %v", d, err)
		}
	}
}

// TestAgentPodReadsHostTransports checks what agent.hostSys gives the agent: on a node
// recorded from the lab with a server gone (Linux 6.1), the rendered agent pod reads the
// host's sunrpc transports, every one of them, as the host does; without the value it reads
// none and warns. Either way, and in both policy modes, read-ahead resolves into the bdi
// mount, writable only in enforce mode, and SetReadAhead's write lands there.
func TestAgentPodReadsHostTransports(t *testing.T) {
	t.Parallel()
	host := fixtureHost(t, "lab-6.1.0-50-amd64-server-gone")
	onHost, err := inventory.Read(hostfs.Root(host), inventory.ReadOptions{PID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(onHost.Transports) == 0 || len(onHost.Mounts) == 0 {
		t.Fatalf("fixture host: %d transports, %d mounts; want some of each", len(onHost.Transports), len(onHost.Mounts))
	}
	for _, hostSys := range []bool{true, false} {
		for _, mode := range []string{PolicyEnforce, PolicyObserve} {
			t.Run(fmt.Sprintf("hostSys=%v/%s", hostSys, mode), func(t *testing.T) {
				t.Parallel()
				v := DefaultValues()
				v.Agent.HostSys = hostSys
				v.Agent.PolicyMode = mode
				view := newPodView(t, agentDaemonSet(v, "v0", agentGroups(v)[0]).Spec.Template.Spec, host)
				inv, err := inventory.Read(view.root, inventory.ReadOptions{PID: view.pid})
				if err != nil {
					t.Fatal(err)
				}
				noSunrpc := slices.ContainsFunc(inv.Warnings, func(w string) bool { return strings.Contains(w, "no /sys/kernel/sunrpc") })
				if hostSys {
					if diff := cmp.Diff(onHost.Transports, inv.Transports); diff != "" {
						t.Errorf("transports in the pod differ from the host's (-host +pod):\n%s", diff)
					}
					if noSunrpc {
						t.Errorf("warnings %q: the pod does not see /sys/kernel/sunrpc", inv.Warnings)
					}
				} else if len(inv.Transports) != 0 || !noSunrpc {
					t.Errorf("without hostSys: %d transports, warnings %q; want none and the warning", len(inv.Transports), inv.Warnings)
				}

				dev := inv.Mounts[0].Device
				bdi := view.root.Sys("class", "bdi", dev, "read_ahead_kb")
				resolved, err := filepath.EvalSymlinks(bdi)
				if err != nil {
					t.Fatal(err)
				}
				m, ok := view.mountOf(resolved)
				if !ok || m.name != "host-bdi" {
					t.Fatalf("%s resolves to %s, in mount %q; want the bdi mount", bdi, resolved, m.name)
				}
				if m.readOnly != (mode == PolicyObserve) {
					t.Errorf("bdi mount read-only %v in %s mode", m.readOnly, mode)
				}
				if mode == PolicyObserve {
					return
				}
				if _, err := hostfs.SetReadAhead(view.root, dev, 4096); err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(resolved); err != nil || strings.TrimSpace(string(b)) != "4096" {
					t.Errorf("bdi mount's %s: %q, %v; want 4096", dev, b, err)
				}
			})
		}
	}
}
