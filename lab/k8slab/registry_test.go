//go:build lab

package k8slab

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The chart and the agent image reach the node as they reach a user's cluster: from a
// registry. TestMain starts one on the node (distribution, built from its Go module), pushes
// make release's image index to it with go-containerregistry and the packaged chart with
// helm push; the cases install the chart from its OCI reference, and containerd pulls the
// image from the registry through its hosts.toml.

// envRelease names the directory with make release's image index (oci/, an OCI layout) and
// packaged chart (nfstune-<chart version>.tgz); envVersion is the release's version.
const (
	envRelease = "NFSTUNE_K8S_RELEASE"
	envVersion = "NFSTUNE_K8S_VERSION"
)

// The registry listens on the node's loopback, plain HTTP, as a lab or air-gapped mirror
// would; containerd and helm are told so (hosts.toml, --plain-http).
const (
	registryAddr  = "127.0.0.1:5000"
	registryImage = registryAddr + "/nfstune"
	registryChart = "oci://" + registryAddr + "/charts/nfstune"
	// registryHosts is containerd's config_path: a hosts.toml per registry.
	registryHosts = stateDir + "/certs.d"
)

const registryConfig = `version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: ` + stateDir + `/registry
http:
  addr: ` + registryAddr + `
`

// registryHostsTOML tells containerd to pull from the registry over plain HTTP.
const registryHostsTOML = `server = "http://` + registryAddr + `"

[host."http://` + registryAddr + `"]
  capabilities = ["pull", "resolve"]
`

// releaseVersion is the version of the release the cases install: the chart's version
// without its v, the image's tag with it.
func releaseVersion() string { return os.Getenv(envVersion) }

// chartRef is what helm install and upgrade take: the chart's OCI reference and version.
func chartRef() []string {
	return []string{registryChart, "--version", strings.TrimPrefix(releaseVersion(), "v"), "--plain-http"}
}

// writeRegistryHosts writes containerd's hosts.toml for the registry; containerd reads it at
// each pull.
func writeRegistryHosts() error {
	dir := filepath.Join(registryHosts, registryAddr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(registryHostsTOML), 0o644)
}

// startRegistry starts the registry and pushes the release's image index and chart to it;
// summary.RegistryImage is the index's reference by digest.
func (n *node) startRegistry() error {
	cfg := filepath.Join(stateDir, "registry.yml")
	if err := os.WriteFile(cfg, []byte(registryConfig), 0o644); err != nil {
		return err
	}
	p, err := n.start("registry", filepath.Join(n.bin, "registry"), "serve", cfg)
	if err != nil {
		return err
	}
	if err := waitStep("registry", p, 2*time.Minute, func() error {
		resp, err := http.Get("http://" + registryAddr + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return err
	}
	start := time.Now()
	ref, err := pushIndex(filepath.Join(os.Getenv(envRelease), "oci"), registryImage+":"+releaseVersion())
	if err != nil {
		return &stepError{step: "registry push", component: "registry", waited: time.Since(start), err: err, tail: tail("registry", 20)}
	}
	summary.RegistryImage = ref
	logf("pushed the image index %s in %s", ref, time.Since(start).Round(10*time.Millisecond))
	start = time.Now()
	chart := filepath.Join(os.Getenv(envRelease), "nfstune-"+strings.TrimPrefix(releaseVersion(), "v")+".tgz")
	if _, err := helm("push", chart, "oci://"+registryAddr+"/charts", "--plain-http"); err != nil {
		return &stepError{step: "registry push", component: "registry", waited: time.Since(start), err: err, tail: tail("registry", 20)}
	}
	logf("pushed the chart %s in %s", filepath.Base(chart), time.Since(start).Round(10*time.Millisecond))
	return nil
}

// pushIndex pushes the image index an OCI layout's index.json names to ref (a tag), with
// every platform's image, and returns ref by digest.
func pushIndex(layoutDir, ref string) (string, error) {
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		return "", err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return "", err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(m.Manifests) != 1 {
		return "", fmt.Errorf("%s names %d manifests, want the one image index", layoutDir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return "", err
	}
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		return "", err
	}
	return tag.Repository.Name() + "@" + m.Manifests[0].Digest.String(), nil
}
