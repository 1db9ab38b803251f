// Command mkimage builds nfstune's OCI image from a static binary without a container
// daemon and prints the image reference with its digest. `make image` runs it:
//
//	go run ./internal/image/mkimage -binary bin/nfstune -version v0.1.0 -out bin/image
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/nfstune/nfstune/internal/image"
	"github.com/nfstune/nfstune/internal/render"
)

type flags struct {
	binary, version, repository, out, arch, source string
	created                                        int64
}

func main() {
	f := flags{}
	flag.StringVar(&f.binary, "binary", "bin/nfstune", "static nfstune binary (CGO_ENABLED=0)")
	flag.StringVar(&f.version, "version", "dev", "image tag and version label")
	flag.StringVar(&f.repository, "repository", render.DefaultRepository, "repository of the tarball's tag")
	flag.StringVar(&f.out, "out", "bin/image", "output directory")
	flag.StringVar(&f.arch, "arch", runtime.GOARCH, "GOARCH of the binary")
	flag.StringVar(&f.source, "source", "https://github.com/nfstune/nfstune", "source label")
	flag.Int64Var(&f.created, "created", sourceDateEpoch(), "creation time, Unix seconds (default $SOURCE_DATE_EPOCH or 0)")
	flag.Parse()
	if err := run(f); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(f flags) error {
	bin, err := os.ReadFile(f.binary)
	if err != nil {
		return err
	}
	img, err := image.Build(image.Spec{Binary: bin, Version: f.version, Arch: f.arch, Created: time.Unix(f.created, 0).UTC(), Source: f.source})
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

func sourceDateEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
