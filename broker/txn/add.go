package txn

// add.go is AddPartitionsToTxn and AddOffsetsToTxn (a transaction's partitions, made
// durable before the producer writes to them, so that the markers reach each) and
// KIP-890's verification of a partition by its leader.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// AddPartitions adds partitions to the producer's transaction, starting one if none is
// open. Partitions already in it are answered at once.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, producer Producer, partitions []TopicPartition) error {
	return c.add(ctx, id, producer, partitions, nil)
}

// AddOffsets adds group's __consumer_offsets partition to the producer's transaction
// (AddOffsetsToTxn), so that the offsets the producer commits in it (TxnOffsetCommit) are
// ended by a marker there too.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, producer Producer, group string) error {
	tp := TopicPartition{Topic: OffsetsTopic, Partition: c.deps.OffsetsPartition(group)}
	return c.add(ctx, id, producer, []TopicPartition{tp}, []string{group})
}

func (c *Coordinator) add(ctx context.Context, id string, producer Producer, partitions []TopicPartition, groups []string) error {
	partitions = mergeSorted(nil, partitions, comparePartitions)
	groups = mergeSorted(nil, groups, cmp.Compare[string])
	c.mu.Lock()
	defer c.mu.Unlock()
	p, t, err := c.producerTxnLocked(id, producer)
	if err != nil {
		return err
	}
	switch {
	case t.pending != nil:
		return fmt.Errorf("%w: a change of %q is being written", ErrConcurrentTransactions, id)
	case t.m.State == PrepareCommit || t.m.State == PrepareAbort:
		return fmt.Errorf("%w: the transaction is %v", ErrConcurrentTransactions, t.m.State)
	case t.m.State == Ongoing && t.m.hasPartitions(partitions) && hasAll(t.m.Groups, groups):
		return nil
	}
	return c.write(ctx, p, t, addTransition(t.m, partitions, groups, c.now()))
}

// hasAll reports whether every one of items is in sorted.
func hasAll(sorted, items []string) bool {
	for _, g := range items {
		if _, ok := slices.BinarySearch(sorted, g); !ok {
			return false
		}
	}
	return true
}

// VerifyPartitions answers a partition leader asking, before it appends the producer's
// first transactional batch, whether each partition is in the producer's open
// transaction (KIP-890 part 1, AddPartitionsToTxn v4+ with VerifyOnly): the answer has
// one error per partition, nil or ErrNotInTransaction. A partition counts once its
// addition is durable, until the transaction's outcome is. The error is the request's
// (the producer is not the ID's current one, or its transaction is ending).
func (c *Coordinator) VerifyPartitions(id string, producer Producer, partitions []TopicPartition) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, t, err := c.producerTxnLocked(id, producer)
	if err != nil {
		return nil, err
	}
	if t.m.State == PrepareCommit || t.m.State == PrepareAbort {
		return nil, fmt.Errorf("%w: the transaction is %v", ErrConcurrentTransactions, t.m.State)
	}
	out := make([]error, len(partitions))
	for i, tp := range partitions {
		if t.m.State != Ongoing || !t.m.hasPartitions([]TopicPartition{tp}) {
			out[i] = fmt.Errorf("%w: %s/%d", ErrNotInTransaction, tp.Topic, tp.Partition)
		}
	}
	return out, nil
}
