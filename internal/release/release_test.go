//go:build release

package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"

	"github.com/nfstune/nfstune/internal/image"
)

// The architectures a release carries, as the Makefile's RELEASE_ARCHES.
var arches = []string{"amd64", "arm64"}

// release is the directory and version under test, from the Makefile.
func release(t *testing.T) (dir, version string) {
	t.Helper()
	dir, version = os.Getenv("NFSTUNE_RELEASE_DIR"), os.Getenv("NFSTUNE_RELEASE_VERSION")
	if dir == "" || version == "" {
		t.Fatal("NFSTUNE_RELEASE_DIR and NFSTUNE_RELEASE_VERSION are not set: run make release")
	}
	return dir, version
}

// binaries are the release's binaries: <cmd>-linux-<arch> for every cmd/* and architecture.
func binaries(t *testing.T) []string {
	t.Helper()
	cmds, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var bins []string
	for _, c := range cmds {
		if c.IsDir() {
			for _, a := range arches {
				bins = append(bins, c.Name()+"-linux-"+a)
			}
		}
	}
	if len(bins) < 2 {
		t.Fatalf("cmd/ has no programs: %v", bins)
	}
	return bins
}

func TestChecksums(t *testing.T) {
	dir, version := release(t)
	sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
	// What a release publishes is listed, nothing else is.
	want := []string{"nfstune-" + version[1:] + ".tgz", "nfstune-" + version + ".oci.tar", "nfstune.yaml", "RELEASE-NOTES.md"}
	for _, a := range arches {
		want = append(want, "kubectl-nfstune-linux-"+a+".tar.gz")
	}
	for _, b := range binaries(t) {
		want = append(want, b, b+".cdx.json")
	}
	slices.Sort(want)
	var got []string
	for name, sum := range sums {
		got = append(got, name)
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file has %x", name, sum, h)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("SHA256SUMS lists %q\nwant %q", got, want)
	}
	// Users verify with coreutils, so the format is checked by coreutils.
	cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check --strict SHA256SUMS: %v\n%s", err, out)
	}
}

// readSums parses sha256sum's output: "<64 hex digits>  <name>" per line, in text mode.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 64 || name == "" || strings.Contains(name, "/") {
			t.Fatalf("%s: line %q is not \"<sha256>  <file>\"", path, sc.Text())
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

func TestBinaries(t *testing.T) {
	dir, version := release(t)
	for _, b := range binaries(t) {
		info, err := buildinfo.ReadFile(filepath.Join(dir, b))
		if err != nil {
			t.Errorf("%s: %v", b, err)
			continue
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		arch := b[strings.LastIndex(b, "-")+1:]
		if settings["GOOS"] != "linux" || settings["GOARCH"] != arch || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s built with GOOS=%s GOARCH=%s CGO_ENABLED=%s -trimpath=%s; want linux, %s, static, trimmed",
				b, settings["GOOS"], settings["GOARCH"], settings["CGO_ENABLED"], settings["-trimpath"], arch)
		}
		// -trimpath keeps -ldflags out of the build info: the version is in the data.
		if body, err := os.ReadFile(filepath.Join(dir, b)); err != nil || !bytes.Contains(body, []byte(version)) {
			t.Errorf("%s does not carry the version %s (%v)", b, version, err)
		}
	}
	// The host's own binary says so when asked.
	out, err := exec.Command(filepath.Join(dir, "nfstune-linux-"+runtime.GOARCH), "version").Output()
	if err != nil {
		t.Fatalf("nfstune version: %v", err)
	}
	if f := strings.Fields(string(out)); len(f) < 3 || f[0] != "nfstune" || f[1] != version || !slices.Contains(f, "linux/"+runtime.GOARCH) {
		t.Errorf("nfstune version printed %q, want nfstune %s ... linux/%s", out, version, runtime.GOARCH)
	}
}

// cycloneDX is the part of a CycloneDX JSON SBOM the test reads.
type cycloneDX struct {
	BOMFormat string `json:"bomFormat"`
	Metadata  struct {
		Component component `json:"component"`
	} `json:"metadata"`
	Components []component `json:"components"`
}

