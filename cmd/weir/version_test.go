package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionString(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "b658dd5e0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-02T15:40:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	if got, want := versionString("v1.2.0", "", info), "weir v1.2.0, commit b658dd5e0123+changes (2026-12-02T15:40:00Z), go1.26.8"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	info.Settings = info.Settings[:1]
	if got, want := versionString("dev", "", info), "weir dev, commit b658dd5e0123, go1.26.8"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := versionString("dev", "", nil); got != "weir dev" {
		t.Errorf("no build info: %q", got)
	}
	// Built with -buildvcs=false: the commit the Makefile linked in.
	if got, want := versionString("ece4952-dirty", "ece4952524d7ca66", &debug.BuildInfo{GoVersion: "go1.26.8"}), "weir ece4952-dirty, commit ece4952524d7, go1.26.8"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
