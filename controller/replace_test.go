package controller

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// replaceCmd is broker 1's (epoch 1) replace of t/partition's ranges of objects ids by
// object id with range first..last, cleaned under leaderEpoch.
func replaceCmd(id uint64, partition int32, leaderEpoch int32, first, last int64, ids ...uint64) *replaceRangesCmd {
	return &replaceRangesCmd{ID: id, Broker: 1, Epoch: 1, Size: 64, Replace: metadata.RangeReplace{
		Range: rng(7, partition, first, last), Replaces: ids, LeaderEpoch: leaderEpoch}}
}

// TestFSMReplaceRanges runs the log cleaner's commit (command 25) through the FSM: each
// refusal (not the leader, another leader epoch, ranges not consecutive or not spanned
// exactly, a front retention trimmed, a retry) keeps its sentinel and changes nothing;
// an accepted replace swaps exactly the named ranges for one compacted range, the
// replaced objects become garbage, the state survives a snapshot, and a retry after an
// ambiguous failure is recognised by ReplaceRangesRequest.AppliedIn. After a failover
// the old leader epoch's replace is refused and the new leader's lands.
func TestFSMReplaceRanges(t *testing.T) {
	f := objectFSM(t)
	a := commitNew(t, f, 10, rng(7, 0, 0, 9))
	b := commitNew(t, f, 10, rng(7, 0, 10, 19))
	c := commitNew(t, f, 10, rng(7, 0, 20, 29))
	d := commitNew(t, f, 10, rng(7, 0, 30, 39))
	n := prepare(t, f, 1, 1).ID
	if ep := f.View().Topics["t"].Partitions[0].LeaderEpoch; ep != 0 {
		t.Fatalf("t/0 leader epoch %d, want 0", ep)
	}

	refuse(t, f, replaceCmd(n, 0, 1, 0, 19, a, b), metadata.ErrObjectRejected, metadata.ErrFenced)  // a later leader epoch
	refuse(t, f, replaceCmd(n, 0, -1, 0, 19, a, b), metadata.ErrObjectRejected, metadata.ErrFenced) // an earlier one
	wrongLeader := replaceCmd(n, 0, 0, 0, 19, a, b)
	wrongLeader.Replace.Range = rng(7, 2, 0, 19) // t/2 is led by broker 2
	refuse(t, f, wrongLeader, metadata.ErrObjectRejected, metadata.ErrFenced)
	refuse(t, f, replaceCmd(n, 0, 0, 0, 29, a, c), metadata.ErrObjectRejected)  // not consecutive
	refuse(t, f, replaceCmd(n, 0, 0, 0, 19, b, a), metadata.ErrObjectRejected)  // out of order
	refuse(t, f, replaceCmd(n, 0, 0, 0, 18, a, b), metadata.ErrObjectRejected)  // ends short
	refuse(t, f, replaceCmd(n, 0, 0, 1, 19, a, b), metadata.ErrObjectRejected)  // starts inside
	refuse(t, f, replaceCmd(n, 0, 0, 30, 49, d, n), metadata.ErrObjectRejected) // past the end
	refuse(t, f, &replaceRangesCmd{ID: n, Broker: 2, Epoch: 1, Size: 1, Replace: replaceCmd(n, 0, 0, 0, 19, a, b).Replace},
		metadata.ErrObjectRejected) // another broker's object
	refuse(t, f, replaceCmd(n, 0, 0, 0, 19), metadata.ErrObjectRejected) // nothing named

	// Retention trims the front while the cleaner works: its replace of a is refused.
	mustApply(t, f, &setLogStartOffsetCmd{TopicID: topicID(7), Partition: 0, Offset: 10})
	refuse(t, f, replaceCmd(n, 0, 0, 0, 19, a, b), metadata.ErrObjectRejected)

	// Accepted: b and c become one compacted range; both are garbage now.
	cmd := replaceCmd(n, 0, 0, 10, 29, b, c)
	req := ctlwire.ReplaceRangesRequest{ID: n, Broker: 1, Epoch: 1, Size: 64, Replace: cmd.Replace}
	if req.AppliedIn(f.View()) {
		t.Fatal("AppliedIn before the replace")
	}
	old := f.View()
	mustApply(t, f, cmd)
	want := []metadata.ObjectRange{{Object: n, FirstOffset: 10, LastOffset: 29, Compacted: true}, {Object: d, FirstOffset: 30, LastOffset: 39}}
	if m := manifest(f, "t", 0); !reflect.DeepEqual(m, want) {
		t.Fatalf("t/0 manifest %+v, want %+v", m, want)
	}
	if o, _ := f.View().Object(n); o.State != metadata.ObjectCommitted || o.Size != 64 {
		t.Fatalf("replacing object %+v", o)
	}
	if g := garbageIDs(f); !reflect.DeepEqual(g, []uint64{a, b, c}) {
		t.Fatalf("garbage %v, want %d %d %d", g, a, b, c)
	}
	if m := old.Topics["t"].Partitions[0].Objects; len(m) != 3 || m[0].Object != b {
		t.Fatalf("the replace leaked into an old view: %+v", m)
	}
	if m := snapshotRestore(t, f).View().Topics["t"].Partitions[0].Objects; !reflect.DeepEqual(m, want) {
		t.Fatalf("restored manifest %+v", m)
	}
	// The retry of an ambiguous failure: refused, and recognised as applied.
	refuse(t, f, cmd, metadata.ErrObjectRejected)
	if !req.AppliedIn(f.View()) {
		t.Fatal("AppliedIn after the replace: false")
	}
	other := req
	other.Size = 65
	if other.AppliedIn(f.View()) {
		t.Fatal("AppliedIn of a request of another size: true")
	}

	// A failover: broker 2 is fenced and broker 1 takes t/2 over in leader epoch 1.
	e := prepare(t, f, 2, 1).ID
	mustApply(t, f, &commitObjectCmd{ID: e, Broker: 2, Epoch: 1, Size: 10, Ranges: []metadata.PartitionRange{rng(7, 2, 0, 9)}})
	g := prepare(t, f, 2, 1).ID // broker 2's clean, in flight
	mustApply(t, f, &fenceBrokerCmd{ID: 2, Epoch: 1, Plan: true})
	if p := f.View().Topics["t"].Partitions[2]; p.Leader != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("t/2 after the failover: leader %d epoch %d", p.Leader, p.LeaderEpoch)
	}
	refuse(t, f, &replaceRangesCmd{ID: g, Broker: 2, Epoch: 1, Size: 1, Replace: replaceCmd(g, 2, 0, 0, 9, e).Replace},
		metadata.ErrObjectRejected, metadata.ErrFenced)
	h := prepare(t, f, 1, 1).ID
	refuse(t, f, replaceCmd(h, 2, 0, 0, 9, e), metadata.ErrObjectRejected, metadata.ErrFenced) // the old leader epoch
	mustApply(t, f, replaceCmd(h, 2, 1, 0, 9, e))
	if m := manifest(f, "t", 2); len(m) != 1 || m[0].Object != h || !m[0].Compacted {
		t.Fatalf("t/2 manifest %+v", m)
	}
}

