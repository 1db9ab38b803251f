package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/internal/render"
)

// runCLI runs one nfstune command line with buffers for streams.
func runK8sCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestK8sRenderFlags(t *testing.T) {
	t.Parallel()
	digest := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name     string
		stdin    string
		args     []string
		want     []string // substrings of stdout
		wantCode int      // ExitError code, 0 for success
		wantErr  string   // a substring of the error
	}{
		{
			name: "digest pins the image",
			args: []string{"k8s", "render", "--image", "reg.example:5000/nfstune:v9", "--image-digest", digest},
			want: []string{"image: reg.example:5000/nfstune@" + digest},
		},
		{
			name: "tag from --image",
			args: []string{"k8s", "render", "--image", "reg.example:5000/team/nfstune:v9", "--namespace", "tuning"},
			want: []string{"image: reg.example:5000/team/nfstune:v9", "namespace: tuning"},
		},
		{
			name:  "values from stdin, flags override",
			stdin: "mode: installer\nnamespace: from-file\nimage:\n  tag: v9\n",
			args:  []string{"k8s", "render", "--config", "-", "--namespace", "from-flag", "-o", "json"},
			want:  []string{`"kind": "List"`, `"name": "nfstune-installer"`, `"namespace": "from-flag"`},
		},
		{
			name: "proxy helpers' state",
			args: []string{"k8s", "render", "--image", "r/n:v9", "--proxy-helpers"},
			want: []string{"mountPath: /host/var/run/efs", "mountPath: /host/etc/amazon/efs",
				"path: /etc/stunnel/microsoft/aznfs/nfsv4_fileShare"},
		},
		{
			name:  "proxy helpers' directories from the values",
			stdin: "agent:\n  proxyHelpers:\n    directories: [/run/efs]\n",
			args:  []string{"k8s", "render", "--config", "-", "--image", "r/n:v9", "--proxy-helpers"},
			want:  []string{"mountPath: /host/run/efs\n          name: proxy-state-0\n          readOnly: true"},
		},
		{
			name:     "proxy helpers' directory the agent does not read",
			stdin:    "agent:\n  proxyHelpers:\n    directories: [/etc]\n",
			args:     []string{"k8s", "render", "--config", "-", "--image", "r/n:v9", "--proxy-helpers"},
			wantCode: ExitError2,
		},
		// Tests run an untagged build, version "dev": no image is released for it.
		{name: "untagged build without an image", args: []string{"k8s", "render"}, wantCode: ExitError2},
		{name: "system namespace", args: []string{"k8s", "render", "--image", "r/n:v9", "--namespace", "kube-system"}, wantCode: ExitError2},
		{name: "bad digest", args: []string{"k8s", "render", "--image-digest", "sha256:xyz"}, wantCode: ExitError2},
		{name: "bad mode", args: []string{"k8s", "render", "--mode", "operator"}, wantCode: ExitError2},
		{name: "bad output", args: []string{"k8s", "render", "-o", "table"}, wantCode: ExitError2},
		{name: "unknown key", stdin: "privileged: true\n", args: []string{"k8s", "render", "--config", "-"}, wantCode: ExitError2},
		// encoding/json would take it for agent.policyMode: an agent without --observe, its
		// bdi directory writable.
		{name: "mis-cased key", stdin: "agent:\n  policymode: enforce\n", args: []string{"k8s", "render", "--config", "-", "--image", "r/n:v9"},
			wantCode: ExitError2, wantErr: `stdin:2: agent.policymode: unknown key (did you mean "policyMode"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := runK8sCLI(t, tt.stdin, tt.args...)
			if tt.wantCode != 0 {
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != tt.wantCode || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want exit code %d and %q", err, tt.wantCode, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestK8sPauseReturnsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pause(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestK8sVolume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantOut    []string
		wantErrOut []string
		wantCode   int
	}{
		{
			name: "azure files static from the built-in profile",
			args: []string{"k8s", "volume", "--backend", "azure-files", "--workload", "sequential-read", "--driver", "azurefile-csi",
				"--static", "--server", "acct.file.core.windows.net", "--export", "/acct/saswork", "--size", "1Ti"},
			wantOut:    []string{"kind: PersistentVolume", "kind: PersistentVolumeClaim", "driver: file.csi.azure.com", "protocol: nfs", "- nconnect=4"},
			wantErrOut: []string{`warning: azurefile-csi: dropped "vers=4.1"`, "warning: read_ahead_kb="},
		},
		{
			name:       "blob nfs storage class",
			args:       []string{"k8s", "volume", "--backend", "azure-blob-nfs", "--driver", "blob-csi", "--dynamic", "-o", "json"},
			wantOut:    []string{`"kind": "StorageClass"`, `"provisioner": "blob.csi.azure.com"`},
			wantErrOut: []string{"warning: blob-csi: dropped"},
		},
		{
			name:       "driver and backend disagree",
			args:       []string{"k8s", "volume", "--backend", "generic", "--driver", "azurefile-csi", "--dynamic"},
			wantOut:    []string{"provisioner: file.csi.azure.com"},
			wantErrOut: []string{"azurefile-csi serves the azure-files backend, not generic", "read_ahead_kb=15360 is not a mount option"},
		},
		{name: "static and dynamic", args: []string{"k8s", "volume", "--backend", "generic", "--driver", "nfs-csi", "--static", "--dynamic"}, wantCode: ExitError2},
		{
			name:    "defaults: azure files storage class",
			args:    []string{"k8s", "volume", "--backend", "azure-files"},
			wantOut: []string{"kind: StorageClass", "provisioner: file.csi.azure.com", "protocol: nfs"},
		},
		{
			name:    "defaults: blob nfs storage class",
			args:    []string{"k8s", "volume", "--backend", "azure-blob-nfs"},
			wantOut: []string{"kind: StorageClass", "provisioner: blob.csi.azure.com"},
		},
		{
			name:    "defaults: generic storage class",
			args:    []string{"k8s", "volume", "--backend", "generic", "--server", "nfs.example.com", "--export", "/tools"},
			wantOut: []string{"kind: StorageClass", "provisioner: nfs.csi.k8s.io", "server: nfs.example.com"},
		},
		{
			name:    "default driver, static",
			args:    []string{"k8s", "volume", "--backend", "azure-files", "--static", "--server", "acct.file.core.windows.net", "--export", "/acct/share"},
			wantOut: []string{"kind: PersistentVolume", "driver: file.csi.azure.com"},
		},
		{name: "no backend", args: []string{"k8s", "volume", "--driver", "nfs-csi"}, wantCode: ExitError2},
		{name: "unknown backend", args: []string{"k8s", "volume", "--backend", "nas", "--driver", "nfs-csi", "--dynamic"}, wantCode: ExitError2},
		{name: "in-tree dynamic", args: []string{"k8s", "volume", "--backend", "generic", "--driver", "in-tree", "--dynamic"}, wantCode: ExitError2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, err := runK8sCLI(t, "", tt.args...)
			if tt.wantCode != 0 {
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != tt.wantCode {
					t.Fatalf("err = %v, want exit code %d", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.wantErrOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

var splitImageTests = []struct{ in, repo, tag string }{
	{"ghcr.io/nfstune/nfstune", "ghcr.io/nfstune/nfstune", ""},
	{"ghcr.io/nfstune/nfstune:v1", "ghcr.io/nfstune/nfstune", "v1"},
	{"localhost:5000/nfstune", "localhost:5000/nfstune", ""},
	{"localhost:5000/nfstune:edge", "localhost:5000/nfstune", "edge"},
	{"nfstune:v2", "nfstune", "v2"},
}

func TestSplitImage(t *testing.T) {
	t.Parallel()
	for _, tt := range splitImageTests {
		repo, tag := splitImage(tt.in)
		if repo != tt.repo || tag != tt.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tt.in, repo, tag, tt.repo, tt.tag)
		}
	}
}

func FuzzSplitImage(f *testing.F) {
	for _, tt := range splitImageTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		repo, tag := splitImage(ref)
		// Splitting never loses or invents characters.
		if repo+":"+tag != ref && (tag != "" || repo != ref) {
			t.Fatalf("splitImage(%q) = %q, %q", ref, repo, tag)
		}
		if strings.Contains(tag, "/") {
			t.Fatalf("splitImage(%q): tag %q holds a path", ref, tag)
		}
	})
}

// TestK8sManifestArgsParse checks that every container the manifests run calls an nfstune
// command with flags it has, so that a renamed flag fails here rather than in a crash loop.
func TestK8sManifestArgsParse(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{render.ModeAgent, render.ModeInstaller} {
		for _, policyMode := range []string{render.PolicyObserve, render.PolicyEnforce} {
			v := render.DefaultValues()
			v.Mode, v.Agent.PolicyMode = mode, policyMode
			objs, err := render.Render(v, "v0.0.0-test")
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				ds, ok := o.(*appsv1.DaemonSet)
				if !ok {
					continue
				}
				spec := ds.Spec.Template.Spec
				for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
					root := NewRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
					cmd, rest, err := root.Find(c.Args)
					if err != nil || cmd == root {
						t.Errorf("%s/%s: %v is not an nfstune command: %v", ds.Name, c.Name, c.Args, err)
						continue
					}
					if err := cmd.ParseFlags(rest); err != nil {
						t.Errorf("%s/%s: %v: %v", ds.Name, c.Name, c.Args, err)
						continue
					}
					if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
						t.Errorf("%s/%s: %v: %v", ds.Name, c.Name, c.Args, err)
					}
				}
			}
		}
	}
}
