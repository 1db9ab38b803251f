package image

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index returns the OCI image index of imgs, one manifest per platform in the order given,
// each descriptor carrying the os and architecture of its image's config: a runtime pulls
// the index's reference and picks its node's platform. Two images of one platform are an
// error.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	if len(imgs) == 0 {
		return nil, fmt.Errorf("building image index: no images")
	}
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	var seen []string
	for _, img := range imgs {
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("building image index: %w", err)
		}
		p := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture}
		if p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("building image index: an image without os or architecture (%q)", p.String())
		}
		if slices.Contains(seen, p.String()) {
			return nil, fmt.Errorf("building image index: two images for %s", p.String())
		}
		seen = append(seen, p.String())
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// WrittenIndex is where WriteIndex put the image index.
type WrittenIndex struct {
	Digest  v1.Hash
	Layout  string // OCI image layout directory
	Archive string // the layout as one tar file (an OCI archive)
}

// WriteIndex stores idx as an OCI image layout under dir/oci, its index.json naming idx
// by version (org.opencontainers.image.ref.name), the same layout as one tar file,
// dir/nfstune-<version>.oci.tar, with every entry's time set to mtime, and idx's digest in
// dir/digest, replacing earlier output.
func WriteIndex(idx v1.ImageIndex, dir, version string, mtime time.Time) (WrittenIndex, error) {
	digest, err := idx.Digest()
	if err != nil {
		return WrittenIndex{}, err
	}
	w := WrittenIndex{Digest: digest, Layout: filepath.Join(dir, "oci"), Archive: filepath.Join(dir, "nfstune-"+version+".oci.tar")}
	if err := os.RemoveAll(w.Layout); err != nil {
		return WrittenIndex{}, err
	}
	p, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return WrittenIndex{}, fmt.Errorf("writing %s: %w", w.Layout, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	})); err != nil {
		return WrittenIndex{}, fmt.Errorf("writing %s: %w", w.Layout, err)
	}
	if err := tarDir(w.Layout, w.Archive, mtime); err != nil {
		return WrittenIndex{}, fmt.Errorf("writing %s: %w", w.Archive, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return WrittenIndex{}, err
	}
	return w, nil
}

// tarDir writes the files below dir to the tar file out, in lexical order, with names
// relative to dir, root-owned and with a fixed time, so that the same files give the same
// tar.
func tarDir(dir, out string, mtime time.Time) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	// WalkDir visits in lexical order.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", path)
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
