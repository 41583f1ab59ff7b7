package tier

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/faulty"
)

// A broker whose lease is not valid may be cut off from the controllers, its view
// arbitrarily old: its garbage collection deletes nothing (neither its own abandoned
// prepared objects nor stray keys), and resumes once the lease is back.
func TestGarbageCollectionNeedsALease(t *testing.T) {
	var fs *faulty.Store
	r := newUpRig(t, func(s objectstore.Store) objectstore.Store {
		fs = faulty.New(s, 1)
		return fs
	})
	lease := false
	r.tr.d.LeaseOK = func() bool { return lease }
	ctx := context.Background()
	r.produce(t, 2)
	// A PUT that lands late leaves an abandoned prepared object with a key.
	fs.FailNext(faulty.Put, 1, faulty.LatePut)
	if _, err := r.tr.uploadOnce(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first upload: %v", err)
	}
	if err := fs.DeliverLate(ctx); err != nil {
		t.Fatal(err)
	}
	keys := func() int {
		infos, err := r.objects.List(ctx, "objects/")
		if err != nil {
			t.Fatal(err)
		}
		return len(infos)
	}
	for i := 0; i < 3; i++ {
		r.tr.collectGarbage()
	}
	if n := keys(); n != 1 {
		t.Fatalf("without a lease: %d keys, want the abandoned one kept", n)
	}
	if n := len(r.meta.View().Objects); n != 1 {
		t.Fatalf("without a lease: %d object records, want the prepared one kept", n)
	}
	lease = true
	for i := 0; i < 3; i++ {
		r.tr.collectGarbage()
	}
	if n := keys(); n != 0 {
		t.Fatalf("with the lease back: %d keys, want the abandoned one deleted", n)
	}
}
