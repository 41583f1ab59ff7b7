package controller

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// leadersOf lists the leaders of a topic's partitions in index order.
func leadersOf(f *FSM, topic string) []int32 {
	var out []int32
	for _, p := range f.View().Topics[topic].Partitions {
		out = append(out, p.Leader)
	}
	return out
}

func part(f *FSM, topic string, i int) metadata.Partition {
	return f.View().Topics[topic].Partitions[i]
}

// fence applies a planning fence of broker id in its current epoch.
func fence(t *testing.T, f *FSM, id int32) fenceResult {
	t.Helper()
	b, ok := f.View().Broker(id)
	if !ok {
		t.Fatalf("no broker %d", id)
	}
	v := f.View().Version
	res := mustApply(t, f, &fenceBrokerCmd{ID: id, Epoch: b.Epoch, Plan: true})
	fr := res.Value.(fenceResult)
	if !fr.Fenced || res.Version != v+1 {
		t.Fatalf("fence of broker %d: %+v, version %d → %d (one command, one version)", id, fr, v, res.Version)
	}
	return fr
}

// failoverFSM: brokers 1, 2, 3 in zone a (epochs 3, 1, 2), 4 and 5 in zone b (epoch
// 1); topic "t" (id 1) led by 1 1 1 1 1 1 2 2 4, partition 5 moving from 1 to 4;
// topic "u" (id 2) led by 1 and 4, partition 1 moving from 4 to 1.
func failoverFSM(t *testing.T) *FSM {
	t.Helper()
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	for _, b := range []struct {
		id   int32
		rack string
		regs int
	}{{1, "a", 3}, {2, "a", 1}, {3, "a", 2}, {4, "b", 1}, {5, "b", 1}} {
		for i := 0; i < b.regs; i++ {
			mustApply(t, f, &registerBrokerCmd{ID: b.id, Host: "h", Port: 9000 + b.id, Rack: b.rack})
		}
	}
	var tp []metadata.Partition
	for _, l := range []int32{1, 1, 1, 1, 1, 1, 2, 2, 4} {
		tp = append(tp, metadata.Partition{Leader: l})
	}
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: tp}})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "u", ID: topicID(2), Partitions: []metadata.Partition{{Leader: 1}, {Leader: 4}}}})
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 5, Target: 4, Gen: true})
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(2), Partition: 1, Target: 1, Gen: true})
	return f
}

// TestFailoverPlan: fencing a broker moves every partition it led to live brokers in
// the same command: its zone first, the fewest partitions led next (counting the plan's
// own picks), the lowest ID on ties; a graceful move's target keeps its partition; moves
// to the fenced broker are cancelled. Each failed-over partition is Recovering with the
// next leader epoch, the fenced registration's epoch and its log chain unchanged.
func TestFailoverPlan(t *testing.T) {
	f := failoverFSM(t)
	fr := fence(t, f, 1)
	if fr != (fenceResult{Fenced: true, FailedOver: 7, MovesCancelled: 1}) {
		t.Fatalf("fence result %+v", fr)
	}
	// Zone a: 2 leads 2, 3 leads none. Picks in (topic, index) order: t/0 → 3, t/1 → 3,
	// t/2 → 2 (tie, lower ID), t/3 → 3, t/4 → 2, t/5 → 4 (the move's target), u/0 → 3.
	// Zone b's broker 5 gets nothing: the zone comes first.
	if got, want := leadersOf(f, "t"), []int32{3, 3, 2, 3, 2, 4, 2, 2, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("t leaders %v, want %v", got, want)
	}
	if got, want := leadersOf(f, "u"), []int32{3, 4}; !reflect.DeepEqual(got, want) {
		t.Fatalf("u leaders %v, want %v", got, want)
	}
	n := map[int32]int{}
	for _, name := range []string{"t", "u"} {
		for k, c := range countLeaders(f.View().Topics[name].Partitions) {
			n[k] += c
		}
	}
	if n[2] != 4 || n[3] != 4 || n[1] != 0 || n[5] != 0 {
		t.Fatalf("partitions led after the plan: %v, want 4 each for 2 and 3 in the fenced broker's zone", n)
	}
	for _, fo := range []struct {
		topic string
		i     int
	}{{"t", 0}, {"t", 1}, {"t", 2}, {"t", 3}, {"t", 4}, {"t", 5}, {"u", 0}} {
		p := part(f, fo.topic, fo.i)
		if !p.Recovering || p.RecoverEpoch != 3 || p.LeaderEpoch != 1 || p.Moving || p.MovingTo != -1 || p.MoveGen != 0 ||
			!reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}}) {
			t.Errorf("%s/%d after the fence: %+v", fo.topic, fo.i, p)
		}
	}
	for _, p := range []metadata.Partition{part(f, "t", 6), part(f, "t", 8), part(f, "u", 1)} {
		if p.Recovering || p.RecoverEpoch != 0 || p.LeaderEpoch != 0 || p.Moving || p.MovingTo != -1 || p.MoveGen != 0 {
			t.Errorf("partition %d not led by the fenced broker: %+v", p.Index, p)
		}
	}
	if b, _ := f.View().Broker(1); b.State != metadata.BrokerFenced || b.Epoch != 3 {
		t.Fatalf("broker 1: %+v", b)
	}
	// A second fence of the same registration changes nothing.
	v := f.View().Version
	if res := mustApply(t, f, &fenceBrokerCmd{ID: 1, Epoch: 3, Plan: true}); res.Value.(fenceResult).Fenced || res.Version != v {
		t.Fatalf("fencing twice: %+v", res)
	}
	// Without Plan (a log entry written before failover) the partitions stay put.
	g := failoverFSM(t)
	mustApply(t, g, &fenceBrokerCmd{ID: 1, Epoch: 3})
	if got := leadersOf(g, "t"); !reflect.DeepEqual(got, []int32{1, 1, 1, 1, 1, 1, 2, 2, 4}) || part(g, "t", 0).Recovering {
		t.Fatalf("a fence without a plan moved partitions: %v", got)
	}
}

