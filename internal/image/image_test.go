package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var testSpec = Spec{
	Binary:  []byte("\x7fELF not really a binary"),
	Version: "v1.2.3",
	Arch:    "amd64",
	Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	Source:  "https://example.com/nfstune",
}

func TestBuildConfig(t *testing.T) {
	t.Parallel()
	img, err := Build(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("media type = %q, %v; want OCI manifest", mt, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/nfstune"}, cfg.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cfg.Config.User != "0:0" || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("user %q os %q arch %q", cfg.Config.User, cfg.OS, cfg.Architecture)
	}
	if got := cfg.Config.Labels["org.opencontainers.image.version"]; got != "v1.2.3" {
		t.Errorf("version label = %q", got)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1 (empty base)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(tr)
	if hdr.Name != "nfstune" || hdr.Mode != 0o755 || hdr.Uid != 0 || !bytes.Equal(body, testSpec.Binary) {
		t.Errorf("layer entry %q mode %o uid %d, %d bytes", hdr.Name, hdr.Mode, hdr.Uid, len(body))
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("layer has more than the binary: %v", err)
	}
}

func TestBuildReproducible(t *testing.T) {
	t.Parallel()
	a, err := Build(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("same input, digests %s and %s", da, db)
	}
	other := testSpec
	other.Binary = []byte("another binary")
	c, err := Build(other)
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Errorf("different binaries share digest %s", dc)
	}
}

func TestBuildRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []Spec{{Version: "v1", Arch: "amd64"}, {Binary: []byte("x"), Arch: "amd64"}} {
		if _, err := Build(s); err == nil {
			t.Errorf("Build(%+v) succeeded", s)
		}
	}
}

func TestWriteRoundTrip(t *testing.T) {
	t.Parallel()
	img, err := Build(testSpec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := Write(img, dir, "registry.example.com/nfstune", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if w.Digest != want {
		t.Errorf("written digest %s, want %s", w.Digest, want)
	}
	// The layout holds the image under its version.
	p, err := layout.FromPath(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Errorf("layout index = %+v", m.Manifests)
	}
	// The tarball loads back under its tag with the same digest.
	tag, _ := name.NewTag("registry.example.com/nfstune:v1.2.3")
	loaded, err := tarball.ImageFromPath(w.Tarball, &tag)
	if err != nil {
		t.Fatal(err)
	}
	// The tarball format stores the config and layers; compare what defines the image.
	lc, _ := loaded.ConfigName()
	ic, _ := img.ConfigName()
	if lc != ic {
		t.Errorf("tarball config %s, want %s", lc, ic)
	}
	if _, err := mutate.Canonical(loaded); err != nil {
		t.Errorf("tarball image unusable: %v", err)
	}
}

func TestIndexPlatforms(t *testing.T) {
	t.Parallel()
	arm := testSpec
	arm.Arch, arm.Binary = "arm64", []byte("\x7fELF an arm64 binary")
	var imgs []v1.Image
	for _, s := range []Spec{testSpec, arm} {
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := Index(imgs...)
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type = %q, want %q", mt, types.OCIImageIndex)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %d has no platform", i)
		}
		got = append(got, d.Platform.String())
		want, _ := imgs[i].Digest()
		if d.Digest != want || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest %d: %s %s, want %s of an OCI manifest", i, d.MediaType, d.Digest, want)
		}
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, got); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	// A runtime on either platform resolves the index to that platform's image.
	for i, p := range []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}} {
		c, err := partial.FindManifests(idx, match.Platforms(p))
		if err != nil || len(c) != 1 {
			t.Fatalf("%s: %d manifests, %v", p.String(), len(c), err)
		}
		if want, _ := imgs[i].Digest(); c[0].Digest != want {
			t.Errorf("%s resolves to %s, want %s", p.String(), c[0].Digest, want)
		}
	}
	if _, err := Index(imgs[0], imgs[0]); err == nil {
		t.Error("Index accepted two images of one platform")
	}
	if _, err := Index(); err == nil {
		t.Error("Index accepted no image")
	}
}

func TestWriteIndexRoundTrip(t *testing.T) {
	t.Parallel()
	arm := testSpec
	arm.Arch = "arm64"
	a, _ := Build(testSpec)
	b, _ := Build(arm)
	idx, err := Index(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	write := func(dir string) WrittenIndex {
		w, err := WriteIndex(idx, dir, "v1.2.3", testSpec.Created)
		if err != nil {
			t.Fatal(err)
		}
		if w.Digest != want {
			t.Errorf("written digest %s, want %s", w.Digest, want)
		}
		return w
	}
	dir := t.TempDir()
	w := write(dir)
	// The layout's index.json names the image index by its version.
	p, err := layout.FromPath(w.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := top.IndexManifest()
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want || m.Manifests[0].MediaType != types.OCIImageIndex ||
		m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1.2.3" {
		t.Fatalf("layout index.json = %+v", m.Manifests)
	}
	back, err := top.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	// Every blob is there under its digest, with the sizes and media types the
	// descriptors give.
	if err := validate.Index(back); err != nil {
		t.Errorf("index read back does not validate: %v", err)
	}
	// The archive holds the layout's files, and the same index gives the same archive.
	first, err := os.ReadFile(w.Archive)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(first))
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
	for _, n := range []string{"oci-layout", "index.json", "blobs/sha256/" + want.Hex} {
		if !slices.Contains(names, n) {
			t.Errorf("archive lacks %s: %q", n, names)
		}
	}
	second, err := os.ReadFile(write(t.TempDir()).Archive)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("the same index written twice gives different archives")
	}
}
