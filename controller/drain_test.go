package controller

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// drainFSM is failoverFSM after broker 4 (zone b) was fenced: broker 1 (zone a, epoch 3)
// leads t/0..t/5 and u/0, and u/1, which it took over from 4 (Recovering); 2 leads t/6
// and t/7, 3 nothing, 5 (zone b) t/8. Then t/4 begins moving to 5, t/6 to 1.
func drainFSM(t *testing.T) *FSM {
	t.Helper()
	f := failoverFSM(t)
	fence(t, f, 4)
	if p := part(f, "u", 1); p.Leader != 1 || !p.Recovering {
		t.Fatalf("u/1 after the fence of 4: %+v", p)
	}
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 4, Target: 5, Gen: true})
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 6, Target: 1, Gen: true})
	return f
}

// movingTo lists where each partition of topic is moving (-1: not moving).
func movingTo(f *FSM, topic string) []int32 {
	var out []int32
	for _, p := range f.View().Topics[topic].Partitions {
		if p.Moving {
			out = append(out, p.MovingTo)
		} else {
			out = append(out, -1)
		}
	}
	return out
}

// TestDrainPlan: draining a broker marks it draining (live: it may complete moves and
// recoveries) and begins, in the same command, a graceful move of every partition it
// leads to its zone first, then the fewest partitions (moves under way counted at their
// target), then the lowest ID; never to a draining or fenced broker. A Recovering
// partition stays until recovered and a partition moving already keeps its move; moves
// to the drained broker are cancelled. Draining again plans what was left behind;
// stale or fenced registrations are refused. Placement, the failover plan and moves
// never pick the draining broker, and a new registration makes it active again.
func TestDrainPlan(t *testing.T) {
	f := drainFSM(t)
	v := f.View().Version
	res := mustApply(t, f, &drainBrokerCmd{ID: 1, Epoch: 3})
	dr := res.Value.(drainResult)
	want := drainResult{Started: true, DrainCounts: metadata.DrainCounts{Moves: 6, AlreadyMoving: 1, Recovering: 1, MovesCancelled: 1}}
	if dr != want || res.Version != v+1 {
		t.Fatalf("drain: %+v (version %d → %d), want %+v in one version", dr, v, res.Version, want)
	}
	if b, _ := f.View().Broker(1); b.State != metadata.BrokerDraining || b.Epoch != 3 || !b.Active() || b.Accepting() {
		t.Fatalf("broker 1 after the drain: %+v", b)
	}
	// Zone a: 2 leads 2, 3 none (5, zone b, has 1 and t/4 coming: never picked while
	// zone a has brokers). t/0 → 3, t/1 → 3, t/2 → 2 (2 each, lower ID), t/3 → 3,
	// t/4 keeps its move to 5, t/5 → 2 (3 each), t/6's move to 1 is cancelled; u/0 → 3;
	// u/1 is still recovering.
	if got, want := movingTo(f, "t"), []int32{3, 3, 2, 3, 5, 2, -1, -1, -1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("t moving to %v, want %v", got, want)
	}
	if got, want := movingTo(f, "u"), []int32{3, -1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("u moving to %v, want %v", got, want)
	}
	for _, i := range []int{0, 1, 2, 3, 5} {
		if p := part(f, "t", i); p.MoveGen != res.Version || p.Leader != 1 || p.LeaderEpoch != 0 {
			t.Fatalf("t/%d: %+v, want MoveGen %d (the drain's version), still led by 1", i, p, res.Version)
		}
	}
	if p := part(f, "t", 4); p.MoveGen == res.Version {
		t.Fatal("the move under way got a new generation")
	}
	if p := part(f, "t", 6); p.Moving || p.MoveGen != 0 || p.Leader != 2 {
		t.Fatalf("t/6's move to the draining broker: %+v", p)
	}

	// Again: nothing new to move, nothing changes.
	v = f.View().Version
	res = mustApply(t, f, &drainBrokerCmd{ID: 1, Epoch: 3})
	if dr := res.Value.(drainResult); dr.Started || dr.Moves != 0 || dr.AlreadyMoving != 7 || dr.Recovering != 1 || res.Version != v {
		t.Fatalf("draining again: %+v, version %d → %d", dr, v, res.Version)
	}

	// Stale and fenced registrations are refused; so are unknown brokers.
	refuse(t, f, &drainBrokerCmd{ID: 1, Epoch: 2}, metadata.ErrFenced)
	refuse(t, f, &drainBrokerCmd{ID: 4, Epoch: 1}, metadata.ErrFenced)
	refuse(t, f, &drainBrokerCmd{ID: 9, Epoch: 1}, metadata.ErrFenced)

	// The draining broker still acts for its registration: it completes a recovery and a
	// hand-off.
	mustApply(t, f, &completeRecoveryCmd{TopicID: topicID(2), Partition: 1, Leader: 1, BrokerEpoch: 3, LeaderEpoch: 1, EndOffset: 9})
	mustApply(t, f, &completeMoveCmd{TopicID: topicID(1), Partition: 0, From: 1, FromEpoch: 3, EndOffset: 5, MoveGen: part(f, "t", 0).MoveGen})
	if p := part(f, "t", 0); p.Leader != 3 || p.Moving || p.LeaderEpoch != 1 {
		t.Fatalf("t/0 after the hand-off: %+v", p)
	}
	// Draining again moves the recovered partition: zone a has 2 with 4 to come (t/6,
	// t/7, t/2, t/5), 3 with 4 (t/0, t/1, t/3, u/0) → 2.
	res = mustApply(t, f, &drainBrokerCmd{ID: 1, Epoch: 3})
	if dr := res.Value.(drainResult); dr.Started || dr.Moves != 1 || dr.Recovering != 0 {
		t.Fatalf("draining after the recovery: %+v", dr)
	}
	if p := part(f, "u", 1); !p.Moving || p.MovingTo != 2 {
		t.Fatalf("u/1 after draining again: %+v", p)
	}

	// Nothing new goes to a draining broker: moves, placement, the failover plan.
	refuse(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 7, Target: 1, Gen: true}, metadata.ErrMoveRefused)
	if parts, _ := place(f.View(), nil, 0, 30); countLeaders(parts)[1] != 0 {
		t.Fatalf("placement picked the draining broker: %v", countLeaders(parts))
	}
	// Broker 2 fenced: its partitions (t/6, t/7) go to 3, the only accepting broker of
	// zone a, never to draining 1, though 1 leads fewer now.
	fence(t, f, 2)
	for _, i := range []int{6, 7} {
		if p := part(f, "t", i); p.Leader != 3 || !p.Recovering {
			t.Fatalf("t/%d after the fence of 2: %+v", i, p)
		}
	}
	// Moves to the fenced broker were cancelled; they stay with the draining broker
	// until drained again (or the balancer moves them).
	for _, pp := range []struct {
		topic string
		i     int
	}{{"t", 2}, {"t", 5}, {"u", 1}} {
		if p := part(f, pp.topic, pp.i); p.Leader != 1 || p.Moving {
			t.Fatalf("%s/%d, moving to the fenced broker: %+v", pp.topic, pp.i, p)
		}
	}

	// A new registration is active again; the pending moves stay (its new process
	// hands them off).
	res = mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 9001, Rack: "a"})
	if b, _ := f.View().Broker(1); b.State != metadata.BrokerActive || b.Epoch != 4 || !b.Accepting() {
		t.Fatalf("broker 1 registered again: %+v", b)
	}
	if p := part(f, "t", 1); !p.Moving || p.MovingTo != 3 {
		t.Fatalf("t/1 after the new registration: %+v", p)
	}
	mustApply(t, f, &beginMoveCmd{TopicID: topicID(1), Partition: 0, Target: 1, Gen: true})
}

