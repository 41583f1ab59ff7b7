package controller

import (
	"fmt"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// undrainBrokerCmd takes broker ID's registration Epoch out of draining (weir admin
// undrain): it is accepting again, so placement, failover, moves and the balancer may
// give it partitions. Moves the drain began are left to finish (each is a graceful
// handoff already under way; cancelling them would refuse producers twice); the
// balancer evens the load afterwards. An active registration is left alone (no change);
// a stale epoch or a fenced one is refused (metadata.ErrFenced), as for a drain.
type undrainBrokerCmd struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

func (*undrainBrokerCmd) kind() cmdType { return cmdUndrainBroker }

func (c *undrainBrokerCmd) apply(m *machine) (any, bool, error) {
	b, ok := m.st.Brokers[c.ID]
	if !ok || b.Epoch != c.Epoch || !b.Active() {
		return nil, false, fmt.Errorf("%w: broker %d epoch %d is not current", metadata.ErrFenced, c.ID, c.Epoch)
	}
	if !b.Draining() {
		return nil, false, nil
	}
	b.State = metadata.BrokerActive
	m.st.Brokers[c.ID] = b
	return nil, true, nil
}

// decommissionBrokerCmd retires broker ID for good (weir admin decommission): a broker
// that will not come back, which would otherwise stay listed as fenced forever. Only a
// fenced broker that leads nothing qualifies: a live one must be drained and stopped
// first (its lease must have run out, so the controllers fenced it and its partitions
// failed over), and a fenced one that still leads partitions (no active broker could
// take them) keeps them until one can. Its WAL stays where it is: the log chain names
// brokers, not registrations, and the WAL collector deletes its directories once what
// they hold is in object storage. Decommissioning twice is no change.
type decommissionBrokerCmd struct {
	ID int32 `json:"id"`
}

func (*decommissionBrokerCmd) kind() cmdType { return cmdDecommissionBroker }

func (c *decommissionBrokerCmd) apply(m *machine) (any, bool, error) {
	b, ok := m.st.Brokers[c.ID]
	switch {
	case !ok:
		return nil, false, fmt.Errorf("%w: broker %d", metadata.ErrUnknownBroker, c.ID)
	case b.Decommissioned():
		return nil, false, nil
	case b.Active():
		return nil, false, fmt.Errorf("%w: broker %d is %s (epoch %d): drain it, stop it, and decommission it once the controllers have fenced it",
			metadata.ErrBrokerState, c.ID, ctlwire.StateOf(b), b.Epoch)
	}
	if n := partitionsLedBy(m.st.Topics, c.ID); n > 0 {
		return nil, false, fmt.Errorf("%w: broker %d still leads %d partitions (no active broker could take them over): start a broker first",
			metadata.ErrBrokerState, c.ID, n)
	}
	b.State = metadata.BrokerDecommissioned
	m.st.Brokers[c.ID] = b
	return nil, true, nil
}

// partitionsLedBy counts the partitions broker id leads or is the target of a move to.
func partitionsLedBy(topics map[string]*metadata.Topic, id int32) int {
	n := 0
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Leader == id || (p.Moving && p.MovingTo == id) {
				n++
			}
		}
	}
	return n
}
