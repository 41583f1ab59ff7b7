package localfs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/objectstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objectstore.Store {
		s, err := localfs.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestConformanceWrapped(t *testing.T) {
	// Retrying and Instrumented around a store pass the same suite.
	storetest.RunWith(t, storetest.Options{ManyKeys: 1001, LargeSize: 4 << 20}, func(t *testing.T) objectstore.Store {
		s, err := localfs.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		in, err := objectstore.NewInstrumented(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return objectstore.NewRetrying(in, objectstore.DefaultRetryPolicy())
	})
}

func TestLayoutAndTempFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := localfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "a/b/c", bytes.NewReader([]byte("hello")), 5); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "objects", "a", "b", "c"))
	if err != nil || string(b) != "hello" {
		t.Fatalf("object file: %q %v", b, err)
	}
	// A failed put leaves no temporary file behind.
	if err := s.Put(ctx, "a/b/d", bytes.NewReader([]byte("short")), 10); err == nil {
		t.Fatal("short put succeeded")
	}
	ents, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("tmp after failed put: %v %v", ents, err)
	}
	// Stale temporary files (a crash in the middle of a put) are removed by Open; fresh
	// ones (another process's put in progress) are not.
	stale := filepath.Join(dir, "tmp", "put-stale")
	fresh := filepath.Join(dir, "tmp", "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := localfs.Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale temp file: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh temp file: %v", err)
	}
	// Temporary files are never listed.
	list, err := s.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].Key != "a/b/c" {
		t.Fatalf("list: %+v %v", list, err)
	}
}

func TestKeyAlsoDirectory(t *testing.T) {
	// The one layout limit: a key cannot be both an object and a "directory".
	s, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Put(ctx, "x/y", bytes.NewReader(nil), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "x", bytes.NewReader(nil), 0); !errors.Is(err, objectstore.ErrInvalidKey) {
		t.Fatalf("put over a directory: %v", err)
	}
	if err := s.Put(ctx, "x/y/z", bytes.NewReader(nil), 0); !errors.Is(err, objectstore.ErrInvalidKey) {
		t.Fatalf("put below an object: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := localfs.Open(""); err == nil {
		t.Fatal("open of an empty path succeeded")
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := localfs.Open(f); err == nil {
		t.Fatal("open of a file succeeded")
	}
}