// TestReplaceRangesCluster runs the replace over the API of a 3-controller quorum
// (POST /v1/objects/replace through ctlclient): refusals keep their sentinels across
// the wire (a stale leader epoch is rejected and fenced), an empty replace is a bad
// request, an accepted one shows in a watching client's View, and a retry is refused.
func TestReplaceRangesCluster(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	leader := tc.waitLeader()
	ctx := ctxT(t)
	b1 := tc.broker(1, "a")
	watcher := tc.client(-1, nil, tc.follower(leader))
	var _ metadata.ObjectCompactor = b1
	top, err := b1.CreateTopic(ctx, metadata.TopicSpec{Name: "cmp", Partitions: 1, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatal(err)
	}
	p := b1.View().TopicByID(top.ID).Partitions[0]
	if p.Leader != 1 {
		t.Fatalf("cmp/0 led by %d, want 1 (the only broker)", p.Leader)
	}
	var ids []uint64
	for i := int64(0); i < 2; i++ {
		o, err := b1.PrepareObject(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b1.CommitObject(ctx, o.ID, 10, []metadata.PartitionRange{{Topic: top.ID, FirstOffset: 10 * i, LastOffset: 10*i + 9}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	n, err := b1.PrepareObject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rr := metadata.RangeReplace{Range: metadata.PartitionRange{Topic: top.ID, FirstOffset: 0, LastOffset: 19, Bytes: 5}, Replaces: ids, LeaderEpoch: p.LeaderEpoch + 1}
	if err := b1.ReplaceRanges(ctx, n.ID, 5, rr); !errors.Is(err, metadata.ErrObjectRejected) || !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("replace under another leader epoch: %v", err)
	}
	empty := rr
	empty.Replaces = nil
	if err := b1.ReplaceRanges(ctx, n.ID, 5, empty); !errors.Is(err, ctlwire.ErrBadRequest) {
		t.Fatalf("replace of no ranges: %v", err)
	}
	rr.LeaderEpoch = p.LeaderEpoch
	if err := b1.ReplaceRanges(ctx, n.ID, 5, rr); err != nil {
		t.Fatal(err)
	}
	waitView(t, watcher, "the compacted range in the watcher's view", func(v *metadata.View) bool {
		m := v.TopicByID(top.ID).Partitions[0].Objects
		return len(m) == 1 && m[0].Equal(metadata.ObjectRange{Object: n.ID, FirstOffset: 0, LastOffset: 19, Bytes: 5, Compacted: true})
	})
	if err := b1.ReplaceRanges(ctx, n.ID, 5, rr); !errors.Is(err, metadata.ErrObjectRejected) {
		t.Fatalf("replace twice: %v", err)
	}
}
