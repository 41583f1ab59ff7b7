package wal

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// On Linux, OSFS opens with O_DIRECT for OUncached and ReadUncached reads through it with
// one aligned pread per chunk (an unaligned read fails: the flag really is on).
func TestUncachedUsesODirect(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 300), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OSFS().OpenFile(p, os.O_RDONLY|OUncached, 0)
	if errors.Is(err, syscall.EINVAL) {
		t.Skip("this file system refuses O_DIRECT")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if b, err := readDirect(f, 4096); err != nil || len(b) != 300 {
		t.Fatalf("readDirect: %d bytes, %v", len(b), err)
	}
	if _, err := f.(*osFile).readOnce(alignedBuf(8192)[1:4097], 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("an unaligned read through the descriptor: %v, want EINVAL (O_DIRECT off?)", err)
	}
}