// TestFailoverDeadTakerAndCascade: a taker that dies before completing passes its
// Recovering partitions on with their log chain and RecoverEpoch (the earlier dead
// broker's), while a partition it had already recovered fails over with its own epoch;
// brokers fenced one after the other never get a partition; with no broker left the
// partitions stay Recovering without a leader until a broker registers and takes them.
func TestFailoverDeadTakerAndCascade(t *testing.T) {
	f := failoverFSM(t)
	fence(t, f, 1)
	// Broker 3 (epoch 2) recovers t/3 at offset 10, then dies with t/0, t/1, u/0 still
	// recovering.
	mustApply(t, f, &completeRecoveryCmd{TopicID: topicID(1), Partition: 3, Leader: 3, BrokerEpoch: 2, LeaderEpoch: 1, EndOffset: 10})
	fr := fence(t, f, 3)
	if fr.FailedOver != 4 || fr.Leaderless != 0 {
		t.Fatalf("fence of the taker: %+v", fr)
	}
	for _, fo := range []struct {
		topic string
		i     int
	}{{"t", 0}, {"t", 1}, {"u", 0}} {
		p := part(f, fo.topic, fo.i)
		if p.Leader != 2 || !p.Recovering || p.RecoverEpoch != 3 || p.LeaderEpoch != 2 ||
			!reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}}) {
			t.Errorf("%s/%d after its taker died: %+v, want leader 2, epoch 2, still recovering broker 1's epoch 3", fo.topic, fo.i, p)
		}
	}
	if p := part(f, "t", 3); p.Leader != 2 || !p.Recovering || p.RecoverEpoch != 2 || p.LeaderEpoch != 2 ||
		!reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 3, StartOffset: 10}}) {
		t.Fatalf("t/3, recovered by broker 3 before it died: %+v", p)
	}

	// Zone a's last broker: its partitions cross to zone b, spread evenly.
	fence(t, f, 2)
	n := map[int32]int{}
	for _, name := range []string{"t", "u"} {
		for _, p := range f.View().Topics[name].Partitions {
			n[p.Leader]++
			if p.Leader != 4 && p.Leader != 5 {
				t.Fatalf("%s/%d led by %d after brokers 1, 3, 2 were fenced", name, p.Index, p.Leader)
			}
		}
	}
	if d := n[4] - n[5]; d < -1 || d > 1 {
		t.Fatalf("zone b split %v, want an even spread", n)
	}

	fence(t, f, 4)
	fr = fence(t, f, 5)
	if fr.FailedOver != 0 || fr.Leaderless != 11 {
		t.Fatalf("fencing the last broker: %+v, want 11 leaderless", fr)
	}
	before := map[string]metadata.Partition{}
	for _, name := range []string{"t", "u"} {
		for i, p := range f.View().Topics[name].Partitions {
			if p.Leader != -1 || !p.Recovering || p.Moving {
				t.Fatalf("%s/%d with no broker left: %+v", name, i, p)
			}
			before[fmt.Sprint(name, i)] = p
		}
	}

	// The next registration takes them all, still Recovering, with the next epoch.
	res := mustApply(t, f, &registerBrokerCmd{ID: 6, Host: "h6", Port: 6, Rack: "c"})
	if rr := res.Value.(registerResult); rr.Epoch != 1 || rr.Adopted != 11 {
		t.Fatalf("registration after the blackout: %+v", rr)
	}
	for _, name := range []string{"t", "u"} {
		for i, p := range f.View().Topics[name].Partitions {
			b := before[fmt.Sprint(name, i)]
			if p.Leader != 6 || !p.Recovering || p.LeaderEpoch != b.LeaderEpoch+1 || p.RecoverEpoch != b.RecoverEpoch || !reflect.DeepEqual(p.Logs, b.Logs) {
				t.Fatalf("%s/%d taken over by the new broker: %+v (was %+v)", name, i, p, b)
			}
		}
	}
	if rr := mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"}).Value.(registerResult); rr.Adopted != 0 {
		t.Fatalf("a second registration adopted %d partitions", rr.Adopted)
	}
	p := part(f, "t", 3)
	mustApply(t, f, &completeRecoveryCmd{TopicID: topicID(1), Partition: 3, Leader: 6, BrokerEpoch: 1, LeaderEpoch: p.LeaderEpoch, EndOffset: 25})
	if p := part(f, "t", 3); p.Recovering || p.Leader != 6 ||
		!reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 3, StartOffset: 10}, {Broker: 6, StartOffset: 25}}) {
		t.Fatalf("t/3 recovered after the blackout: %+v", p)
	}
}

