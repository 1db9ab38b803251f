// Package image builds nfstune's OCI image without a container daemon: one layer holding
// the static nfstune binary on an empty base (no shell, no libc), root user, the binary as
// entrypoint, one image per architecture, and the OCI image index that holds them all under
// one reference. The build is reproducible: the same binaries, version and time give the
// same digests.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BinaryPath is where the binary sits in the image and the entrypoint.
const BinaryPath = "/nfstune"

// Spec is what goes into the image.
type Spec struct {
	// Binary is the static (CGO_ENABLED=0) nfstune executable for Arch.
	Binary []byte
	// Version tags the image and fills org.opencontainers.image.version.
	Version string
	// Arch is the GOARCH the binary was built for, e.g. "amd64".
	Arch string
	// Created is the image's creation time; a fixed value (the commit time) keeps the
	// digest reproducible.
	Created time.Time
	// Source is the org.opencontainers.image.source label.
	Source string
}

// Build returns the image for s.
func Build(s Spec) (v1.Image, error) {
	if len(s.Binary) == 0 {
		return nil, fmt.Errorf("building image: empty binary")
	}
	if s.Version == "" || s.Arch == "" {
		return nil, fmt.Errorf("building image: version and arch are required")
	}
	tarBytes, err := layerTar(s.Binary, s.Created)
	if err != nil {
		return nil, fmt.Errorf("building image layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("building image layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: "nfstune image build", Comment: "static nfstune binary"},
	})
	if err != nil {
		return nil, fmt.Errorf("building image: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("building image config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = s.Arch
	cfg.Created = v1.Time{Time: s.Created}
	cfg.Config.Entrypoint = []string{BinaryPath}
	cfg.Config.Cmd = []string{"agent"}
	// uid 0 without capabilities: the bdi attributes are root-owned 0644; the manifests
	// drop every capability and forbid escalation.
	cfg.Config.User = "0:0"
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "nfstune",
		"org.opencontainers.image.description": "Audits, tunes and watches Linux NFS client mounts",
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.source":      s.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("building image config: %w", err)
	}
	return img, nil
}

// layerTar is the single layer: the binary, root-owned, mode 0755, with a fixed time.
func layerTar(binary []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name:     BinaryPath[1:],
		Typeflag: tar.TypeReg,
		Mode:     0o755,
		Size:     int64(len(binary)),
		ModTime:  mtime,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(binary); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Written is where Write put the image.
type Written struct {
	Digest  v1.Hash
	Ref     name.Tag
	Layout  string // OCI image layout directory
	Tarball string // docker-load/crane-push compatible tarball
}

// Write stores img as an OCI image layout under dir/oci (tagged Version through the
// org.opencontainers.image.ref.name annotation) and as dir/nfstune-<version>.tar tagged
// repository:version, replacing earlier output.
func Write(img v1.Image, dir, repository, version string) (Written, error) {
	ref, err := name.NewTag(repository + ":" + version)
	if err != nil {
		return Written{}, fmt.Errorf("image tag: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Written{}, err
	}
	w := Written{Digest: digest, Ref: ref, Layout: filepath.Join(dir, "oci"), Tarball: filepath.Join(dir, "nfstune-"+version+".tar")}
	if err := os.RemoveAll(w.Layout); err != nil {
		return Written{}, err
	}
	p, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return Written{}, fmt.Errorf("writing %s: %w", w.Layout, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	})); err != nil {
		return Written{}, fmt.Errorf("writing %s: %w", w.Layout, err)
	}
	if err := tarball.WriteToFile(w.Tarball, ref, img); err != nil {
		return Written{}, fmt.Errorf("writing %s: %w", w.Tarball, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return Written{}, err
	}
	return w, nil
}
