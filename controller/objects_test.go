package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// objectFSM is an FSM with brokers 1 and 2 (epoch 1, active), topic "t" (id 7, three
// partitions) and topic "u" (id 8, one partition).
func objectFSM(t *testing.T) *FSM {
	t.Helper()
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h1", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h2", Port: 2, Rack: "b"})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(7), Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 2}}}})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "u", ID: topicID(8), Partitions: []metadata.Partition{{Leader: 2}}}})
	return f
}

func rng(topic byte, partition int32, first, last int64) metadata.PartitionRange {
	return metadata.PartitionRange{Topic: topicID(topic), Partition: partition, FirstOffset: first, LastOffset: last}
}

func prepare(t *testing.T, f *FSM, broker int32, epoch int64) metadata.Object {
	t.Helper()
	return mustApply(t, f, &prepareObjectCmd{Broker: broker, Epoch: epoch}).Value.(metadata.Object)
}

// commitNew prepares and commits an object of broker 1 (epoch 1) with the ranges.
func commitNew(t *testing.T, f *FSM, size int64, ranges ...metadata.PartitionRange) uint64 {
	t.Helper()
	o := prepare(t, f, 1, 1)
	mustApply(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: size, Ranges: ranges})
	return o.ID
}

func manifest(f *FSM, topic string, partition int) []metadata.ObjectRange {
	return f.View().Topics[topic].Partitions[partition].Objects
}

// refuse applies c, expects a refusal matching every sentinel in want, and checks that
// the state did not change.
func refuse(t *testing.T, f *FSM, c command, want ...error) {
	t.Helper()
	before := stateJSON(t, f.State())
	res := apply(t, f, c)
	if res.Err == nil {
		t.Fatalf("%T %+v: accepted", c, c)
	}
	for _, w := range want {
		if !errors.Is(res.Err, w) {
			t.Fatalf("%T %+v: %v, want %v", c, c, res.Err, w)
		}
	}
	if after := stateJSON(t, f.State()); after != before {
		t.Fatalf("%T %+v: refused (%v) but changed the state:\n%s\n%s", c, c, res.Err, before, after)
	}
}

func TestObjectKeyAndRange(t *testing.T) {
	if k := ObjectKey(42); k != "objects/00000000000000000042.obj" {
		t.Fatalf("key %q", k)
	}
	if k := ObjectKey(^uint64(0)); k != "objects/18446744073709551615.obj" {
		t.Fatalf("key %q", k)
	}
	p := metadata.Partition{}
	if p.UploadedThrough() != -1 {
		t.Fatal("empty manifest")
	}
	p.Objects = []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 9}, {Object: 2, FirstOffset: 10, LastOffset: 19}}
	if p.UploadedThrough() != 20 {
		t.Fatalf("uploaded through %d", p.UploadedThrough())
	}
}

func TestFSMPrepareObject(t *testing.T) {
	f := objectFSM(t)
	res := mustApply(t, f, &prepareObjectCmd{Broker: 1, Epoch: 1})
	o := res.Value.(metadata.Object)
	want := metadata.Object{ID: 1, Key: "objects/00000000000000000001.obj", State: metadata.ObjectPrepared, Broker: 1, Epoch: 1}
	if o != want {
		t.Fatalf("prepared %+v, want %+v", o, want)
	}
	if got, ok := f.View().Object(1); !ok || got != want || res.Version != f.View().Version {
		t.Fatalf("view has %+v (%v)", got, ok)
	}
	if o2 := prepare(t, f, 2, 1); o2.ID != 2 || o2.Key != ObjectKey(2) {
		t.Fatalf("second object %+v", o2)
	}

	// Only an active broker in its current epoch.
	refuse(t, f, &prepareObjectCmd{Broker: 1, Epoch: 2}, metadata.ErrObjectRejected, metadata.ErrFenced)
	refuse(t, f, &prepareObjectCmd{Broker: 1, Epoch: 0}, metadata.ErrObjectRejected, metadata.ErrFenced)
	refuse(t, f, &prepareObjectCmd{Broker: 9, Epoch: 1}, metadata.ErrObjectRejected, metadata.ErrFenced)
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h1", Port: 1, Rack: "a"}) // epoch 2
	refuse(t, f, &prepareObjectCmd{Broker: 1, Epoch: 1}, metadata.ErrObjectRejected, metadata.ErrFenced)
	mustApply(t, f, &fenceBrokerCmd{ID: 2, Epoch: 1})
	refuse(t, f, &prepareObjectCmd{Broker: 2, Epoch: 1}, metadata.ErrObjectRejected, metadata.ErrFenced)
	if o := prepare(t, f, 1, 2); o.ID != 3 {
		t.Fatalf("refusals used IDs: next is %d", o.ID)
	}
}

