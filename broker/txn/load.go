package txn

// load.go moves partitions of __transaction_state in and out of this coordinator with
// their leadership: Load replays a partition's records (the latest of each ID is its
// state) and resumes the transactions left in Prepare*; Unload forgets them.
//
// As for groups, a partition gained again is loaded afresh rather than kept: what
// another coordinator appended meanwhile is in the log, and only in the log.

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// LoadStats says what Load installed.
type LoadStats struct {
	Records int // records of the partition's IDs replayed
	IDs     int // transactional IDs installed
	Resumed int // transactions in Prepare* whose markers are written again
	Foreign int // records of IDs another partition holds (skipped)
}

// Load makes this coordinator the one of partition index of __transaction_state, at
// coordinatorEpoch (its leader epoch: markers carry it, and store writes name it).
// replay calls apply with every record of the partition, in log order. While it runs,
// requests for the partition's IDs get COORDINATOR_LOAD_IN_PROGRESS; if it fails they
// still do, until Load is called again or Unload. Loading a partition already loaded
// replaces it (its marker loops stop first).
func (c *Coordinator) Load(index, coordinatorEpoch int32, replay func(apply func(Record)) error) (LoadStats, error) {
	if index < 0 || int(index) >= c.cfg.Partitions {
		return LoadStats{}, fmt.Errorf("txn: partition %d of %s out of range [0, %d)", index, TopicName, c.cfg.Partitions)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return LoadStats{}, errClosed
	}
	if old := c.parts[index]; old != nil {
		old.cancel()
	}
	ctx, cancel := context.WithCancel(c.ctx)
	p := &partition{index: index, epoch: coordinatorEpoch, loading: true, ctx: ctx, cancel: cancel}
	c.parts[index] = p
	c.mu.Unlock()

	var st LoadStats
	states := map[string]Meta{}
	err := replay(func(rec Record) {
		if c.PartitionFor(rec.TransactionalID) != index {
			st.Foreign++
			return
		}
		st.Records++
		if rec.Tombstone() {
			delete(states, rec.TransactionalID)
			return
		}
		states[rec.TransactionalID] = rec.Meta.clone()
	})

	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return LoadStats{}, errClosed
	case c.parts[index] != p:
		return LoadStats{}, fmt.Errorf("%w: partition %d of %s unloaded during its load", ErrNotCoordinator, index, TopicName)
	case err != nil:
		return LoadStats{}, fmt.Errorf("txn: loading partition %d of %s: %w", index, TopicName, err)
	}
	p.txns = make(map[string]*txn, len(states))
	for id, m := range states {
		p.txns[id] = &txn{id: id, m: m}
	}
	p.loading = false
	st.IDs = len(p.txns)
	for _, id := range slices.Sorted(maps.Keys(p.txns)) {
		if t := p.txns[id]; t.m.State == PrepareCommit || t.m.State == PrepareAbort {
			c.startMarkers(p, t)
			st.Resumed++
		}
	}
	return st, nil
}

// Unload forgets partition index of __transaction_state (its leadership left this broker):
// its marker loops stop, writes in flight are answered NOT_COORDINATOR, and requests for
// its IDs get NOT_COORDINATOR. It returns how many IDs it dropped.
func (c *Coordinator) Unload(index int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parts[index]
	if p == nil {
		return 0
	}
	delete(c.parts, index)
	p.cancel()
	return len(p.txns)
}
