// Package version holds the build's version, set at link time:
//
//	go build -ldflags "-X github.com/roostfleet/roost/version.Version=v0.1.0"
package version

import "runtime/debug"

// Version is the release version, "dev" for local builds.
var Version = "dev"

// Commit returns the VCS revision the binary was built from, when known.
func Commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return ""
}
