package controller

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// TestCompleteRecoveriesJudgesEachItem: the batched completion applies each item as a
// single completion would (the same refusals, the same no-op for a retry), in one
// entry, and refuses the whole batch of a registration that is over.
func TestCompleteRecoveriesJudgesEachItem(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2, Rack: "a"})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 1}}}})
	fence(t, f, 1) // every partition → 2, Recovering, leader epoch 1
	le := part(f, "t", 0).LeaderEpoch
	refuse(t, f, &completeRecoveriesCmd{Leader: 2, BrokerEpoch: 9, Items: []ctlwire.RecoveryDoneItem{{TopicID: topicID(1), Partition: 0, LeaderEpoch: le, EndOffset: 5}}}, metadata.ErrFenced)

	v0 := f.View().Version
	res := mustApply(t, f, &completeRecoveriesCmd{Leader: 2, BrokerEpoch: 1, Items: []ctlwire.RecoveryDoneItem{
		{TopicID: topicID(1), Partition: 0, LeaderEpoch: le, EndOffset: 5},
		{TopicID: topicID(1), Partition: 1, LeaderEpoch: le - 1, EndOffset: 5}, // an older leader epoch
		{TopicID: topicID(1), Partition: 2, LeaderEpoch: le, EndOffset: -1},    // a negative end
		{TopicID: topicID(9), Partition: 0, LeaderEpoch: le, EndOffset: 5},     // no such topic
		{TopicID: topicID(1), Partition: 0, LeaderEpoch: le, EndOffset: 5},     // the first again: a no-op
	}})
	rr := res.Value.(recoveriesResult)
	want := []error{nil, metadata.ErrRecoveryRefused, metadata.ErrInvalidOffset, metadata.ErrUnknownTopic, nil}
	for i, w := range want {
		if (w == nil) != (rr.Errs[i] == nil) || (w != nil && !errors.Is(rr.Errs[i], w)) {
			t.Fatalf("item %d: %v, want %v", i, rr.Errs[i], w)
		}
	}
	if !reflect.DeepEqual(rr.Done, []bool{true, false, false, false, false}) {
		t.Fatalf("done: %v", rr.Done)
	}
	if res.Version != v0+1 {
		t.Fatalf("one batch bumped the version from %d to %d, want one entry", v0, res.Version)
	}
	if p := part(f, "t", 0); p.Recovering || !reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 5}}) {
		t.Fatalf("t/0: %+v", p)
	}
	for _, i := range []int{1, 2} {
		if p := part(f, "t", i); !p.Recovering {
			t.Fatalf("t/%d completed by a refused item: %+v", i, p)
		}
	}
}

// TestCompleteMovesJudgesEachItem: the batched hand-off applies each item as a single
// CompleteMoveGen would (its move generation, the leader, a valid end), in one entry,
// and refuses the whole batch of a registration that is over.
func TestCompleteMovesJudgesEachItem(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2, Rack: "a"})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 1}, {Leader: 1}}}})
	for i := int32(0); i < 3; i++ {
		mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: i, Target: 2, Gen: true})
	}
	gen := func(i int) uint64 { return part(f, "t", i).MoveGen }
	refuse(t, f, &completeMovesCmd{From: 1, FromEpoch: 9, Items: []ctlwire.MoveDoneItem{{TopicID: topicID(1), Partition: 0, EndOffset: 5, MoveGen: gen(0)}}}, metadata.ErrFenced)
	v0 := f.View().Version
	res := mustApply(t, f, &completeMovesCmd{From: 1, FromEpoch: 1, Items: []ctlwire.MoveDoneItem{
		{TopicID: topicID(1), Partition: 0, EndOffset: 5, MoveGen: gen(0)},
		{TopicID: topicID(1), Partition: 1, EndOffset: 5, MoveGen: gen(1) + 7}, // another move's generation
		{TopicID: topicID(1), Partition: 2, EndOffset: -1, MoveGen: gen(2)},    // a negative end
		{TopicID: topicID(1), Partition: 3, EndOffset: 5, MoveGen: 1},          // not moving
		{TopicID: topicID(9), Partition: 0, EndOffset: 5, MoveGen: 1},          // no such topic
		{TopicID: topicID(1), Partition: 2, EndOffset: 5, MoveGen: 0},          // no generation
	}})
	errs := res.Value.([]error)
	want := []error{nil, metadata.ErrMoveRefused, metadata.ErrInvalidOffset, metadata.ErrMoveRefused, metadata.ErrUnknownTopic, metadata.ErrMoveRefused}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Fatalf("item %d: %v, want %v", i, errs[i], w)
		}
	}
	if res.Version != v0+1 {
		t.Fatalf("one batch bumped the version from %d to %d, want one entry", v0, res.Version)
	}
	if p := part(f, "t", 0); p.Leader != 2 || p.Moving || p.LeaderEpoch != 1 ||
		!reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 5}}) {
		t.Fatalf("t/0: %+v", p)
	}
	for _, i := range []int{1, 2} {
		if p := part(f, "t", i); p.Leader != 1 || !p.Moving {
			t.Fatalf("t/%d handed off by a refused item: %+v", i, p)
		}
	}
	// The same hand-off again is refused (not moving any more): the client then judges
	// by its View whether an earlier attempt did it (ctlclient.Client.handedOff).
	res = mustApply(t, f, &completeMovesCmd{From: 1, FromEpoch: 1, Items: []ctlwire.MoveDoneItem{{TopicID: topicID(1), Partition: 0, EndOffset: 5, MoveGen: 99}}})
	if errs := res.Value.([]error); !errors.Is(errs[0], metadata.ErrMoveRefused) {
		t.Fatalf("a repeated hand-off: %v", errs[0])
	}
}