type component struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

func TestSBOMs(t *testing.T) {
	dir, version := release(t)
	for _, b := range binaries(t) {
		info, err := buildinfo.ReadFile(filepath.Join(dir, b))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, b+".cdx.json"))
		if err != nil {
			t.Fatal(err)
		}
		var bom cycloneDX
		if err := json.Unmarshal(raw, &bom); err != nil {
			t.Fatalf("%s.cdx.json: %v", b, err)
		}
		if bom.BOMFormat != "CycloneDX" {
			t.Errorf("%s.cdx.json: bomFormat %q", b, bom.BOMFormat)
		}
		if m := bom.Metadata.Component; m.Name != info.Main.Path || m.Version != version {
			t.Errorf("%s.cdx.json describes %s %s, want %s %s", b, m.Name, m.Version, info.Main.Path, version)
		}
		// Every module go version -m lists (the replacement where there is one) is a
		// component, and no component is a module the binary lacks.
		listed := map[string]bool{}
		for _, c := range bom.Components {
			if strings.HasPrefix(c.PURL, "pkg:golang/") {
				listed[c.Name+"@"+c.Version] = true
			}
		}
		var want []string
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			want = append(want, d.Path+"@"+d.Version)
			if !listed[d.Path+"@"+d.Version] {
				t.Errorf("%s.cdx.json lacks the module %s %s", b, d.Path, d.Version)
			}
		}
		for m := range listed {
			if !slices.Contains(want, m) {
				t.Errorf("%s.cdx.json lists %s, which go version -m does not", b, m)
			}
		}
		if len(want) < 10 {
			t.Errorf("%s: only %d modules in its build info", b, len(want))
		}
	}
}

func TestImageIndex(t *testing.T) {
	dir, version := release(t)
	p, err := layout.FromPath(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != version {
		t.Fatalf("oci/index.json: %+v; want one image index named %s", tm.Manifests, version)
	}
	digest := tm.Manifests[0].Digest
	if b, _ := os.ReadFile(filepath.Join(dir, "digest")); strings.TrimSpace(string(b)) != digest.String() {
		t.Errorf("digest file says %q, the layout's index is %s", b, digest)
	}
	idx, err := top.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Errorf("the image index does not validate: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
		arch := d.Platform.Architecture
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.Config.Labels["org.opencontainers.image.version"] != version {
			t.Errorf("%s image: architecture %q, version label %q", d.Platform, cfg.Architecture, cfg.Config.Labels["org.opencontainers.image.version"])
		}
		// The image holds the very binary the release publishes for its architecture.
		want, err := os.ReadFile(filepath.Join(dir, "nfstune-linux-"+arch))
		if err != nil {
			t.Fatal(err)
		}
		if got := imageBinary(t, img); !bytes.Equal(got, want) {
			t.Errorf("%s image: %s is not nfstune-linux-%s (%d bytes, want %d)", d.Platform, image.BinaryPath, arch, len(got), len(want))
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("image index platforms %q, want %q", platforms, want)
	}
	// The archive is the layout, file for file.
	for name, body := range tarFiles(t, filepath.Join(dir, "nfstune-"+version+".oci.tar")) {
		if want, err := os.ReadFile(filepath.Join(dir, "oci", name)); err != nil || !bytes.Equal(body, want) {
			t.Errorf("nfstune-%s.oci.tar: %s differs from oci/%s (%v)", version, name, name, err)
		}
	}
}

// imageBinary returns the nfstune binary from an image's single layer.
func imageBinary(t *testing.T, img v1.Image) []byte {
	t.Helper()
	ls, err := img.Layers()
	if err != nil || len(ls) != 1 {
		t.Fatalf("%d layers, %v; want 1", len(ls), err)
	}
	rc, err := ls[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := readTar(t, rc)
	return files[strings.TrimPrefix(image.BinaryPath, "/")]
}

func TestChart(t *testing.T) {
	dir, version := release(t)
	pkg := filepath.Join(dir, "nfstune-"+version[1:]+".tgz")
	f, err := os.Open(pkg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, zr)
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(files["nfstune/Chart.yaml"], &chart); err != nil {
		t.Fatalf("%s: nfstune/Chart.yaml: %v", pkg, err)
	}
	if chart.Name != "nfstune" || chart.Version != version[1:] || chart.AppVersion != version {
		t.Errorf("packaged chart %s version %q appVersion %q; want nfstune %s %s", chart.Name, chart.Version, chart.AppVersion, version[1:], version)
	}
	if _, ok := files["nfstune/templates/agent-daemonset.yaml"]; !ok {
		t.Errorf("%s has no templates/agent-daemonset.yaml", pkg)
	}
	// The chart's README (generated from its values, deploy's TestChartReadme) is what
	// `helm show readme` prints for the packaged chart.
	readme, err := os.ReadFile("../../deploy/helm/nfstune/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := files["nfstune/README.md"]; !ok || !bytes.Equal(got, readme) {
		t.Errorf("%s: README.md missing or not deploy/helm/nfstune/README.md", pkg)
	}
}

func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := readTar(t, f)
	if len(files) == 0 {
		t.Fatalf("%s holds no files", path)
	}
	return files
}

// readTar returns the regular files of a tar stream by name.
func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(fmt.Errorf("reading tar: %w", err))
		}
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = b
		}
	}
}

