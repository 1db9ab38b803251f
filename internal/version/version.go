// Package version holds the build's version. Release is the release being prepared, from
// the file VERSION beside this one; a build made by the Makefile carries hack/version.sh's
// version, that release or a pre-release of it, set at link time:
//
//	go build -ldflags "-X github.com/nfstune/nfstune/internal/version.Version=v0.1.0"
//
// The Helm chart's version and appVersion are the same release (deploy's
// TestChartVersionIsRelease).
package version

import (
	_ "embed" // the release, from VERSION
	"runtime/debug"
	"strings"
)

// Version is the build's version, or "dev" for a build without the Makefile's flags.
var Version = "dev"

//go:embed VERSION
var release string

// Release is the release being prepared, e.g. "v0.1.0": what a build of the tag of that
// name reports as its Version.
var Release = strings.TrimSpace(release)

// String returns the version with the VCS revision when the binary carries one.
func String() string {
	v := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