// TestCompleteRecoveryRules: only the leader, in its current registration and in the
// takeover's leader epoch, completes a recovery, once, with an end at or after the
// recovered range's start; the same completion again is a harmless no-op; a Recovering
// partition cannot be moved.
func TestCompleteRecoveryRules(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 3, Host: "h", Port: 3, Rack: "b"})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}}}})
	// t/1 moved from 1 to 2 at 17 before: its chain is [1@0 2@17].
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 1, Target: 2, Gen: true})
	mustApply(t, f, &completeMoveCmd{TopicID: topicID(1), Partition: 1, From: 1, FromEpoch: 1, EndOffset: 17, MoveGen: part(f, "t", 1).MoveGen})
	fence(t, f, 1) // t/0 → 2 (zone a), leader epoch 1, recovering broker 1's epoch 1
	if p := part(f, "t", 0); p.Leader != 2 || p.LeaderEpoch != 1 || !p.Recovering || p.RecoverEpoch != 1 {
		t.Fatalf("t/0 after the fence: %+v", p)
	}
	done := func(leader int32, brokerEpoch int64, leaderEpoch int32, end int64) *completeRecoveryCmd {
		return &completeRecoveryCmd{TopicID: topicID(1), Partition: 0, Leader: leader, BrokerEpoch: brokerEpoch, LeaderEpoch: leaderEpoch, EndOffset: end}
	}
	refuse(t, f, done(1, 1, 1, 5), metadata.ErrFenced)                                                            // the fenced broker
	refuse(t, f, done(2, 7, 1, 5), metadata.ErrFenced)                                                            // not its current registration
	refuse(t, f, done(3, 1, 1, 5), metadata.ErrRecoveryRefused)                                                   // not the leader
	refuse(t, f, done(2, 1, 0, 5), metadata.ErrRecoveryRefused)                                                   // an older leader epoch
	refuse(t, f, done(2, 1, 1, -1), metadata.ErrInvalidOffset)                                                    // negative end
	refuse(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 0, Target: 3, Gen: true}, metadata.ErrMoveRefused) // recovering
	refuse(t, f, &completeRecoveryCmd{TopicID: topicID(9), Partition: 0, Leader: 2, BrokerEpoch: 1, LeaderEpoch: 1}, metadata.ErrUnknownTopic)

	res := mustApply(t, f, done(2, 1, 1, 42))
	if !res.Value.(bool) {
		t.Fatal("the completion reported no change")
	}
	p := part(f, "t", 0)
	if p.Recovering || p.RecoverEpoch != 0 || p.Leader != 2 || p.LeaderEpoch != 1 ||
		!reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 42}}) {
		t.Fatalf("after CompleteRecovery: %+v", p)
	}
	v := f.View().Version
	if res := mustApply(t, f, done(2, 1, 1, 42)); res.Value.(bool) || res.Version != v {
		t.Fatalf("the same completion again changed the state: %+v", res)
	}
	refuse(t, f, done(2, 1, 1, 50), metadata.ErrRecoveryRefused) // not recovering any more

	// t/1 (chain 1@0 2@17): fence 2, so 3 takes it; an end before 17 is refused.
	fence(t, f, 2)
	if p := part(f, "t", 1); p.Leader != 3 || p.LeaderEpoch != 2 || p.RecoverEpoch != 1 {
		t.Fatalf("t/1 after fencing 2: %+v", p)
	}
	refuse(t, f, &completeRecoveryCmd{TopicID: topicID(1), Partition: 1, Leader: 3, BrokerEpoch: 1, LeaderEpoch: 2, EndOffset: 16}, metadata.ErrInvalidOffset)

	// A stale completion of an earlier takeover by the same broker ID: 3 is fenced
	// before completing, registers again (epoch 2) and takes the partitions back in a
	// later leader epoch; its completion of leader epoch 2 is refused.
	fence(t, f, 3)
	mustApply(t, f, &registerBrokerCmd{ID: 3, Host: "h", Port: 3, Rack: "b"})
	p = part(f, "t", 1)
	if p.Leader != 3 || p.LeaderEpoch != 4 || !p.Recovering || p.RecoverEpoch != 1 {
		t.Fatalf("t/1 after its taker came back: %+v", p)
	}
	refuse(t, f, &completeRecoveryCmd{TopicID: topicID(1), Partition: 1, Leader: 3, BrokerEpoch: 2, LeaderEpoch: 2, EndOffset: 30}, metadata.ErrRecoveryRefused)
	mustApply(t, f, &completeRecoveryCmd{TopicID: topicID(1), Partition: 1, Leader: 3, BrokerEpoch: 2, LeaderEpoch: 4, EndOffset: 30})
	if p := part(f, "t", 1); p.Recovering || !reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 17}, {Broker: 3, StartOffset: 30}}) {
		t.Fatalf("t/1 recovered: %+v", p)
	}
}

