package controller

import (
	"errors"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// TestUndrain: a drained registration is accepting again after undrain (placement picks
// it); the moves its drain began are left to finish; undraining an active broker is no
// change; a stale epoch is refused like a drain's.
func TestUndrain(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2, Rack: "b"})
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1}, {Index: 1, Leader: 2}}}})
	mustApply(t, f, &drainBrokerCmd{ID: 1, Epoch: 1})
	if p := part(f, "t", 0); !p.Moving || p.MovingTo != 2 {
		t.Fatalf("t/0 after the drain of 1: %+v", p)
	}
	if res := apply(t, f, &undrainBrokerCmd{ID: 1, Epoch: 2}); !errors.Is(res.Err, metadata.ErrFenced) {
		t.Fatalf("undrain of a future epoch: %v, want ErrFenced", res.Err)
	}
	mustApply(t, f, &undrainBrokerCmd{ID: 1, Epoch: 1})
	b, _ := f.View().Broker(1)
	if !b.Accepting() || b.State != metadata.BrokerActive {
		t.Fatalf("broker 1 after undrain: %+v", b)
	}
	if p := part(f, "t", 0); !p.Moving || p.MovingTo != 2 {
		t.Fatalf("the drain's move was not left to finish: %+v", p)
	}
	if parts, _ := place(f.View(), nil, 0, 2); countLeaders(parts)[1] != 1 {
		t.Fatalf("placement after undrain: %v, want one on broker 1", countLeaders(parts))
	}
	v := f.View().Version
	mustApply(t, f, &undrainBrokerCmd{ID: 1, Epoch: 1})
	if f.View().Version != v {
		t.Fatal("undrain of an active broker changed the state")
	}
}

// TestDecommission: only a fenced broker is retired (a live one is refused with
// ErrBrokerState, an unknown ID with ErrUnknownBroker); it leaves every listing clients
// and placement use; twice is no change; a partition left leaderless by its fence is
// still adopted by the next broker to register (the WAL is read by broker ID, not
// registration); and a broker of the same ID registering again gets the next epoch.
func TestDecommission(t *testing.T) {
	f := NewFSM(nil)
	mustApply(t, f, &initClusterCmd{ClusterID: "c"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"}) // epoch 2
	mustApply(t, f, &createTopicCmd{Topic: metadata.Topic{Name: "t", ID: topicID(1), Partitions: []metadata.Partition{{Leader: 1, Logs: []metadata.LogRange{{Broker: 1}}}}}})
	if res := apply(t, f, &decommissionBrokerCmd{ID: 1}); !errors.Is(res.Err, metadata.ErrBrokerState) {
		t.Fatalf("decommission of a live broker: %v, want ErrBrokerState", res.Err)
	}
	mustApply(t, f, &drainBrokerCmd{ID: 1, Epoch: 2})
	if res := apply(t, f, &decommissionBrokerCmd{ID: 1}); !errors.Is(res.Err, metadata.ErrBrokerState) {
		t.Fatalf("decommission of a draining broker: %v, want ErrBrokerState", res.Err)
	}
	if res := apply(t, f, &decommissionBrokerCmd{ID: 9}); !errors.Is(res.Err, metadata.ErrUnknownBroker) {
		t.Fatalf("decommission of an unknown broker: %v, want ErrUnknownBroker", res.Err)
	}
	fence(t, f, 1)
	if p := part(f, "t", 0); p.Leader != -1 || !p.Recovering {
		t.Fatalf("t/0 after the fence of the only broker: %+v", p)
	}
	mustApply(t, f, &decommissionBrokerCmd{ID: 1})
	b, _ := f.View().Broker(1)
	if !b.Decommissioned() || b.Active() || b.Accepting() || b.Epoch != 2 {
		t.Fatalf("broker 1 decommissioned: %+v", b)
	}
	v := f.View().Version
	mustApply(t, f, &decommissionBrokerCmd{ID: 1})
	if f.View().Version != v {
		t.Fatal("a second decommission changed the state")
	}
	mustApply(t, f, &registerBrokerCmd{ID: 2, Host: "h", Port: 2, Rack: "b"})
	if p := part(f, "t", 0); p.Leader != 2 || !p.Recovering {
		t.Fatalf("t/0 not adopted by broker 2 after 1 was decommissioned: %+v", p)
	}
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 1, Rack: "a"})
	if b, _ := f.View().Broker(1); b.State != metadata.BrokerActive || b.Epoch != 3 {
		t.Fatalf("broker 1 registered again after its decommission: %+v, want active in epoch 3", b)
	}
}
