package nfsfs

import (
	"errors"
	"os"
	"testing"
)

// Available reports why FUSE mounts cannot be made here (nil if they can): they need
// /dev/fuse and root (mount(2) without fusermount).
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("nfsfs: not root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// Require skips t when FUSE is not available, or fails it under WEIR_REQUIRE_FUSE=1
// (CI sets it, so that a missing /dev/fuse cannot turn the lab's tests into skips).
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("WEIR_REQUIRE_FUSE") != "" {
			t.Fatalf("FUSE is required (WEIR_REQUIRE_FUSE): %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
}

// MountT mounts backing at dir for a test and unmounts it at cleanup.
func MountT(t testing.TB, dir, backing string, model *Model, o Options) *Mount {
	t.Helper()
	Require(t)
	m, err := New(dir, backing, model, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		model.Thaw() // a frozen server would hold the unmount
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}
