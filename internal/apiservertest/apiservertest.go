//go:build apiserver

// Package apiservertest starts a real kube-apiserver backed by etcd for the tests that
// build with the apiserver tag (`make apiserver-test` builds both binaries from the Go
// module proxy and passes them in NFSTUNE_KUBE_APISERVER and NFSTUNE_ETCD). The server has
// the default admission plugins, RBAC, and token users: an admin (system:masters) and any
// the test adds. It is test support, not part of any binary.
package apiservertest

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Server is a running kube-apiserver.
type Server struct {
	// URL is its https address on 127.0.0.1; its certificate is self-signed.
	URL string
	// Token is the admin's bearer token.
	Token  string
	Client *http.Client
}

// AdminToken is the admin's bearer token.
const AdminToken = "nfstune-test-token"

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func startProcess(t testing.TB, name string, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Stopping the server: an error here only says it had exited or was interrupted; its
		// log tells why.
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log tail:\n%s", name, b)
		}
	})
}

// Start starts etcd and kube-apiserver, stopped when the test ends. users maps more
// bearer tokens to user names (no groups: RBAC grants them only what the test binds).
func Start(t testing.TB, users map[string]string) *Server {
	t.Helper()
	apiBin, etcdBin := os.Getenv("NFSTUNE_KUBE_APISERVER"), os.Getenv("NFSTUNE_ETCD")
	if apiBin == "" || etcdBin == "" {
		t.Fatal("NFSTUNE_KUBE_APISERVER and NFSTUNE_ETCD must name the binaries: run make apiserver-test")
	}
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	startProcess(t, "etcd", etcdBin,
		"--data-dir", filepath.Join(dir, "etcd"), "--name", "default",
		"--listen-client-urls", "http://127.0.0.1:"+client, "--advertise-client-urls", "http://127.0.0.1:"+client,
		"--listen-peer-urls", "http://127.0.0.1:"+peer, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peer,
		"--initial-cluster", "default=http://127.0.0.1:"+peer, "--log-level", "error")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(saKey, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	csv := AdminToken + `,admin,admin,"system:masters"` + "\n"
	for token, user := range users {
		csv += fmt.Sprintf("%s,%s,%s\n", token, user, user)
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := freePort(t)
	startProcess(t, "kube-apiserver", apiBin,
		"--etcd-servers", "http://127.0.0.1:"+client,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", secure,
		"--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--enable-priority-and-fairness=false")

	s := &Server{
		URL:   "https://127.0.0.1:" + secure,
		Token: AdminToken,
		Client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		}},
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, _, _ := s.Do(t, http.MethodGet, "/readyz", nil)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 90s (last status %d)", code)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return s
}

// Do sends one request as the admin, body as JSON, and returns the status, the body and
// the headers; a request that fails returns status 0 and the error as body.
func (s *Server) Do(t testing.TB, method, path string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}
