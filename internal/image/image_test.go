package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
