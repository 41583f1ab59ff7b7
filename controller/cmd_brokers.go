package controller

import (
	"fmt"

	"github.com/weir-io/weir/metadata"
)

// registerBrokerCmd records a broker start: its endpoints and rack, a new epoch (the
// previous one + 1) and state active. The value is the new epoch.
type registerBrokerCmd struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
}

func (*registerBrokerCmd) kind() cmdType { return cmdRegisterBroker }

func (c *registerBrokerCmd) apply(m *machine) (any, bool, error) {
	if c.ID < 0 {
		return nil, false, fmt.Errorf("%w: broker id %d", errInvalidRequest, c.ID)
	}
	prev := m.st.Brokers[c.ID]
	b := metadata.Broker{
		ID:    c.ID,
		Host:  c.Host,
		Port:  c.Port,
		Rack:  c.Rack,
		Epoch: prev.Epoch + 1,
		State: metadata.BrokerActive,
	}
	m.st.Brokers[c.ID] = b
	return b.Epoch, true, nil
}

// fenceBrokerCmd fences a broker, but only the registration it was decided for: a
// broker that registered again since (new epoch) is left alone. The value reports
// whether the broker was fenced.
type fenceBrokerCmd struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

func (*fenceBrokerCmd) kind() cmdType { return cmdFenceBroker }

func (c *fenceBrokerCmd) apply(m *machine) (any, bool, error) {
	b, ok := m.st.Brokers[c.ID]
	if !ok || b.Epoch != c.Epoch || !b.Active() {
		return false, false, nil
	}
	b.State = metadata.BrokerFenced
	m.st.Brokers[c.ID] = b
	return true, true, nil
}
