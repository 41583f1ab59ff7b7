package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// waitView waits until cond holds for the client's View, following its Changed channel.
func waitView(t *testing.T, c *ctlclient.Client, what string, cond func(*metadata.View) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ch := c.Changed()
		if cond(c.View()) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s (view version %d)", what, c.View().Version)
		}
	}
}

// TestObjectManifestCluster runs uploads through the Client against a 3-controller
// quorum: prepare → commit shows up in a watching client's View; the rules hold over
// the API; a leader change between prepare and commit does not matter; a broker that
// registered again cannot commit what it prepared before; raising the log starts
// makes the objects below them garbage, which GC deletes.
func TestObjectManifestCluster(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.waitLeader()
	ctx := ctxT(t)
	b1, b2 := tc.broker(1, "a"), tc.broker(2, "b")
	watcher := tc.client(-1, nil, tc.follower(leader)) // watches a follower
	var _ metadata.ObjectManifest = b1

	top, err := b1.CreateTopic(ctx, metadata.TopicSpec{Name: "up", Partitions: 2, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}

	// Prepare → commit → a watching client sees the object and the ranges.
	o, err := b1.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.ID == 0 || o.Key != ObjectKey(o.ID) || o.State != metadata.ObjectPrepared || o.Broker != 1 || o.Epoch != b1.Epoch() {
		t.Fatalf("prepared %+v", o)
	}
	if got, ok := b1.View().Object(o.ID); !ok || got != o {
		t.Fatalf("own view after prepare: %+v %v", got, ok)
	}
	ranges := []metadata.PartitionRange{
		{Topic: top.ID, Partition: 0, FirstOffset: 0, LastOffset: 99, MaxTimestamp: 1_700_000_000_000, Bytes: 4 << 20},
		{Topic: top.ID, Partition: 1, FirstOffset: 0, LastOffset: 9, MaxTimestamp: 1_700_000_000_001, Bytes: 4 << 20},
	}
	if err := b1.CommitObject(ctx, o.ID, 8<<20, ranges); err != nil {
		t.Fatal(err)
	}
	if got, _ := b1.View().Object(o.ID); got.State != metadata.ObjectCommitted { // read your writes
		t.Fatalf("own view after commit: %+v", got)
	}
	waitView(t, watcher, "the committed object in the watcher's view", func(v *metadata.View) bool {
		got, ok := v.Object(o.ID)
		tp := v.TopicByID(top.ID)
		return ok && got.State == metadata.ObjectCommitted && got.Size == 8<<20 && got.Key == o.Key && tp != nil &&
			len(tp.Partitions[0].Objects) == 1 && tp.Partitions[0].Objects[0].Equal(metadata.ObjectRange{Object: o.ID, FirstOffset: 0, LastOffset: 99, MaxTimestamp: 1_700_000_000_000, Bytes: 4 << 20}) &&
			len(tp.Partitions[1].Objects) == 1 && tp.Partitions[1].UploadedThrough() == 10
	})

	// Refusals over the API keep their sentinels.
	if err := b1.CommitObject(ctx, o.ID, 8<<20, ranges); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("commit twice: %v", err)
	}
	o2, err := b1.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.CommitObject(ctx, o2.ID, 1, []metadata.PartitionRange{{Topic: top.ID, Partition: 0, FirstOffset: 100, LastOffset: 199}}); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("commit of another broker's object: %v", err)
	}
	if err := b1.CommitObject(ctx, o2.ID, 1, []metadata.PartitionRange{{Topic: top.ID, Partition: 0, FirstOffset: 101, LastOffset: 199}}); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("commit with a gap: %v", err)
	}
	if err := b1.CommitObject(ctx, o2.ID, 1, []metadata.PartitionRange{{Topic: metadata.TopicID{9}, Partition: 0, FirstOffset: 0, LastOffset: 1}}); !errors.Is(err, metadata.ErrObjectRejected) || !errors.Is(err, metadata.ErrUnknownTopic) {
		t.Fatalf("commit to an unknown topic: %v", err)
	}
	if err := b1.CommitObject(ctx, o2.ID, 1, []metadata.PartitionRange{{Topic: top.ID, Partition: 0, FirstOffset: 100, LastOffset: 199}}); err != nil {
		t.Fatal(err)
	}

	// A leader change between prepare and commit.
	o3, err := b1.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tc.stop(leader)
	if nl := tc.waitLeader(); nl == leader {
		t.Fatal("the stopped controller still leads")
	}
	if err := b1.CommitObject(ctx, o3.ID, 1, []metadata.PartitionRange{{Topic: top.ID, Partition: 0, FirstOffset: 200, LastOffset: 299}}); err != nil {
		t.Fatalf("commit after a leader change: %v", err)
	}
	if p := b1.View().TopicByID(top.ID).Partitions[0]; p.UploadedThrough() != 300 || len(p.Objects) != 3 {
		t.Fatalf("t/0 after the leader change: %+v", p.Objects)
	}

	// A broker that registered again cannot commit what it prepared before.
	o4, err := b1.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldEpoch := b1.Epoch()
	if err := b1.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	if b1.Epoch() != oldEpoch+1 {
		t.Fatalf("epoch %d after re-registering from %d", b1.Epoch(), oldEpoch)
	}
	next := []metadata.PartitionRange{{Topic: top.ID, Partition: 0, FirstOffset: 300, LastOffset: 399}}
	if err := b1.CommitObject(ctx, o4.ID, 1, next); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("commit of an object prepared under the old epoch: %v", err)
	}
	// The old registration itself is refused as fenced (both codes cross the API).
	var resp ctlwire.ObjectResponse
	err = tc.post(ctlwire.PathCommitObject, ctlwire.CommitObjectRequest{ID: o4.ID, Broker: 1, Epoch: oldEpoch, Size: 1, Ranges: next}, &resp)
	if !errors.Is(err, metadata.ErrObjectRejected) || !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("commit from the old epoch: %v", err)
	}
	if err := tc.post(ctlwire.PathPrepareObject, ctlwire.PrepareObjectRequest{Broker: 1, Epoch: oldEpoch}, &resp); !errors.Is(err, metadata.ErrObjectRejected) || !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("prepare from the old epoch: %v", err)
	}
	if g := b1.View().GarbageObjects(); len(g) != 1 || g[0].ID != o4.ID {
		t.Fatalf("garbage %+v, want object %d", g, o4.ID)
	}
	// Garbage collection: delete it (twice: a retry is harmless).
	for i := 0; i < 2; i++ {
		if err := b1.DeleteObjects(ctx, []uint64{o4.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := b1.View().Object(o4.ID); ok {
		t.Fatal("deleted object still in the view")
	}
	o5, err := b1.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o5.ID <= o4.ID {
		t.Fatalf("object ID %d reused (deleted %d)", o5.ID, o4.ID)
	}
	if err := b1.CommitObject(ctx, o5.ID, 1, next); err != nil {
		t.Fatal(err)
	}

	// Retention: raise the log start offsets, delete what they left unreferenced.
	if err := b2.DeleteObjects(ctx, []uint64{o.ID}); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("deleting live data: %v", err)
	}
	// The log start drops the ranges wholly below it: o2 is garbage at once, o stays
	// referenced by partition 1, whose offsets 0..9 are live.
	if err := b2.SetLogStartOffset(ctx, top.ID, 0, 200); err != nil {
		t.Fatal(err)
	}
	if p := b2.View().TopicByID(top.ID).Partitions[0]; len(p.Objects) != 2 || p.Objects[0].Object != o3.ID || p.LogStartOffset != 200 {
		t.Fatalf("partition 0 after log start 200: %+v", p)
	}
	if g := b2.View().GarbageObjects(); len(g) != 1 || g[0].ID != o2.ID {
		t.Fatalf("garbage %+v, want %d", g, o2.ID)
	}
	if err := b2.DeleteObjects(ctx, []uint64{o.ID, o2.ID}); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("deleting an object with live data of partition 1: %v", err)
	}
	if err := b2.SetLogStartOffset(ctx, top.ID, 1, 10); err != nil {
		t.Fatal(err)
	}
	if e := b2.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %+v: every range below a log start was dropped", e)
	}
	gc := b2.View().GarbageObjects()
	if len(gc) != 2 || gc[0].ID != o.ID || gc[1].ID != o2.ID {
		t.Fatalf("garbage %+v, want %d and %d", gc, o.ID, o2.ID)
	}
	if err := b2.DeleteObjects(ctx, []uint64{gc[0].ID, gc[1].ID}); err != nil {
		t.Fatal(err)
	}
	waitView(t, watcher, "retention in the watcher's view", func(v *metadata.View) bool {
		tp := v.TopicByID(top.ID)
		_, okA := v.Object(o.ID)
		return !okA && tp != nil && len(tp.Partitions[0].Objects) == 2 && tp.Partitions[0].Objects[0].Object == o3.ID &&
			len(tp.Partitions[1].Objects) == 0 && tp.Partitions[0].UploadedThrough() == 400
	})

	// A client that is not a registered broker cannot prepare.
	if _, err := watcher.PrepareObject(ctx); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("prepare from an admin client: %v", err)
	}
}
