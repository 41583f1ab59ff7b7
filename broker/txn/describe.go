package txn

// describe.go answers DescribeTransactions and ListTransactions from memory.

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Description is a transactional ID's state, as DescribeTransactions shows it.
type Description struct {
	TransactionalID string
	State           State
	ProducerID      int64
	ProducerEpoch   int16
	Timeout         time.Duration
	// Start is when the open transaction began (zero: none; Kafka's -1).
	Start      time.Time
	Partitions []TopicPartition
}

// Describe is the state of transactional ID id.
func (c *Coordinator) Describe(id string) (Description, error) {
	if id == "" {
		return Description{}, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, t, err := c.lookupLocked(id)
	if err != nil {
		return Description{}, err
	}
	if t == nil {
		return Description{}, fmt.Errorf("%w: %q", ErrTransactionalIDNotFound, id)
	}
	return Description{
		TransactionalID: id,
		State:           t.m.State,
		ProducerID:      t.m.ProducerID,
		ProducerEpoch:   t.m.ProducerEpoch,
		Timeout:         t.m.Timeout,
		Start:           t.m.Start,
		Partitions:      slices.Clone(t.m.Partitions),
	}, nil
}

// ListFilter selects the IDs ListTransactions lists; an empty field selects all.
type ListFilter struct {
	States      []string // Kafka's state names
	ProducerIDs []int64
	// MinDuration, when > 0, lists only transactions that began longer ago than that
	// (KIP-994's DurationFilter; an ID with no transaction open counts as begun at Unix
	// time -1 ms, as in Kafka). Zero or negative (Kafka's -1): no filter.
	MinDuration time.Duration
}

// Listing is one ID ListTransactions lists.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           State
}

// List lists the IDs of every loaded partition that f selects, sorted by ID, and the
// state names of f Kafka does not know. While a partition is loading it fails with
// COORDINATOR_LOAD_IN_PROGRESS (the list would be incomplete), as Kafka does.
func (c *Coordinator) List(f ListFilter) (list []Listing, unknownStates []string, err error) {
	states := map[State]bool{}
	for _, name := range f.States {
		if s, ok := stateByName(name); ok {
			states[s] = true
		} else {
			unknownStates = append(unknownStates, name)
		}
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, errClosed
	}
	for _, p := range c.parts {
		if p.loading {
			return nil, nil, fmt.Errorf("%w: partition %d of %s", ErrLoadInProgress, p.index, TopicName)
		}
	}
	for _, p := range c.parts {
		for _, t := range p.txns {
			m := &t.m
			switch {
			case len(f.States) > 0 && !states[m.State]:
			case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.ProducerID):
			case f.MinDuration > 0 && now.UnixMilli()-toMs(m.Start) <= f.MinDuration.Milliseconds():
			default:
				list = append(list, Listing{TransactionalID: t.id, ProducerID: m.ProducerID, State: m.State})
			}
		}
	}
	slices.SortFunc(list, func(a, b Listing) int { return cmp.Compare(a.TransactionalID, b.TransactionalID) })
	return list, unknownStates, nil
}