// TestDrainWithoutTargets: a broker alone (or with only draining and fenced others)
// turns draining and keeps its partitions: no target; the failover plan then leaves the
// partitions of a fenced broker without a leader rather than give them to the
// draining one.
func TestDrainWithoutTargets(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2, Rack: "a"})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1}, {Leader: 1}, {Leader: 2}}}})
	mustApply(t, f, &drainBrokerCmd{ID: 2, Epoch: 1})
	res := mustApply(t, f, &drainBrokerCmd{ID: 1, Epoch: 1})
	if dr := res.Value.(drainResult); !dr.Started || dr.Moves != 0 || dr.NoTarget != 2 {
		t.Fatalf("drain of the last accepting broker: %+v", dr)
	}
	if got := movingTo(f, "t"); !reflect.DeepEqual(got, []int32{-1, -1, -1}) {
		t.Fatalf("moves without a target: %v", got)
	}
	fence(t, f, 2)
	if p := part(f, "t", 2); p.Leader != -1 || !p.Recovering {
		t.Fatalf("t/2 of fenced 2 with only draining 1 left: %+v", p)
	}
	if _, ok := place(f.View(), nil, 0, 1); ok {
		t.Fatal("placed a partition with only a draining broker")
	}
}

// TestDrainBrokerClient: a broker's Client drains its own registration over the API (via
// a follower); it sees itself draining, still holds its lease, completes every hand-off
// to the broker of its zone and ends up leading nothing; a new registration is active
// again. A stale epoch is refused. That a draining broker's heartbeats keep it live past
// every fence timeout is TestMemQuorumDrainKeepsLease's, on a fake clock: the client
// heartbeats the same while draining, so it needs no real seconds here.
func TestDrainBrokerClient(t *testing.T) {
	reg := prometheus.NewRegistry()
	tc := newTestCluster(t, 3, func(c *Config) { c.Registerer = reg })
	leader := tc.waitLeader()
	ctx := ctxT(t)
	b1 := tc.broker(1, "a")
	tc.broker(2, "a")
	tc.broker(3, "b")
	if _, err := b1.CreateTopic(ctx, metadata.TopicSpec{Name: "t", Partitions: 9, ReplicationFactor: -1}, false); err != nil {
		t.Fatal(err)
	}
	if n := b1.View().PartitionsLedBy(1); n != 3 {
		t.Fatalf("broker 1 leads %d partitions, want 3", n)
	}
	if b1.Draining() {
		t.Fatal("draining before DrainBroker")
	}
	// Through a follower: the drain is forwarded to the leader.
	fc := tc.client(1, nil, tc.follower(leader))
	if _, err := fc.DrainRegistration(ctx, 1, b1.Epoch()+1); !errors.Is(err, metadata.ErrFenced) {
		t.Fatalf("drain of a future epoch: %v, want ErrFenced", err)
	}
	if err := b1.DrainBroker(ctx); err != nil {
		t.Fatal(err)
	}
	if !b1.Draining() {
		t.Fatal("the client does not see its own drain")
	}
	v := b1.View()
	for _, p := range v.Topics["t"].Partitions {
		if p.Leader == 1 && (!p.Moving || p.MovingTo != 2) {
			t.Fatalf("t/%d of the draining broker: %+v, want moving to 2 (same zone)", p.Index, p)
		}
		if p.Leader != 1 && p.Moving {
			t.Fatalf("t/%d moving though not the drained broker's: %+v", p.Index, p)
		}
	}
	if isClosed(b1.Fenced()) || !b1.LeaseValid(time.Now()) {
		t.Fatal("the draining broker was fenced or lost its lease")
	}
	if b, _ := b1.View().Broker(1); !b.Draining() {
		t.Fatalf("broker 1 after the drain: %+v", b)
	}
	for _, p := range b1.View().Topics["t"].Partitions {
		if p.Leader == 1 {
			if err := b1.CompleteMoveGen(ctx, b1.View().Topics["t"].ID, p.Index, 10, p.MoveGen); err != nil {
				t.Fatalf("hand-off of t/%d: %v", p.Index, err)
			}
		}
	}
	if n := b1.View().PartitionsLedBy(1); n != 0 {
		t.Fatalf("the drained broker still leads %d", n)
	}
	if n := b1.View().PartitionsLedBy(2); n != 6 {
		t.Fatalf("broker 2 leads %d, want 6", n)
	}
	if err := b1.RegisterBroker(ctx, brokerFor(1, "a")); err != nil {
		t.Fatal(err)
	}
	if b1.Draining() {
		t.Fatal("draining after a new registration")
	}
	if b, _ := b1.View().Broker(1); b.State != metadata.BrokerActive {
		t.Fatalf("broker 1 registered again: %+v", b)
	}
	// Undrain and decommission over the API (through a follower), their refusals
	// mapped back to the sentinels.
	if _, err := fc.DrainRegistration(ctx, 1, b1.Epoch()); err != nil {
		t.Fatal(err)
	}
	if err := fc.UndrainRegistration(ctx, 1, b1.Epoch()); err != nil {
		t.Fatal(err)
	}
	if b, _ := fc.View().Broker(1); b.State != metadata.BrokerActive {
		t.Fatalf("broker 1 after undrain: %+v", b)
	}
	testutil.Eventually(t, 10*time.Second, "broker 1's own client sees the undrain", func() bool { return !b1.Draining() })
	if err := fc.Decommission(ctx, 1); !errors.Is(err, metadata.ErrBrokerState) {
		t.Fatalf("decommission of a live broker: %v, want ErrBrokerState", err)
	}
	if err := fc.Decommission(ctx, 42); !errors.Is(err, metadata.ErrUnknownBroker) {
		t.Fatalf("decommission of an unknown broker: %v, want ErrUnknownBroker", err)
	}
	if n := sumMetric(t, reg, "weir_controller_brokers_drained_total"); n != 2 {
		t.Fatalf("drains counted: %v, want 1", n)
	}
	// Every controller exports the leaders of its own View: 9 each (the second drain's
	// moves are under way, not complete).
	testutil.Eventually(t, 10*time.Second, "27 partitions led over 3 controllers' metrics", func() bool {
		return sumMetric(t, reg, "weir_controller_broker_partitions_led") == 27
	})
}
