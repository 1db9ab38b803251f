//go:build lab

package k8slab

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nfstune/nfstune/lab/labtest"
)

// The tokens of the cluster's users: the admin (system:masters) that the tests, helm and
// the controllers use, the node's kubelet (system:nodes, so that the Node authorizer and
// NodeRestriction apply to it as on a real node), and viewer, who has only what the fleet
// cases bind (the chart's fleet-viewer roles).
const (
	adminToken   = "k8slab-admin-token"
	kubeletToken = "k8slab-kubelet-token"
	viewerToken  = "k8slab-viewer-token"
)

// writePKI writes the cluster's certificate authority and the apiserver's serving
// certificate, made here rather than with a tool: one CA, one leaf for 127.0.0.1, the node
// IP and the kubernetes Service's names; the service accounts' key, the users' tokens and
// their kubeconfigs.
func writePKI() error {
	ca, err := labtest.NewCA("k8slab-ca")
	if err != nil {
		return err
	}
	leafDER, key, err := ca.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP), net.ParseIP("10.96.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt":        labtest.CertPEM(ca.DER),
		"apiserver.crt": labtest.CertPEM(leafDER),
		"tokens.csv": []byte(adminToken + `,admin,admin,"system:masters"` + "\n" +
			kubeletToken + `,system:node:` + nodeName + `,kubelet,"system:nodes"` + "\n" +
			viewerToken + ",viewer,viewer\n"),
	}
	for name, k := range map[string]*ecdsa.PrivateKey{"apiserver.key": key, "sa.key": saKey} {
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	for _, user := range []struct{ file, token string }{{"admin.kubeconfig", adminToken}, {"kubelet.kubeconfig", kubeletToken}, {"viewer.kubeconfig", viewerToken}} {
		files[user.file] = []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: https://127.0.0.1:%s
    certificate-authority: %s
users:
- name: user
  user:
    token: %s
contexts:
- name: lab
  context: {cluster: lab, user: user}
current-context: lab
`, apiPort, filepath.Join(stateDir, "ca.crt"), user.token))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(stateDir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// api is a small client of the apiserver's REST interface, as the admin.
type api struct {
	url    string
	client *http.Client
}

func newAPI() (*api, error) {
	pemCA, err := os.ReadFile(filepath.Join(stateDir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	return &api{url: "https://127.0.0.1:" + apiPort, client: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}}, nil
}

// do sends one request; body, when not nil, is JSON-encoded.
func (a *api) do(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// get decodes the object at path into out.
func (a *api) get(path string, out any) error {
	code, b, err := a.do(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, code, clip(b))
	}
	return json.Unmarshal(b, out)
}

// create posts obj to the collection at path.
func (a *api) create(path string, obj any) error {
	code, b, err := a.do(http.MethodPost, path, obj)
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", path, code, clip(b))
	}
	return nil
}

// remove deletes the object at path at once (grace period 0); a missing object is not an
// error.
func (a *api) remove(path string) error {
	code, b, err := a.do(http.MethodDelete, path+"?gracePeriodSeconds=0", nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNotFound {
		return fmt.Errorf("DELETE %s: %d %s", path, code, clip(b))
	}
	return nil
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, each waited for before the next.
func (n *node) startControlPlane() (*api, error) {
	if err := writePKI(); err != nil {
		return nil, &stepError{step: "certificates", err: err}
	}
	st := func(f string) string { return filepath.Join(stateDir, f) }
	etcd, err := n.start("etcd", filepath.Join(n.bin, "etcd"),
		"--data-dir", st("etcd"), "--name", "lab",
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "lab=http://127.0.0.1:2380", "--log-level", "warn",
		"--unsafe-no-fsync") // the data is thrown away with the guest
	if err != nil {
		return nil, err
	}
	if err := waitStep("etcd", etcd, 2*time.Minute, func() error {
		resp, err := http.Get("http://127.0.0.1:2379/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/health: %d", resp.StatusCode)
		}
		return nil
	}); err != nil {
		return nil, err
	}

	apiserver, err := n.start("kube-apiserver", filepath.Join(n.bin, "kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:2379",
		"--bind-address", "0.0.0.0", "--advertise-address", nodeIP, "--secure-port", apiPort,
		"--tls-cert-file", st("apiserver.crt"), "--tls-private-key-file", st("apiserver.key"),
		"--client-ca-file", st("ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", st("sa.key"), "--service-account-signing-key-file", st("sa.key"),
		"--token-auth-file", st("tokens.csv"), "--authorization-mode", "Node,RBAC",
		// The node's name resolves nowhere in the guest: pods/log and exec reach kubelet by
		// its InternalIP, not by the Hostname address the API server tries first.
		"--kubelet-preferred-address-types", "InternalIP",
		"--enable-admission-plugins", "NodeRestriction",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--enable-priority-and-fairness=false")
	if err != nil {
		return nil, err
	}
	a, err := newAPI()
	if err != nil {
		return nil, err
	}
	if err := waitStep("kube-apiserver", apiserver, 5*time.Minute, func() error {
		code, b, err := a.do(http.MethodGet, "/readyz", nil)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", code, clip(b))
		}
		return nil
	}); err != nil {
		return nil, err
	}

	kcm, err := n.start("kube-controller-manager", filepath.Join(n.bin, "kube-controller-manager"),
		"--kubeconfig", st("admin.kubeconfig"),
		"--authentication-kubeconfig", st("admin.kubeconfig"), "--authorization-kubeconfig", st("admin.kubeconfig"),
		"--service-account-private-key-file", st("sa.key"), "--root-ca-file", st("ca.crt"),
		"--use-service-account-credentials=false", "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--controllers", "*")
	if err != nil {
		return nil, err
	}
	// The ServiceAccount controller creates "default" in each namespace: the controllers run.
	if err := waitStep("kube-controller-manager", kcm, 5*time.Minute, func() error {
		var sa corev1.ServiceAccount
		return a.get("/api/v1/namespaces/default/serviceaccounts/default", &sa)
	}); err != nil {
		return nil, err
	}

	sched, err := n.start("kube-scheduler", filepath.Join(n.bin, "kube-scheduler"),
		"--kubeconfig", st("admin.kubeconfig"),
		"--authentication-kubeconfig", st("admin.kubeconfig"), "--authorization-kubeconfig", st("admin.kubeconfig"),
		"--leader-elect=false", "--bind-address", "127.0.0.1")
	if err != nil {
		return nil, err
	}
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The scheduler's serving certificate is its own, self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	if err := waitStep("kube-scheduler", sched, 5*time.Minute, func() error {
		resp, err := insecure.Get("https://127.0.0.1:10259/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %d", resp.StatusCode)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// kubeletConfig: cgroupfs (no systemd in the guest), containerd's socket, webhook
// authentication off, anonymous requests allowed (the API server, which holds no client
// certificate for kubelet here, reads pods' logs through kubelet's API for pods/log:
// kubectl nfstune bench in TestFleetBench), eviction thresholds low
// enough for the guest's tmpfs, and a long runtime timeout for the emulated CPUs.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
failSwapOn: false
resolvConf: ""
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
runtimeRequestTimeout: 10m
serializeImagePulls: false
evictionHard: {memory.available: 50Mi, nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

// startKubelet starts kubelet as the node's user and waits for the Node to be Ready.
func (n *node) startKubelet(a *api) error {
	cfg := filepath.Join(stateDir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig), 0o644); err != nil {
		return err
	}
	p, err := n.start("kubelet", filepath.Join(n.bin, "kubelet"),
		"--config", cfg, "--kubeconfig", filepath.Join(stateDir, "kubelet.kubeconfig"),
		"--hostname-override", nodeName, "--node-ip", nodeIP, "--v", "1")
	if err != nil {
		return err
	}
	return waitStep("kubelet (node Ready)", p, 6*time.Minute, func() error {
		var node corev1.Node
		if err := a.get("/api/v1/nodes/"+nodeName, &node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node Ready=%s: %s", c.Status, c.Message)
			}
		}
		return fmt.Errorf("node has no Ready condition yet")
	})
}