// krewManifest is the part of krew's plugin manifest a user's `kubectl krew install` reads
// (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/).
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest: one platform per architecture, each naming its archive and that
// archive's digest; the archive holds the plugin as released and the LICENSE.
func TestKrewManifest(t *testing.T) {
	dir, version := release(t)
	b, err := os.ReadFile(filepath.Join(dir, "nfstune.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewManifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "nfstune" ||
		m.Spec.Version != version || m.Spec.ShortDescription == "" {
		t.Errorf("manifest head: %+v", m)
	}
	if len(m.Spec.Platforms) != len(arches) {
		t.Fatalf("%d platforms, want one per architecture %v", len(m.Spec.Platforms), arches)
	}
	for _, p := range m.Spec.Platforms {
		arch := p.Selector.MatchLabels["arch"]
		archive := "kubectl-nfstune-linux-" + arch + ".tar.gz"
		if p.Selector.MatchLabels["os"] != "linux" || !slices.Contains(arches, arch) || !strings.HasSuffix(p.URI, "/"+version+"/"+archive) || p.Bin != "kubectl-nfstune" {
			t.Errorf("platform %+v", p)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, archive))
		if err != nil {
			t.Error(err)
			continue
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != p.SHA256 {
			t.Errorf("%s: the manifest says sha256 %s, the archive has %x", archive, p.SHA256, h)
		}
		files := untar(t, data)
		bin, err := os.ReadFile(filepath.Join(dir, "kubectl-nfstune-linux-"+arch))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files["kubectl-nfstune"], bin) {
			t.Errorf("%s: kubectl-nfstune is not the released binary", archive)
		}
		license, err := os.ReadFile("../../LICENSE")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files["LICENSE"], license) || len(files) != 2 {
			t.Errorf("%s holds %d files; want kubectl-nfstune and LICENSE", archive, len(files))
		}
		for _, f := range p.Files {
			if _, ok := files[f.From]; !ok {
				t.Errorf("%s: the manifest installs %q, which the archive lacks", archive, f.From)
			}
		}
	}
}

// untar returns the regular files of a gzipped tar archive by name.
func untar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

// TestReleaseNotes: the notes are the CHANGELOG's section of the release ([Unreleased] for a
// pre-release), not empty.
func TestReleaseNotes(t *testing.T) {
	dir, version := release(t)
	b, err := os.ReadFile(filepath.Join(dir, "RELEASE-NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	head := "# nfstune [" + strings.TrimPrefix(version, "v") + "]"
	if strings.Contains(version, "-") {
		head = "# nfstune [Unreleased]"
	}
	notes := string(b)
	if !strings.HasPrefix(notes, head) || !strings.Contains(notes, "\n### ") {
		t.Errorf("RELEASE-NOTES.md starts %q, want %q and the section's headings", notes[:min(len(notes), 80)], head)
	}
}
