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
	"fmt"
	"runtime"
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

// Info is what a binary knows of its build: nfstune version and kubectl nfstune version
// print it.
type Info struct {
	Version string `json:"version"`
	// Commit is the VCS revision the go command stamped into the binary (empty when it
	// was built outside a git tree or with -buildvcs=false); Modified, that the tree had
	// uncommitted changes.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"` // GOOS/GOARCH
}

// Get returns the build's Info.
func Get() Info {
	i := Info{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	return i
}

// Text is i for people, one fact a line, the first naming program and its version:
//
//	nfstune v0.1.0
//	commit: 0123456789ab... (modified)
//	go: go1.26.11
//	platform: linux/amd64
func (i Info) Text(program string) string {
	commit := i.Commit
	switch {
	case commit == "":
		commit = "unknown"
	case i.Modified:
		commit += " (modified)"
	}
	return fmt.Sprintf("%s %s\ncommit: %s\ngo: %s\nplatform: %s\n", program, i.Version, commit, i.Go, i.Platform)
}

// String returns the version with the VCS revision when the binary carries one.
func String() string {
	v := Version
	if c := Get().Commit; len(c) >= 12 {
		v += " (" + c[:12] + ")"
	}
	return v
}
