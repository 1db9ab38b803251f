package render

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/internal/agent"
	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/inventory"
)

// fixtureHost lays out one of inventory's synthetic hosts as a node's filesystem: the bdi
// directories where the kernel has them (/sys/devices/virtual/bdi), /var/run a relative
// link to /run as on current distributions, and /proc/1 the host's namespaces, which the
// agent reads with --pid=1.
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
	return host
}

// podView builds what the agent container of ds sees on host: each hostPath volume,
// resolved on the host as a bind mount is, copied to its mount path. A missing directory
// of a volume without a type is created empty, as containerd and CRI-O do; of any other
// type it fails the test, as kubelet fails the pod. It returns the agent's --root and --pid.
func podView(t *testing.T, pod corev1.PodSpec, host string) (hostfs.Root, int) {
	t.Helper()
	ctr := t.TempDir()
	c := pod.Containers[0]
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
		src, err := filepath.EvalSymlinks(filepath.Join(host, hp.Path))
		switch {
		case errors.Is(err, fs.ErrNotExist) && (hp.Type == nil || *hp.Type == corev1.HostPathUnset):
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		case err != nil:
			t.Fatalf("volume %s: host path %s: %v", m.Name, hp.Path, err)
		case !strings.HasPrefix(src, host+string(filepath.Separator)):
			t.Fatalf("volume %s: host path %s resolves outside the host: %s", m.Name, hp.Path, src)
		}
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
	}
	var root string
	pid := 0
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--root="); ok {
			root = v
		}
		if v, ok := strings.CutPrefix(a, "--pid="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("agent flag %s: %v", a, err)
			}
			pid = n
		}
	}
	if root == "" {
		t.Fatalf("agent has no --root: %q", c.Args)
	}
	return hostfs.Root(filepath.Join(ctr, root)), pid
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
				root, pid := podView(t, agentDaemonSet(v, "v0").Spec.Template.Spec, host)

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
					// The pod does not mount /sys/kernel/sunrpc, of which inventory.Read warns;
					// nothing may warn of the helpers' state.
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
