package controller

import (
	"fmt"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// registerBrokerCmd records a broker start: its endpoints (the main one and its per-zone
// listeners, which entries written before they existed lack) and rack, a new epoch (the
// previous one + 1) and state active. The broker then takes over every Recovering
// partition left without a leader (metadata.PlanAdopt: its broker was fenced while no
// broker was active). The value is a registerResult.
//
// Whether the ID is in use by another live process (another incarnation whose lease
// is fresh) is decided by the leader before it proposes (handleRegister): leases are
// not part of the state.
type registerBrokerCmd struct {
	ID        int32               `json:"id"`
	Host      string              `json:"host"`
	Port      int32               `json:"port"`
	Rack      string              `json:"rack,omitempty"`
	Listeners []metadata.Listener `json:"listeners,omitempty"`
}

// registerResult is the value of registerBrokerCmd.
type registerResult struct {
	Epoch int64
	// Adopted counts the leaderless Recovering partitions the broker took over.
	Adopted int
}

func (*registerBrokerCmd) kind() cmdType { return cmdRegisterBroker }

func (c *registerBrokerCmd) apply(m *machine) (any, bool, error) {
	if c.ID < 0 {
		return nil, false, fmt.Errorf("%w: broker id %d", ctlwire.ErrBadRequest, c.ID)
	}
	prev := m.st.Brokers[c.ID]
	b := metadata.Broker{
		ID:    c.ID,
		Host:  c.Host,
		Port:  c.Port,
		Rack:  c.Rack,
		Epoch: prev.Epoch + 1,
		State: metadata.BrokerActive,

		Listeners: c.Listeners,
	}
	m.st.Brokers[c.ID] = b
	adopted := m.applyUpdates(metadata.PlanAdopt(m.st.Topics, b))
	return registerResult{Epoch: b.Epoch, Adopted: adopted}, true, nil
}

// fenceBrokerCmd fences a broker, but only the registration it was decided for: a
// broker that registered again since (new epoch) is left alone. With Plan (every fence
// proposed since failover exists) the same command fails the broker's partitions over
// to the active brokers (metadata.PlanFence): each becomes Recovering under a new
// leader, and moves to the broker are cancelled. Without Plan (entries written before)
// the partitions keep their fenced leader, as they did then, so replaying an old log
// gives the state its snapshots hold. The value is a fenceResult.
type fenceBrokerCmd struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
	Plan  bool  `json:"plan,omitempty"`
}

// fenceResult is the value of fenceBrokerCmd.
type fenceResult struct {
	Fenced bool
	// FailedOver counts the partitions given a new leader; Leaderless those left
	// without one (no active broker), Recovering all the same.
	FailedOver, Leaderless int
	// MovesCancelled counts the moves to the fenced broker that were abandoned.
	MovesCancelled int
}

func (*fenceBrokerCmd) kind() cmdType { return cmdFenceBroker }

func (c *fenceBrokerCmd) apply(m *machine) (any, bool, error) {
	b, ok := m.st.Brokers[c.ID]
	if !ok || b.Epoch != c.Epoch || !b.Active() {
		return fenceResult{}, false, nil
	}
	b.State = metadata.BrokerFenced
	m.st.Brokers[c.ID] = b
	res := fenceResult{Fenced: true}
	if !c.Plan {
		return res, true, nil
	}
	brokers := make([]metadata.Broker, 0, len(m.st.Brokers))
	for _, x := range m.st.Brokers {
		brokers = append(brokers, x)
	}
	ups := metadata.PlanFence(brokers, m.st.Topics, b)
	for _, u := range ups {
		switch was := m.st.Topics[u.Topic].Partitions[u.Partition.Index]; {
		case was.Leader != c.ID:
			res.MovesCancelled++
		case u.Partition.Leader < 0:
			res.Leaderless++
		default:
			res.FailedOver++
		}
	}
	m.applyUpdates(ups)
	return res, true, nil
}

// drainBrokerCmd drains a broker's registration ID/Epoch (a live one: active or
// draining already): the broker becomes draining, so nothing new is placed, failed
// over or moved to it, and every partition it leads that is neither Recovering nor
// moving already begins a graceful move (with Gen semantics: MoveGen = the version this
// command produces) to an accepting broker, picked by metadata.PlanDrain; moves to it
// are cancelled. The broker stays live: it heartbeats, serves and hands each partition
// off with CompleteMove. Draining again plans the partitions left behind (recovered or
// whose move was cancelled since). A new registration (RegisterBroker) is active again.
// A stale epoch or a fenced registration is refused (metadata.ErrFenced). The value is
// a drainResult.
type drainBrokerCmd struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// drainResult is the value of drainBrokerCmd.
type drainResult struct {
	metadata.DrainCounts
	// Started: this command turned the registration from active to draining.
	Started bool
}

func (*drainBrokerCmd) kind() cmdType { return cmdDrainBroker }

func (c *drainBrokerCmd) apply(m *machine) (any, bool, error) {
	b, ok := m.st.Brokers[c.ID]
	if !ok || b.Epoch != c.Epoch || !b.Active() {
		return nil, false, fmt.Errorf("%w: broker %d epoch %d is not current", metadata.ErrFenced, c.ID, c.Epoch)
	}
	res := drainResult{Started: !b.Draining()}
	b.State = metadata.BrokerDraining
	m.st.Brokers[c.ID] = b
	brokers := make([]metadata.Broker, 0, len(m.st.Brokers))
	for _, x := range m.st.Brokers {
		brokers = append(brokers, x)
	}
	ups, counts := metadata.PlanDrain(brokers, m.st.Topics, b, m.st.Version+1)
	res.DrainCounts = counts
	m.applyUpdates(ups)
	return res, res.Started || len(ups) > 0, nil
}

// applyUpdates stores a plan's partition changes, cloning each topic once, and returns
// how many partitions changed.
func (m *machine) applyUpdates(ups []metadata.PartitionUpdate) int {
	clones := map[string]*metadata.Topic{}
	for _, u := range ups {
		t := clones[u.Topic]
		if t == nil {
			t = cloneTopic(m.st.Topics[u.Topic])
			clones[u.Topic] = t
		}
		t.Partitions[u.Partition.Index] = u.Partition
	}
	for _, t := range clones {
		m.putTopic(t)
	}
	return len(ups)
}
