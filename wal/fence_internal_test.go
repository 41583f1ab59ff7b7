package wal

import (
	"errors"
	"testing"
)

// BenchmarkFenceCheck measures the check alone (open, read 256 bytes, close of FENCE)
// on the real file system.
func BenchmarkFenceCheck(b *testing.B) {
	cfg := DefaultConfig(b.TempDir())
	cfg.Fence = true
	w, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ResetTimer()
	for range b.N {
		if err := w.checkFence(); err != nil {
			b.Fatal(err)
		}
	}
}

// The fence check reads FENCE through the page cache only on the OS file system, on a
// local file system with one page cache for every reader; any other file system (NFS,
// FUSE, a test model of either) keeps the uncached read the NFS argument needs.
func TestFenceCheckCachedOnlyWithOneSharedPageCache(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig(dir)
	cfg.Fence = true
	w, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.fenceCached != sharedPageCache(dir) {
		t.Fatalf("fenceCached %v, sharedPageCache %v", w.fenceCached, sharedPageCache(dir))
	}
	if sharedPageCache(dir + "/missing") {
		t.Fatal("a directory that cannot be looked at counts as having one shared page cache")
	}
	if err := w.checkFence(); err != nil {
		t.Fatal(err)
	}
	// A taker on the same host: its write is in the one page cache, the cached read sees it.
	if err := Fence(nil, dir, "taker"); err != nil {
		t.Fatal(err)
	}
	if err := w.checkFence(); !errors.Is(err, ErrFenced) {
		t.Fatalf("check after the fence: %v, want ErrFenced", err)
	}

	other := DefaultConfig(t.TempDir())
	other.Fence = true
	other.FS = wrappedFS{OSFS()}
	w2, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w2.fenceCached {
		t.Fatal("a file system other than the OS's reads FENCE cached")
	}

	// A wrapper that only observes (the broker's byte counting) says so with Unwrap:
	// the OS's page cache still serves the check.
	observed := DefaultConfig(t.TempDir())
	observed.Fence = true
	observed.FS = unwrappingFS{OSFS()}
	w3, err := Open(observed)
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	if w3.fenceCached != sharedPageCache(observed.Dir) {
		t.Fatalf("through an observing wrapper: fenceCached %v, sharedPageCache %v", w3.fenceCached, sharedPageCache(observed.Dir))
	}
}

// unwrappingFS is the OS file system behind a Wrapper.
type unwrappingFS struct{ FS }

func (u unwrappingFS) Unwrap() FS { return u.FS }

// wrappedFS is the OS file system behind another type (as a test model or a counting
// wrapper would be).
type wrappedFS struct{ FS }
