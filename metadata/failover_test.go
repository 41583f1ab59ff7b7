package metadata

import (
	"errors"
	"reflect"
	"testing"
)

// TestPlanFenceLegacyChainAndInputs: a partition without a log chain (state written
// before chains: its leader wrote everything) gets the fenced broker's log range from 0, so
// the recovery has a range to end; the plan copies what it changes and leaves its inputs
// alone.
func TestPlanFenceLegacyChainAndInputs(t *testing.T) {
	brokers := []Broker{{ID: 1, Rack: "a", Epoch: 4, State: BrokerFenced}, {ID: 2, Rack: "b", Epoch: 1}}
	top := &Topic{Name: "old", Partitions: []Partition{
		{Index: 0, Leader: 1, Objects: []ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: 9}}},
		{Index: 1, Leader: 1, Logs: []LogRange{{Broker: 2}, {Broker: 1, StartOffset: 7}}, MovingTo: -1},
	}}
	ups := PlanFence(brokers, map[string]*Topic{"old": top}, brokers[0])
	if len(ups) != 2 {
		t.Fatalf("plan %+v", ups)
	}
	p := ups[0].Partition
	if p.Leader != 2 || !p.Recovering || p.RecoverEpoch != 4 || !reflect.DeepEqual(p.Logs, []LogRange{{Broker: 1}}) || len(p.Objects) != 1 {
		t.Fatalf("legacy partition: %+v", p)
	}
	if top.Partitions[0].Logs != nil || top.Partitions[0].Leader != 1 || top.Partitions[1].Recovering {
		t.Fatalf("the plan changed its input: %+v", top.Partitions)
	}
	done, err := ApplyRecovery("old", ups[1].Partition, 2, 1, 12)
	if err != nil || !reflect.DeepEqual(done.Logs, []LogRange{{Broker: 2}, {Broker: 1, StartOffset: 7}, {Broker: 2, StartOffset: 12}}) {
		t.Fatalf("recovery: %+v %v", done, err)
	}
	if len(ups[1].Partition.Logs) != 2 || !RecoveryDone(done, 2, 1, 12) || RecoveryDone(done, 2, 1, 13) {
		t.Fatal("ApplyRecovery shared the chain, or RecoveryDone misjudged")
	}
	if _, err := ApplyRecovery("old", ups[1].Partition, 2, 1, 6); !errors.Is(err, ErrInvalidOffset) {
		t.Fatalf("end before the recovered range's start: %v", err)
	}
	if got := PlanFence(brokers, map[string]*Topic{"old": top}, Broker{ID: 9}); got != nil {
		t.Fatalf("fencing a broker that leads nothing: %+v", got)
	}
}
