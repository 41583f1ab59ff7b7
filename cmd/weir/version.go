package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is set at link time (make build, make image: -X main.version=$(git describe));
// a plain `go build` leaves "dev", and versionString adds the commit Go stamps into
// every binary built from a git checkout (vcs.revision), so an operator can always
// tell which code a broker runs.
var version = "dev"

// commit is set at link time too (make build: -X main.commit=$(git rev-parse HEAD)): a
// build with -buildvcs=false (GOFLAGS on some machines) records no vcs.revision.
var commit = ""

// versionString is what `weir version` prints: the version, then the commit (with
// "+changes" when the tree was modified), its time and the Go version, as the build
// recorded them.
func versionString(v, linked string, info *debug.BuildInfo) string {
	s := "weir " + v
	if info == nil {
		info = &debug.BuildInfo{}
	}
	rev, at := linked, ""
	modified := false
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		c := "commit " + rev[:min(12, len(rev))]
		if modified {
			c += "+changes"
		}
		if at != "" {
			c += " (" + at + ")"
		}
		parts = append(parts, c)
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	if len(parts) > 0 {
		s += ", " + strings.Join(parts, ", ")
	}
	return s
}

func printVersion() {
	info, _ := debug.ReadBuildInfo()
	fmt.Println(versionString(version, commit, info))
}