// TestStaleCompleteMoveRefused is the safety bug: the old leader captured its end
// offset for a move, the move was cancelled, more records were acked, and a new move
// began. A (retried) completion of the first move must not complete the second with
// the old end offset, which would lose the records acked after it.
func TestStaleCompleteMoveRefused(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1}}}})
	begin := &beginMoveCmd{TopicID: topicID(1), Partition: 0, Target: 2, Gen: true}
	res := mustApply(t, f, begin)
	gen1 := part(f, "t", 0).MoveGen
	if gen1 == 0 || res.Value.(uint64) != gen1 || gen1 != res.Version {
		t.Fatalf("first move: MoveGen %d, value %v, version %d", gen1, res.Value, res.Version)
	}
	if res := mustApply(t, f, begin); res.Value.(uint64) != gen1 || part(f, "t", 0).MoveGen != gen1 {
		t.Fatal("asking again for the same move gave it a new generation")
	}
	mustApply(t, f, &cancelMoveCmd{TopicID: topicID(1), Partition: 0})
	if p := part(f, "t", 0); p.Moving || p.MoveGen != 0 {
		t.Fatalf("after cancel: %+v", p)
	}
	mustApply(t, f, begin)
	gen2 := part(f, "t", 0).MoveGen
	if gen2 == gen1 || gen2 == 0 {
		t.Fatalf("second move's generation %d, first %d", gen2, gen1)
	}
	stale := &completeMoveCmd{TopicID: topicID(1), Partition: 0, From: 1, FromEpoch: 1, EndOffset: 10, MoveGen: gen1}
	refuse(t, f, stale, metadata.ErrMoveRefused)
	mustApply(t, f, &completeMoveCmd{TopicID: topicID(1), Partition: 0, From: 1, FromEpoch: 1, EndOffset: 20, MoveGen: gen2})
	if p := part(f, "t", 0); p.Leader != 2 || p.MoveGen != 0 || !reflect.DeepEqual(p.Logs, []metadata.LogRange{{Broker: 1, StartOffset: 0}, {Broker: 2, StartOffset: 20}}) {
		t.Fatalf("after completing the second move: %+v", p)
	}
	// The stale one is refused after the completion too (no move pending).
	if res := apply(t, f, stale); !errors.Is(res.Err, metadata.ErrMoveRefused) {
		t.Fatalf("stale completion after the move: %v", res.Err)
	}
	// A begin without Gen (a log entry written before generations) leaves MoveGen 0,
	// as that controller did.
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 0, Target: 1})
	if p := part(f, "t", 0); !p.Moving || p.MoveGen != 0 {
		t.Fatalf("begin without Gen: %+v", p)
	}
}
