// Package version holds the build's version, set at link time:
//
//	go build -ldflags "-X github.com/nfstune/nfstune/internal/version.Version=v0.1.0"
package version

import "runtime/debug"

// Version is the release version, or "dev" for an untagged build.
var Version = "dev"

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