func TestFSMCommitObject(t *testing.T) {
	f := objectFSM(t)

	t.Run("two partitions in one object", func(t *testing.T) {
		o := prepare(t, f, 1, 1)
		old := f.View()
		res := mustApply(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 4096, Ranges: []metadata.PartitionRange{rng(7, 0, 0, 99), rng(7, 1, 0, 9)}})
		got := res.Value.(metadata.Object)
		if got.State != metadata.ObjectCommitted || got.Size != 4096 || got.Key != o.Key {
			t.Fatalf("committed %+v", got)
		}
		if v, _ := f.View().Object(o.ID); v != got {
			t.Fatalf("view has %+v", v)
		}
		if m := manifest(f, "t", 0); !reflect.DeepEqual(m, []metadata.ObjectRange{{Object: o.ID, FirstOffset: 0, LastOffset: 99}}) {
			t.Fatalf("t/0 manifest %v", m)
		}
		if m := manifest(f, "t", 1); !reflect.DeepEqual(m, []metadata.ObjectRange{{Object: o.ID, FirstOffset: 0, LastOffset: 9}}) {
			t.Fatalf("t/1 manifest %v", m)
		}
		if m := manifest(f, "t", 2); m != nil {
			t.Fatalf("t/2 manifest %v", m)
		}
		// Views are immutable: the old one still has the prepared object, no ranges.
		if ov, _ := old.Object(o.ID); ov.State != metadata.ObjectPrepared || old.Topics["t"].Partitions[0].Objects != nil {
			t.Fatalf("the commit leaked into an old view: %+v", ov)
		}
		// Committing twice is refused, with the same or other ranges.
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 4096, Ranges: []metadata.PartitionRange{rng(7, 0, 0, 99), rng(7, 1, 0, 9)}}, metadata.ErrObjectRejected)
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: []metadata.PartitionRange{rng(7, 0, 100, 120)}}, metadata.ErrObjectRejected)
	})

	t.Run("continuity", func(t *testing.T) {
		// t/0 is uploaded through 100.
		o := prepare(t, f, 1, 1)
		commit := func(r ...metadata.PartitionRange) *commitObjectCmd {
			return &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: r}
		}
		refuse(t, f, commit(rng(7, 0, 101, 150)), metadata.ErrObjectRejected) // gap
		refuse(t, f, commit(rng(7, 0, 99, 150)), metadata.ErrObjectRejected)  // overlap
		refuse(t, f, commit(rng(7, 0, 0, 150)), metadata.ErrObjectRejected)   // overlap from the start
		refuse(t, f, commit(rng(7, 0, 100, 99)), metadata.ErrObjectRejected)  // first > last
		refuse(t, f, commit(rng(7, 2, 1, 5)), metadata.ErrObjectRejected)     // empty manifest, log start 0: must start at 0
		refuse(t, f, commit(rng(7, 2, -1, 5)), metadata.ErrObjectRejected)    // negative
		refuse(t, f, commit(rng(7, 3, 0, 5)), metadata.ErrObjectRejected, metadata.ErrUnknownTopic)
		refuse(t, f, commit(rng(7, -1, 0, 5)), metadata.ErrObjectRejected, metadata.ErrUnknownTopic)
		refuse(t, f, commit(rng(99, 0, 0, 5)), metadata.ErrObjectRejected, metadata.ErrUnknownTopic)
		refuse(t, f, commit(), metadata.ErrObjectRejected)
		refuse(t, f, commit(rng(7, 0, 100, 110), rng(7, 0, 111, 120)), metadata.ErrObjectRejected) // a partition twice
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: -1, Ranges: []metadata.PartitionRange{rng(7, 0, 100, 110)}}, metadata.ErrObjectRejected)
		// One bad range refuses the whole commit (refuse checks nothing changed).
		refuse(t, f, commit(rng(7, 0, 100, 110), rng(7, 1, 11, 20), rng(8, 0, 0, 5)), metadata.ErrObjectRejected)
		refuse(t, f, commit(rng(8, 0, 0, 5), rng(7, 0, 100, 110), rng(99, 0, 0, 1)), metadata.ErrObjectRejected, metadata.ErrUnknownTopic)

		mustApply(t, f, commit(rng(7, 0, 100, 100), rng(7, 1, 10, 20), rng(8, 0, 0, 5)))
		if got := f.View().Topics["t"].Partitions[0].UploadedThrough(); got != 101 {
			t.Fatalf("t/0 uploaded through %d", got)
		}
		if got := f.View().Topics["u"].Partitions[0].UploadedThrough(); got != 6 {
			t.Fatalf("u/0 uploaded through %d", got)
		}
	})

	t.Run("first object straddles the log start", func(t *testing.T) {
		mustApply(t, f, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 2, Offset: 50})
		o := prepare(t, f, 1, 1)
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: []metadata.PartitionRange{rng(7, 2, 51, 60)}}, metadata.ErrObjectRejected)
		mustApply(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: []metadata.PartitionRange{rng(7, 2, 40, 60)}})
		if m := manifest(f, "t", 2); len(m) != 1 || m[0].FirstOffset != 40 || m[0].LastOffset != 60 {
			t.Fatalf("t/2 manifest %v", m)
		}
		// From then on only continuity counts.
		o = prepare(t, f, 1, 1)
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: []metadata.PartitionRange{rng(7, 2, 50, 70)}}, metadata.ErrObjectRejected)
		mustApply(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: []metadata.PartitionRange{rng(7, 2, 61, 70)}})
	})

	t.Run("who may commit", func(t *testing.T) {
		o := prepare(t, f, 1, 1)
		ok := []metadata.PartitionRange{rng(7, 2, 71, 80)}
		refuse(t, f, &commitObjectCmd{ID: 999, Broker: 1, Epoch: 1, Size: 1, Ranges: ok}, metadata.ErrObjectRejected)  // unknown object
		refuse(t, f, &commitObjectCmd{ID: 0, Broker: 1, Epoch: 1, Size: 1, Ranges: ok}, metadata.ErrObjectRejected)    // no object 0
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 2, Epoch: 1, Size: 1, Ranges: ok}, metadata.ErrObjectRejected) // another broker
		// Stale epoch: broker 1 registered again.
		mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h1", Port: 1, Rack: "a"}) // epoch 2
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 1, Ranges: ok}, metadata.ErrObjectRejected, metadata.ErrFenced)
		refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 2, Size: 1, Ranges: ok}, metadata.ErrObjectRejected) // prepared under epoch 1
		if g := f.View().GarbageObjects(); len(g) != 1 || g[0].ID != o.ID {
			t.Fatalf("garbage %+v, want the stale prepared object %d", g, o.ID)
		}
		// Fenced broker: same epoch, but fenced.
		o2 := prepare(t, f, 2, 1)
		mustApply(t, f, &fenceBrokerCmd{ID: 2, Epoch: 1})
		refuse(t, f, &commitObjectCmd{ID: o2.ID, Broker: 2, Epoch: 1, Size: 1, Ranges: ok}, metadata.ErrObjectRejected, metadata.ErrFenced)
		if g := f.View().GarbageObjects(); len(g) != 2 || g[0].ID != o.ID || g[1].ID != o2.ID {
			t.Fatalf("garbage %+v", g)
		}
		// The current registration commits its own.
		o3 := prepare(t, f, 1, 2)
		if g := f.View().GarbageObjects(); len(g) != 2 {
			t.Fatalf("a live registration's prepared object is garbage: %+v", g)
		}
		mustApply(t, f, &commitObjectCmd{ID: o3.ID, Broker: 1, Epoch: 2, Size: 1, Ranges: ok})
	})
}

