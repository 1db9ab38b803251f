// Command mkimages builds the two images the Kubernetes lab node runs besides nfstune's,
// without a registry or a container daemon: a pause image (the pod sandbox) and a test
// image, both one layer holding a static busybox. It writes them to one tarball that
// `ctr images import` reads:
//
//	go run ./lab/k8slab/mkimages -busybox /bin/busybox -out images.tar
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The references the lab's containerd configuration and pods name.
const (
	PauseRef   = "nfstune.test/pause:lab"
	BusyboxRef = "nfstune.test/busybox:lab"
)

func main() {
	busybox := flag.String("busybox", "/bin/busybox", "static busybox binary (Debian's busybox-static)")
	out := flag.String("out", "images.tar", "output tarball")
	flag.Parse()
	if err := run(*busybox, *out); err != nil {
		fmt.Fprintf(os.Stderr, "mkimages: %v\n", err)
		os.Exit(1)
	}
}

func run(busybox, out string) error {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	layerBytes, err := layerTar(bin)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	// The sandbox only holds the pod's namespaces: sleep until killed. The test image runs
	// the shell script a pod gives it.
	pause, err := image(layer, []string{"/bin/busybox", "sleep", "2147483647"}, nil)
	if err != nil {
		return err
	}
	test, err := image(layer, nil, []string{"/bin/sh"})
	if err != nil {
		return err
	}
	refs := map[name.Reference]v1.Image{}
	for ref, img := range map[string]v1.Image{PauseRef: pause, BusyboxRef: test} {
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		refs[tag] = img
	}
	return tarball.MultiRefWriteToFile(out, refs)
}

// layerTar holds bin/busybox and bin/sh, a link to it.
func layerTar(busybox []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(busybox)), ModTime: epoch},
		{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: epoch},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(busybox); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func image(layer v1.Layer, entrypoint, cmd []string) (v1.Image, error) {
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS = "linux"
	cfg.Architecture = runtime.GOARCH
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Cmd = cmd
	cfg.Config.Env = []string{"PATH=/bin"}
	return mutate.ConfigFile(img, cfg)
}
