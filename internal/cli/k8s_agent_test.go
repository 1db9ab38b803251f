package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/internal/hostfs"
	"github.com/nfstune/nfstune/internal/render"
	"github.com/nfstune/nfstune/internal/status"
)

// syncBuffer is a bytes.Buffer the agent's goroutines and the test can share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func freeK8sAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// agentPod renders the agent DaemonSet and its policy for a policy mode.
func agentPod(t *testing.T, mode string) (corev1.Container, string) {
	t.Helper()
	v := render.DefaultValues()
	v.Agent.PolicyMode = mode
	// generic/general has no read-ahead opinion; sequential-read caps adaptive read-ahead at 15360 KiB.
	v.Policy = render.DefaultPolicy + "defaults:\n  workload: sequential-read\n"
	objs, err := render.Render(v, "v0.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	var c corev1.Container
	var pol string
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			c = o.Spec.Template.Spec.Containers[0]
		case *corev1.ConfigMap:
			pol = o.Data[render.PolicyFile]
		}
	}
	return c, pol
}

// TestK8sAgentStartsOnDaemonSetLayout runs `nfstune agent` in-process with the rendered
// DaemonSet's arguments, --root pointing at a host tree laid out as the DaemonSet's
// volumes mount it, checks /healthz, /readyz and /metrics, and that the bdi attribute is
// written in enforce mode and left alone in observe mode.
func TestK8sAgentStartsOnDaemonSetLayout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode   string
		wantRA string // 0:52's read_ahead_kb after the first reconcile
	}{
		{render.PolicyObserve, "128"},
		{render.PolicyEnforce, "1024"}, // adaptive read-ahead's floor, one rsize: the controller goes on from it
	} {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			c, pol := agentPod(t, tt.mode)
			host := t.TempDir()
			// A copy, so that the agent can write to it.
			if err := os.CopyFS(host, os.DirFS(filepath.Join("testdata", "k8s-host"))); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(host, "README.md"))
			// The state directory (journal, learned values), which the kubelet creates on the
			// node (DirectoryOrCreate) when the agent may write.
			if err := os.MkdirAll(filepath.Join(host, "var", "lib", "nfstune"), 0o700); err != nil {
				t.Fatal(err)
			}

			// The fixture holds nothing the DaemonSet does not mount under /host.
			var mounted []string
			for _, m := range c.VolumeMounts {
				if rel, ok := strings.CutPrefix(m.MountPath, render.HostRoot+"/"); ok {
					mounted = append(mounted, rel)
					if _, err := os.Stat(filepath.Join(host, rel)); err != nil {
						t.Fatalf("mount %s has no fixture: %v", m.MountPath, err)
					}
				}
			}
			err := filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(host, p)
				if err != nil || d.IsDir() {
					return err
				}
				for _, m := range mounted {
					if strings.HasPrefix(rel, m+"/") {
						return nil
					}
				}
				t.Errorf("fixture file %s is outside the DaemonSet's host mounts %v", rel, mounted)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}

			polFile := filepath.Join(t.TempDir(), render.PolicyFile)
			if err := os.WriteFile(polFile, []byte(pol), 0o644); err != nil {
				t.Fatal(err)
			}
			addr := freeK8sAddr(t)
			var args []string
			for _, a := range c.Args {
				switch {
				case a == "--root="+render.HostRoot:
					a = "--root=" + host
				case strings.HasPrefix(a, "--config="):
					a = "--config=" + polFile
				case strings.HasPrefix(a, "--listen="):
					a = "--listen=" + addr
				}
				args = append(args, a)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var logBuf syncBuffer
			done := make(chan error, 1)
			go func() {
				root := NewRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &logBuf})
				root.SetArgs(args)
				done <- root.ExecuteContext(ctx)
			}()

			get := func(p string) (int, string) {
				resp, err := http.Get("http://" + addr + p)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			deadline := time.Now().Add(15 * time.Second)
			for {
				if code, _ := get("/readyz"); code == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					cancel()
					t.Fatalf("agent not ready on %s after 15s (exit: %v)", addr, <-done)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if code, body := get("/healthz"); code != http.StatusOK {
				t.Errorf("/healthz = %d %s", code, body)
			}
			code, metrics := get("/metrics")
			if code != http.StatusOK || !strings.Contains(metrics, `nfstune_mount_read_ahead_bytes{backend="generic",device="0:52"`) {
				t.Errorf("/metrics = %d without 0:52's read-ahead:\n%.2000s", code, metrics)
			}
			// /status, as kubectl nfstune reads it: the rendered --policy-name, the mode, the
			// policy's hash, and 0:52 untuned in observe mode only.
			code, body := get(status.StatusPath)
			var st status.Status
			if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
				t.Fatalf("/status = %d %v: %s", code, err, body)
			}
			untuned := slices.ContainsFunc(st.Untuned, func(m status.Mount) bool { return m.Device == "0:52" })
			if st.Policy.Name != render.DefaultGroup || st.Mode != tt.mode || len(st.Policy.SHA256) != 64 ||
				st.Mounts == 0 || untuned != (tt.mode == render.PolicyObserve) {
				t.Errorf("/status = %+v; want policy %q, mode %s, a hash, 0:52 untuned only in observe mode", st, render.DefaultGroup, tt.mode)
			}
			ra, err := hostfs.ReadString(hostfs.Root(host).Sys("class", "bdi", "0:52", "read_ahead_kb"))
			if err != nil || ra != tt.wantRA {
				t.Errorf("0:52 read_ahead_kb = %q (%v), want %s in %s mode; agent log:\n%s", ra, err, tt.wantRA, tt.mode, logBuf.String())
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("agent exit: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("agent did not stop within 10s of cancel")
			}
		})
	}
}