func garbageIDs(f *FSM) []uint64 {
	var out []uint64
	for _, o := range f.View().GarbageObjects() {
		out = append(out, o.ID)
	}
	return out
}

func expiredIDs(f *FSM) []uint64 {
	var out []uint64
	for _, o := range f.View().ExpiredObjects() {
		out = append(out, o.ID)
	}
	return out
}

func TestFSMDeleteObjects(t *testing.T) {
	f := objectFSM(t)
	a := commitNew(t, f, 10, rng(7, 0, 0, 9), rng(7, 1, 0, 4))
	b := commitNew(t, f, 10, rng(7, 0, 10, 19))
	c := commitNew(t, f, 10, rng(7, 0, 20, 29), rng(7, 1, 5, 9))
	p := prepare(t, f, 1, 1).ID
	if e := f.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired with log start 0: %+v", e)
	}

	// Nothing below the log start offset yet.
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{a}}, metadata.ErrObjectRejected)
	old := f.View()
	oldT0 := append([]metadata.ObjectRange(nil), manifest(f, "t", 0)...)
	mustApply(t, f, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 25})
	// The log start drops t/0's ranges wholly below 25 (c's 20..29 straddles it and
	// stays); a stays referenced by t/1 alone.
	if m := manifest(f, "t", 0); len(m) != 1 || m[0].Object != c || m[0].FirstOffset != 20 {
		t.Fatalf("t/0 manifest %v after log start 25", m)
	}
	if m := manifest(f, "t", 1); len(m) != 2 || m[0].Object != a || m[1].Object != c {
		t.Fatalf("t/1 manifest %v", m)
	}
	if p := old.Topics["t"].Partitions[0]; !reflect.DeepEqual(p.Objects, oldT0) || len(oldT0) != 3 || p.LogStartOffset != 0 {
		t.Fatalf("the log start leaked into an old view: %+v", p)
	}
	if g := old.GarbageObjects(); len(g) != 0 {
		t.Fatalf("old view's garbage %+v", g)
	}
	// b is garbage although a, in front of it in t/0, is pinned by t/1's live data.
	if g := garbageIDs(f); !reflect.DeepEqual(g, []uint64{b}) {
		t.Fatalf("garbage %v, want %d", g, b)
	}
	if e := f.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %+v: every range below a log start was dropped", e)
	}
	// a still holds live offsets of t/1 (log start 0); c is live.
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{a}}, metadata.ErrObjectRejected)
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{b, a}}, metadata.ErrObjectRejected)
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{b, c}}, metadata.ErrObjectRejected)
	if res := mustApply(t, f, &deleteObjectsCmd{IDs: []uint64{b}}); res.Value.(int) != 1 {
		t.Fatalf("deleted %v", res.Value)
	}
	if _, ok := f.View().Object(b); ok {
		t.Fatal("deleted object still in the view")
	}

	mustApply(t, f, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 1, Offset: 5})
	if m := manifest(f, "t", 1); len(m) != 1 || m[0].Object != c {
		t.Fatalf("t/1 manifest %v after log start 5", m)
	}
	if g := garbageIDs(f); !reflect.DeepEqual(g, []uint64{a}) {
		t.Fatalf("garbage %v, want %d", g, a)
	}
	if e := f.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %+v", e)
	}
	// c is not below the log start.
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{a, c}}, metadata.ErrObjectRejected)
	// Unknown (never handed out) IDs.
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{a, 999}}, metadata.ErrObjectRejected)
	refuse(t, f, &deleteObjectsCmd{IDs: []uint64{0}}, metadata.ErrObjectRejected)
	refuse(t, f, &deleteObjectsCmd{}, metadata.ErrObjectRejected)

	old = f.View()
	res := mustApply(t, f, &deleteObjectsCmd{IDs: []uint64{a, p}}) // and a prepared one
	if res.Value.(int) != 2 {
		t.Fatalf("deleted %v", res.Value)
	}
	for _, id := range []uint64{a, p} {
		if _, ok := f.View().Object(id); ok {
			t.Fatalf("deleted object %d still in the view", id)
		}
	}
	if _, ok := old.Object(a); !ok {
		t.Fatal("the delete leaked into an old view's objects")
	}
	for part := range 2 {
		if m := manifest(f, "t", part); len(m) != 1 || m[0].Object != c {
			t.Fatalf("t/%d manifest %v", part, m)
		}
	}
	if f.View().Topics["t"].Partitions[0].UploadedThrough() != 30 {
		t.Fatalf("t/0 manifest %v", manifest(f, "t", 0))
	}
	// Deleting again changes nothing and succeeds (a retry).
	v := f.View().Version
	if res := mustApply(t, f, &deleteObjectsCmd{IDs: []uint64{a, b, b}}); res.Value.(int) != 0 || res.Version != v {
		t.Fatalf("second delete: %+v", res)
	}
	// The next upload continues after c.
	refuse(t, f, &commitObjectCmd{ID: prepare(t, f, 1, 1).ID, Broker: 1, Epoch: 1, Size: 1, Ranges: []metadata.PartitionRange{rng(7, 0, 0, 40)}}, metadata.ErrObjectRejected)

	// An object shared with another topic stays referenced by it until its log start
	// passes the range too; the partitions' later objects are garbage meanwhile.
	f2 := objectFSM(t)
	x := commitNew(t, f2, 1, rng(7, 0, 0, 9))
	y := commitNew(t, f2, 1, rng(7, 0, 10, 19), rng(8, 0, 0, 9))
	z := commitNew(t, f2, 1, rng(7, 0, 20, 29))
	mustApply(t, f2, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 30})
	if m := manifest(f2, "t", 0); m != nil {
		t.Fatalf("t/0 manifest %v", m)
	}
	if g := garbageIDs(f2); !reflect.DeepEqual(g, []uint64{x, z}) {
		t.Fatalf("garbage %v, want %d %d", g, x, z)
	}
	refuse(t, f2, &deleteObjectsCmd{IDs: []uint64{z, y, x}}, metadata.ErrObjectRejected) // y holds live u/0 data
	mustApply(t, f2, &setLogStartOffsetCmd{TopicID: topicID(8), Partition: 0, Offset: 10})
	if m := manifest(f2, "u", 0); m != nil {
		t.Fatalf("u/0 manifest %v", m)
	}
	if g := garbageIDs(f2); !reflect.DeepEqual(g, []uint64{x, y, z}) {
		t.Fatalf("garbage %v", g)
	}
	if e := f2.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %+v", e)
	}
	mustApply(t, f2, &deleteObjectsCmd{IDs: []uint64{z, y, x}})
	if o := f2.View().Objects; o != nil {
		t.Fatalf("objects left: %+v", o)
	}
	// Empty again: the next object may start anywhere up to the log start.
	commitNew(t, f2, 1, rng(7, 0, 25, 40))

	// No cascade through trimmed ranges: A holds live data of t/2, B (behind A in t/0)
	// and C (behind B in t/1) are garbage once the log starts pass them.
	f4 := objectFSM(t)
	oa := commitNew(t, f4, 1, rng(7, 0, 0, 9), rng(7, 2, 0, 9))
	ob := commitNew(t, f4, 1, rng(7, 0, 10, 19), rng(7, 1, 0, 9))
	oc := commitNew(t, f4, 1, rng(7, 1, 10, 19))
	mustApply(t, f4, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 20})
	mustApply(t, f4, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 1, Offset: 20})
	if g := garbageIDs(f4); !reflect.DeepEqual(g, []uint64{ob, oc}) {
		t.Fatalf("garbage %v, want %d %d", g, ob, oc)
	}
	if e := f4.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %+v", e)
	}
	refuse(t, f4, &deleteObjectsCmd{IDs: []uint64{oa, ob, oc}}, metadata.ErrObjectRejected)
	mustApply(t, f4, &deleteObjectsCmd{IDs: []uint64{oc, ob}})
	if m := manifest(f4, "t", 2); len(m) != 1 || m[0].Object != oa {
		t.Fatalf("t/2 manifest %v", m)
	}
	mustApply(t, f4, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 2, Offset: 10})
	if g := garbageIDs(f4); !reflect.DeepEqual(g, []uint64{oa}) {
		t.Fatalf("garbage %v, want %d", g, oa)
	}
	mustApply(t, f4, &deleteObjectsCmd{IDs: []uint64{oa}})

	// Ranges committed below a log start raised before stay in the manifests (nothing
	// trims them): retention deletes them from the front only, with the cascade: A holds
	// live data of t/2, so B (behind A in t/0) stays, and C (behind B in t/1) too; the
	// FSM agrees with View.ExpiredObjects. When t/2's log start passes A's range there,
	// the reference index forgets it, and A goes with B and C.
	f5 := objectFSM(t)
	mustApply(t, f5, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 50})
	mustApply(t, f5, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 1, Offset: 50})
	ea := commitNew(t, f5, 1, rng(7, 0, 40, 44), rng(7, 2, 0, 9))
	eb := commitNew(t, f5, 1, rng(7, 0, 45, 49), rng(7, 1, 40, 44))
	ec := commitNew(t, f5, 1, rng(7, 1, 45, 49))
	live := commitNew(t, f5, 1, rng(7, 1, 50, 59))
	if e := f5.View().ExpiredObjects(); len(e) != 0 {
		t.Fatalf("expired %+v", e)
	}
	if g := f5.View().GarbageObjects(); len(g) != 0 {
		t.Fatalf("garbage %+v", g)
	}
	refuse(t, f5, &deleteObjectsCmd{IDs: []uint64{eb, ec}}, metadata.ErrObjectRejected)
	refuse(t, f5, &deleteObjectsCmd{IDs: []uint64{ea, eb, ec}}, metadata.ErrObjectRejected)
	mustApply(t, f5, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 2, Offset: 10})
	if e := expiredIDs(f5); !reflect.DeepEqual(e, []uint64{ea, eb, ec}) {
		t.Fatalf("expired %v, want %d %d %d", e, ea, eb, ec)
	}
	refuse(t, f5, &deleteObjectsCmd{IDs: []uint64{eb}}, metadata.ErrObjectRejected)               // behind ea
	refuse(t, f5, &deleteObjectsCmd{IDs: []uint64{ea, eb, ec, live}}, metadata.ErrObjectRejected) // live is not below the log start
	mustApply(t, f5, &deleteObjectsCmd{IDs: []uint64{ec, eb, ea}})
	if m := manifest(f5, "t", 0); m != nil {
		t.Fatalf("t/0 manifest %v", m)
	}
	if m := manifest(f5, "t", 1); len(m) != 1 || m[0].Object != live {
		t.Fatalf("t/1 manifest %v", m)
	}

	// Topic deletion: the object's ranges go with the topic; the object becomes garbage.
	f3 := objectFSM(t)
	onlyU := commitNew(t, f3, 1, rng(8, 0, 0, 9))
	both := commitNew(t, f3, 1, rng(8, 0, 10, 19), rng(7, 0, 0, 9))
	mustApply(t, f3, &deleteTopicCmd{Name: "u"})
	g := f3.View().GarbageObjects()
	if len(g) != 1 || g[0].ID != onlyU || g[0].State != metadata.ObjectCommitted {
		t.Fatalf("garbage after deleting topic u: %+v", g)
	}
	refuse(t, f3, &deleteObjectsCmd{IDs: []uint64{both}}, metadata.ErrObjectRejected) // still holds live t/0 data
	mustApply(t, f3, &deleteObjectsCmd{IDs: []uint64{onlyU}})
	if g := f3.View().GarbageObjects(); len(g) != 0 {
		t.Fatalf("garbage %+v", g)
	}
	// A new topic named u starts with an empty manifest.
	mustApply(t, f3, &createTopicCmd{Topic: metadata.Topic{Name: "u", ID: topicID(9), Partitions: []metadata.Partition{{Leader: 1}}}})
	commitNew(t, f3, 1, rng(9, 0, 0, 9))
	// Once t/0's log start passes its range, no manifest references the other one.
	mustApply(t, f3, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 10})
	if g := garbageIDs(f3); !reflect.DeepEqual(g, []uint64{both}) {
		t.Fatalf("garbage %v, want %d", g, both)
	}
	mustApply(t, f3, &deleteObjectsCmd{IDs: []uint64{both}})
}

