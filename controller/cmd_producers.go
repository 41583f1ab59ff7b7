package controller

import (
	"fmt"

	"github.com/weir-io/weir/controller/ctlwire"
)

// allocateProducerIDsCmd reserves Count producer IDs; the value is the first one.
type allocateProducerIDsCmd struct {
	Count int64 `json:"count"`
}

func (*allocateProducerIDsCmd) kind() cmdType { return cmdAllocateProducerIDs }

func (c *allocateProducerIDsCmd) apply(m *machine) (any, bool, error) {
	if c.Count < 1 || c.Count > ctlwire.MaxProducerIDBlock {
		return nil, false, fmt.Errorf("%w: producer id block of %d", ctlwire.ErrBadRequest, c.Count)
	}
	first := m.st.NextProducerID
	m.st.NextProducerID += c.Count
	return first, true, nil
}
