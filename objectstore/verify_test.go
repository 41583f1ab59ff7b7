package objectstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/localfs"
)

func TestVerify(t *testing.T) {
	ctx := context.Background()
	s, err := localfs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", bytes.NewReader([]byte("12345")), 5); err != nil {
		t.Fatal(err)
	}
	if err := objectstore.Verify(ctx, s, "k", 5); err != nil {
		t.Fatalf("the object put: %v", err)
	}
	if err := objectstore.Verify(ctx, s, "k", 6); !errors.Is(err, objectstore.ErrMismatch) {
		t.Fatalf("another size: %v", err)
	}
	if err := objectstore.Verify(ctx, s, "missing", 5); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("a missing key: %v", err)
	}
	if objectstore.IsTransient(objectstore.ErrMismatch) {
		t.Fatal("a mismatch is retried on the same key")
	}
}