// TestFSMObjectsSnapshotRestore: objects, manifests, the ID counter and the derived
// reference index survive a snapshot; IDs are never reused, not even deleted ones.
func TestFSMObjectsSnapshotRestore(t *testing.T) {
	f := objectFSM(t)
	a := commitNew(t, f, 10, rng(7, 0, 0, 9), rng(7, 1, 0, 4))
	b := commitNew(t, f, 10, rng(7, 0, 10, 19))
	prepared := prepare(t, f, 2, 1)
	last := prepare(t, f, 1, 1)
	mustApply(t, f, &deleteObjectsCmd{IDs: []uint64{last.ID}}) // the highest ID is gone
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"next_object_id":5`, `"objects":{"1":`, `"key":"objects/00000000000000000003.obj"`} {
		if !strings.Contains(sink.String(), want) {
			t.Fatalf("snapshot lacks %s: %s", want, sink.String())
		}
	}
	r := NewFSM(nil)
	if err := r.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if got, want := stateJSON(t, r.State()), stateJSON(t, f.State()); got != want {
		t.Fatalf("restored state differs:\n%s\n%s", got, want)
	}
	if !reflect.DeepEqual(r.View().Objects, f.View().Objects) || len(r.View().Objects) != 3 {
		t.Fatalf("restored objects %+v", r.View().Objects)
	}
	if o, _ := r.View().Object(prepared.ID); o != prepared {
		t.Fatalf("restored prepared object %+v", o)
	}
	// The counter continues past the deleted ID.
	for _, g := range []*FSM{f, r} {
		if o := prepare(t, g, 1, 1); o.ID != last.ID+1 {
			t.Fatalf("next ID %d, want %d", o.ID, last.ID+1)
		}
	}
	// The reference index was rebuilt: retention works on the restored replica alike.
	// t/0's log start passes a's and b's ranges there: b is garbage, a stays referenced
	// by t/1 (0..4 is live).
	for _, g := range []*FSM{f, r} {
		mustApply(t, g, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 20})
		if m := manifest(g, "t", 0); m != nil {
			t.Fatalf("t/0 manifest %v after log start 20", m)
		}
		if got := garbageIDs(g); !reflect.DeepEqual(got, []uint64{b}) {
			t.Fatalf("garbage %v, want %d", got, b)
		}
		refuse(t, g, &deleteObjectsCmd{IDs: []uint64{a}}, metadata.ErrObjectRejected) // t/1 0..4 is live
	}
	// A snapshot taken now holds the trimmed manifests; the index a restore builds from
	// them agrees with the one the commands kept up to date.
	r2 := snapshotRestore(t, f)
	if got, want := stateJSON(t, r2.State()), stateJSON(t, f.State()); got != want {
		t.Fatalf("restored state differs:\n%s\n%s", got, want)
	}
	want := f.View().GarbageObjects()
	for _, g := range []*FSM{f, r, r2} {
		if got := g.View().GarbageObjects(); len(got) != 1 || !reflect.DeepEqual(got, want) {
			t.Fatalf("replicas list other garbage: %+v vs %+v", got, want)
		}
		refuse(t, g, &deleteObjectsCmd{IDs: []uint64{a, b}}, metadata.ErrObjectRejected)
		mustApply(t, g, &deleteObjectsCmd{IDs: []uint64{b}})
		mustApply(t, g, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 1, Offset: 5})
		if got := garbageIDs(g); !reflect.DeepEqual(got, []uint64{a}) {
			t.Fatalf("garbage %v, want %d", got, a)
		}
		mustApply(t, g, &deleteObjectsCmd{IDs: []uint64{a}})
		mustApply(t, g, &deleteTopicCmd{Name: "t"})
	}
	for _, g := range []*FSM{r, r2} {
		if got, want := stateJSON(t, g.State()), stateJSON(t, f.State()); got != want {
			t.Fatalf("replicas diverged after the restore:\n%s\n%s", got, want)
		}
	}
}

// snapshotRestore restores a snapshot of f into a new FSM.
func snapshotRestore(t *testing.T, f *FSM) *FSM {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	r := NewFSM(nil)
	if err := r.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFSMRestoreReservedObjects: snapshots written before object manifests existed (the
// field reserved, absent or empty) restore with no objects; garbage there is refused.
func TestFSMRestoreReservedObjects(t *testing.T) {
	base := `{"cluster_id":"c","version":3,"next_producer_id":0,"brokers":{},"topics":{"t":{"name":"t","id":[7,1,2,3,0,0,0,0,0,0,0,0,0,0,0,0],"partitions":[{"index":0,"leader":1,"leader_epoch":0,"log_start_offset":0}]}}%s}`
	for _, objs := range []string{"", `,"objects":null`, `,"objects":{}`, `,"objects":[]`, `,"objects":""`} {
		f := NewFSM(nil)
		if err := f.Restore(readCloser{strings.NewReader(fmt.Sprintf(base, objs))}); err != nil {
			t.Fatalf("objects %q: %v", objs, err)
		}
		if st := f.State(); st.Objects != nil || st.Version != 3 || st.Topics["t"] == nil {
			t.Fatalf("objects %q: state %+v", objs, st)
		}
		mustApply(t, f, &registerBrokerCmd{ID: 1})
		if o := prepare(t, f, 1, 1); o.ID != 1 {
			t.Fatalf("first object after migration: %+v", o)
		}
	}
	for _, objs := range []string{`,"objects":5`, `,"objects":{"1":{"id":2}}`, `,"objects":{"x":{}}`} {
		if err := NewFSM(nil).Restore(readCloser{strings.NewReader(fmt.Sprintf(base, objs))}); err == nil {
			t.Fatalf("objects %q restored", objs)
		}
	}
}

// TestFSMCommitObjectTimestampAndBytes: a range's MaxTimestamp and Bytes reach the
// manifest in the View (and the snapshot); negative Bytes are refused;
// ctlwire.CommitObjectRequest.AppliedIn recognises the commit with them.
func TestFSMCommitObjectTimestampAndBytes(t *testing.T) {
	f := objectFSM(t)
	o := prepare(t, f, 1, 1)
	r0 := rng(7, 0, 0, 99)
	r0.MaxTimestamp, r0.Bytes = 1_700_000_000_123, 65536
	r1 := rng(7, 1, 0, 9) // recorded without them (zero)
	bad := r1
	bad.Bytes = -1
	refuse(t, f, &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 70000, Ranges: []metadata.PartitionRange{r0, bad}}, metadata.ErrObjectRejected)
	cmd := &commitObjectCmd{ID: o.ID, Broker: 1, Epoch: 1, Size: 70000, Ranges: []metadata.PartitionRange{r0, r1}}
	mustApply(t, f, cmd)
	want := metadata.ObjectRange{Object: o.ID, FirstOffset: 0, LastOffset: 99, MaxTimestamp: 1_700_000_000_123, Bytes: 65536}
	if m := manifest(f, "t", 0); !reflect.DeepEqual(m, []metadata.ObjectRange{want}) {
		t.Fatalf("t/0 manifest %+v, want %+v", m, want)
	}
	if m := manifest(f, "t", 1); !reflect.DeepEqual(m, []metadata.ObjectRange{{Object: o.ID, FirstOffset: 0, LastOffset: 9}}) {
		t.Fatalf("t/1 manifest %+v", m)
	}
	st := stateJSON(t, f.State())
	if !strings.Contains(st, `"max_timestamp":1700000000123,"bytes":65536`) || strings.Count(st, `"max_timestamp"`) != 1 {
		t.Fatalf("state JSON: %s", st)
	}

	req := ctlwire.CommitObjectRequest{ID: cmd.ID, Broker: cmd.Broker, Epoch: cmd.Epoch, Size: cmd.Size, Ranges: cmd.Ranges}
	if !req.AppliedIn(f.View()) {
		t.Fatal("AppliedIn does not recognise the commit")
	}
	req.Ranges = []metadata.PartitionRange{r0, r1}
	req.Ranges[0].Bytes++
	if req.AppliedIn(f.View()) {
		t.Fatal("AppliedIn matched a range with other bytes")
	}
}

// TestCommitRequestFitsBody: a commit of metadata.MaxCommitRanges ranges, every number at
// its widest, fits the default request body limit.
func TestCommitRequestFitsBody(t *testing.T) {
	r := metadata.PartitionRange{Partition: -1 << 31, FirstOffset: -1 << 63, LastOffset: -1 << 63, MaxTimestamp: -1 << 63, Bytes: -1 << 63}
	for i := range r.Topic {
		r.Topic[i] = 255
	}
	req := ctlwire.CommitObjectRequest{ID: ^uint64(0), Broker: -1 << 31, Epoch: -1 << 63, Size: -1 << 63, Ranges: make([]metadata.PartitionRange, metadata.MaxCommitRanges)}
	for i := range req.Ranges {
		req.Ranges[i] = r
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if limit := DefaultConfig().MaxBodyBytes; int64(len(b)) >= limit {
		t.Fatalf("%d ranges encode to %d bytes, the body limit is %d", metadata.MaxCommitRanges, len(b), limit)
	}
}
