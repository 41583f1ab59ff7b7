package metatest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// Object manifests through For: prepared for the broker's registration, committed by the
// controller's rules with the producer snapshot, published in a new View (the old one
// unchanged), deletable once garbage; a fenced registration is refused.
func TestStoreObjectManifests(t *testing.T) {
	ctx := context.Background()
	s := NewStore(1, 2)
	if err := s.RegisterBroker(ctx, metadata.Broker{ID: 1, Host: "h", Port: 1, Epoch: 7}); err != nil {
		t.Fatal(err)
	}
	top, err := s.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	b1 := s.For(1)
	o, err := b1.PrepareObject(ctx)
	if err != nil || o.ID != 1 || o.Broker != 1 || o.Epoch != 7 || o.State != metadata.ObjectPrepared {
		t.Fatalf("prepare: %+v %v", o, err)
	}
	if got, ok := s.View().Object(o.ID); !ok || got != o {
		t.Fatalf("prepared object in the view: %+v %v", got, ok)
	}
	before := s.View()
	r := metadata.PartitionRange{Topic: top.ID, Partition: 1, FirstOffset: 0, LastOffset: 9, Bytes: 100,
		Producers: &metadata.ProducerSnapshot{Offset: 10, Producers: []metadata.ProducerState{{ID: 5, Batches: [][3]int64{{0, 9, 0}}}}}}
	bad := r
	bad.FirstOffset = 3
	if err := b1.CommitObject(ctx, o.ID, 200, []metadata.PartitionRange{bad}); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("a range that does not continue the manifest: %v", err)
	}
	if err := b1.CommitObject(ctx, o.ID, 200, []metadata.PartitionRange{r}); err != nil {
		t.Fatal(err)
	}
	p := s.View().Topics["t"].Partitions[1]
	if !reflect.DeepEqual(p.Objects, []metadata.ObjectRange{{Object: o.ID, LastOffset: 9, Bytes: 100}}) || !reflect.DeepEqual(p.Producers, r.Producers) {
		t.Fatalf("partition after the commit: %+v", p)
	}
	if got, _ := s.View().Object(o.ID); got.State != metadata.ObjectCommitted || got.Size != 200 {
		t.Fatalf("committed object %+v", got)
	}
	if bp := before.Topics["t"].Partitions[1]; bp.Objects != nil || bp.Producers != nil || before.Objects[o.ID].State != metadata.ObjectPrepared {
		t.Fatal("a published view changed")
	}
	if err := b1.DeleteObjects(ctx, []uint64{o.ID}); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("deleting a referenced object: %v", err)
	}

	// Broker 2 never registered an epoch (0); once fenced its prepares are refused, and
	// its unused prepared object is garbage, which may be deleted.
	o2, err := s.For(2).PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Fence(2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.For(2).PrepareObject(ctx); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("prepare by a fenced broker: %v", err)
	}
	if g := s.View().GarbageObjects(); len(g) != 1 || g[0].ID != o2.ID {
		t.Fatalf("garbage %+v", g)
	}
	if err := b1.DeleteObjects(ctx, []uint64{o2.ID}); err != nil {
		t.Fatal(err)
	}
	v := s.View().Version
	if err := b1.DeleteObjects(ctx, []uint64{o2.ID}); err != nil || s.View().Version != v {
		t.Fatalf("deleting again: %v, version %d → %d", err, v, s.View().Version)
	}
}
