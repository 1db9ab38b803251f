// Command mkimage builds nfstune's OCI image from a static binary without a container
// daemon and prints the image reference with its digest. `make image` runs it for the
// host's architecture:
//
//	go run ./internal/image/mkimage -binary bin/nfstune -version v0.1.0 -out bin/image
//
// and `make release` for every architecture, into one image index:
//
//	go run ./internal/image/mkimage -index amd64=bin/release/nfstune-linux-amd64 \
//		-index arm64=bin/release/nfstune-linux-arm64 -version v0.1.0 -out bin/release
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nfstune/nfstune/internal/image"
	"github.com/nfstune/nfstune/internal/render"
)

type flags struct {
	binary, version, repository, out, arch, source string
	created                                        int64
	index                                          archBinaries
}

// archBinaries are the -index flags: ARCH=BINARY, in the order given.
type archBinaries [][2]string

func (a *archBinaries) String() string { return fmt.Sprint(*a) }

func (a *archBinaries) Set(s string) error {
	arch, bin, ok := strings.Cut(s, "=")
	if !ok || arch == "" || bin == "" {
		return fmt.Errorf("%q: want ARCH=BINARY, e.g. arm64=bin/release/nfstune-linux-arm64", s)
	}
	*a = append(*a, [2]string{arch, bin})
	return nil
}

func main() {
	f := flags{}
	flag.StringVar(&f.binary, "binary", "bin/nfstune", "static nfstune binary (CGO_ENABLED=0)")
	flag.StringVar(&f.version, "version", "dev", "image tag and version label")
	flag.StringVar(&f.repository, "repository", render.DefaultRepository, "repository of the tarball's tag")
	flag.StringVar(&f.out, "out", "bin/image", "output directory")
	flag.StringVar(&f.arch, "arch", runtime.GOARCH, "GOARCH of the binary")
	flag.Var(&f.index, "index", "ARCH=BINARY: build an image per binary and the image index of them all (repeat for each architecture; replaces -binary and -arch)")
	flag.StringVar(&f.source, "source", "https://github.com/nfstune/nfstune", "source label")
	flag.Int64Var(&f.created, "created", sourceDateEpoch(), "creation time, Unix seconds (default $SOURCE_DATE_EPOCH or 0)")
	flag.Parse()
	run := runImage
	if len(f.index) > 0 {
		run = runIndex
	}
	if err := run(f); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func (f flags) build(binary, arch string) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	return image.Build(image.Spec{Binary: bin, Version: f.version, Arch: arch, Created: time.Unix(f.created, 0).UTC(), Source: f.source})
}

func runImage(f flags) error {
	img, err := f.build(f.binary, f.arch)
	if err != nil {
		return err
	}
	w, err := image.Write(img, f.out, f.repository, f.version)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "%s@%s\nlayout:  %s\ntarball: %s\npin with: nfstune k8s render --image %s --image-digest %s\n",
		w.Ref, w.Digest, w.Layout, w.Tarball, f.repository, w.Digest)
	return nil
}

func runIndex(f flags) error {
	var imgs []v1.Image
	for _, ab := range f.index {
		img, err := f.build(ab[1], ab[0])
		if err != nil {
			return fmt.Errorf("%s: %w", ab[1], err)
		}
		imgs = append(imgs, img)
	}
	idx, err := image.Index(imgs...)
	if err != nil {
		return err
	}
	w, err := image.WriteIndex(idx, f.out, f.version, time.Unix(f.created, 0).UTC())
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "%s:%s@%s (image index: %s)\nlayout:  %s\narchive: %s\npin with: nfstune k8s render --image %s --image-digest %s\n",
		f.repository, f.version, w.Digest, f.index, w.Layout, w.Archive, f.repository, w.Digest)
	return nil
}

func sourceDateEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
