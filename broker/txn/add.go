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
// open. Partitions already in it are answered at once. An addition that finds another
// being written waits for it, then adds its own: a client adding partitions from each
// broker connection at once (franz-go adds those of a produce request before sending
// it, one request per broker) would otherwise be refused CONCURRENT_TRANSACTIONS and
// retry after a backoff of its own, tens of milliseconds per refusal, which made
// transactions over many partitions several times slower than over one.
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
	p, t, err := c.awaitAdd(ctx, id, producer)
	if err != nil {
		return err
	}
	switch {
	case t.m.State == PrepareCommit || t.m.State == PrepareAbort:
		return fmt.Errorf("%w: the transaction is %v", ErrConcurrentTransactions, t.m.State)
	case t.m.State == Ongoing && t.m.hasPartitions(partitions) && hasAll(t.m.Groups, groups):
		return nil
	}
	return c.write(ctx, p, t, addTransition(t.m, partitions, groups, c.now()))
}

// awaitAdd finds id's state for an addition, waiting while another addition of it is
// being written (any other change pending is answered CONCURRENT_TRANSACTIONS: an
// outcome or a fence, after which the addition could not succeed anyway). Called with
// c.mu held, which it releases while it waits.
func (c *Coordinator) awaitAdd(ctx context.Context, id string, producer Producer) (*partition, *txn, error) {
	for {
		p, t, err := c.producerTxnLocked(id, producer)
		switch {
		case err != nil:
			return nil, nil, err
		case t.pending == nil:
			return p, t, nil
		case t.pending.State != Ongoing:
			return nil, nil, fmt.Errorf("%w: a change of %q is being written", ErrConcurrentTransactions, id)
		}
		written := t.written
		c.mu.Unlock()
		select {
		case <-written:
			c.mu.Lock()
		case <-ctx.Done():
			c.mu.Lock()
			return nil, nil, fmt.Errorf("%w: a change of %q is being written: %w", ErrConcurrentTransactions, id, ctx.Err())
		}
	}
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
