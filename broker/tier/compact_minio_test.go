package tier

import (
	"context"
	"fmt"
	"testing"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/s3"
	"github.com/weir-io/weir/objectstore/s3/s3test"
)

// minioStore is a store on a fresh bucket of a MinIO server that lives as long as tb.
func minioStore(tb testing.TB) objectstore.Store {
	tb.Helper()
	m := s3test.Start(tb)
	store, err := s3.New(context.Background(), m.Config(m.NewBucket(tb)))
	if err != nil {
		tb.Fatal(err)
	}
	return store
}

// TestCompactOnMinIO runs the cleaner on a real S3 API server: the cleaned object is
// written with a PUT and read back with ranged GETs through the S3 client (the sparse
// object's index and footer as S3 returns them), and the objects it replaced are deleted
// from the bucket by collection, leaving exactly the objects the manifest names.
func TestCompactOnMinIO(t *testing.T) {
	store := minioStore(t)
	r := compactRig(t, rigOpts{wrap: func(objectstore.Store) objectstore.Store { return store }})
	r.produceABC(t)
	if n := len(r.keys(t)); n != 5 {
		t.Fatalf("%d objects in the bucket after 5 uploads", n)
	}

	r.tr.CompactRound()
	m := r.manifest().Objects
	if len(m) != 1 || !m[0].Compacted || m[0].FirstOffset != 0 || m[0].LastOffset != 12 {
		t.Fatalf("manifest after the clean %+v, want one compacted range 0..12", m)
	}
	want := map[int64]string{9: "a=a3", 10: "b=b3", 12: "c=<tombstone>"}
	if got := r.coldRecords(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cold records after the clean: %v, want %v", got, want)
	}
	// The replaced objects are unreferenced: two collection rounds (the first marks,
	// the second deletes) leave only the cleaned one in the bucket.
	r.retain()
	r.retain()
	v := r.meta.View()
	obj, ok := v.Object(m[0].Object)
	if !ok {
		t.Fatalf("the cleaned range's object %d has no record", m[0].Object)
	}
	r.checkKeys(t, "after collection", obj.Key)
}
