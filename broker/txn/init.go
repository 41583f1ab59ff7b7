package txn

// init.go is InitProducerId for a transactional ID (Kafka's handleInitProducerId):
//   - an unknown ID gets a new producer ID at epoch 0;
//   - an ID with no open transaction gets its epoch bumped (every producer of an older
//     epoch is fenced from now on), or a new producer ID at epoch 0 once the epoch is
//     exhausted;
//   - an ID with an open transaction (Ongoing) has it aborted with the epoch bumped (a
//     fence: the markers carry the new epoch, so the partitions refuse the old producer
//     too) and the producer is answered CONCURRENT_TRANSACTIONS once the abort is
//     durable; its retry, once the abort is complete, bumps the epoch again and gets it.
//     (Kafka does the same: the epoch the fence takes is never handed out, and a fence
//     that exhausts the epoch makes the retry get a new producer ID);
//   - while a transaction is being committed or aborted: CONCURRENT_TRANSACTIONS.
//
// KIP-360: a producer may name its current producer ID and epoch, to bump its own epoch
// after an error instead of being fenced. That is allowed when they are the ID's current
// ones; a retry of such a bump whose answer was lost (it names the epoch before the
// bump) gets the same answer again; a retry of one that made a new producer ID names the
// previous producer ID and its exhausted epoch. Any other producer and epoch is fenced.

import (
	"context"
	"fmt"
	"time"
)

// InitProducerID initializes the producer of transactional ID id, with transaction
// timeout timeout, and returns its producer ID and epoch. current is the producer's
// current ID and epoch (KIP-360), or NoProducer.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeout time.Duration, current Producer) (Producer, error) {
	switch {
	case id == "":
		return NoProducer, fmt.Errorf("%w: empty transactional id", ErrInvalidRequest)
	case (current.ID == NoProducerID) != (current.Epoch == NoEpoch):
		return NoProducer, fmt.Errorf("%w: producer id %d with epoch %d", ErrInvalidRequest, current.ID, current.Epoch)
	case timeout <= 0 || timeout > c.cfg.MaxTimeout:
		return NoProducer, fmt.Errorf("%w: %v, the maximum is %v", ErrInvalidTimeout, timeout, c.cfg.MaxTimeout)
	}
	newID := NoProducerID // allocated outside the lock, when the state needs one
	for {
		c.mu.Lock()
		got, needID, err := c.initLocked(ctx, id, timeout, current, &newID)
		c.mu.Unlock()
		if !needID {
			return got, err
		}
		if newID, err = c.deps.ProducerIDs.AllocateProducerID(ctx); err != nil {
			return NoProducer, fmt.Errorf("%w: allocating a producer id: %w", ErrCoordinatorNotAvailable, err)
		}
	}
}

// initLocked is one attempt of InitProducerID, with c.mu held. needID asks for a new
// producer ID in *newID and another attempt; *newID is reset once used.
func (c *Coordinator) initLocked(ctx context.Context, id string, timeout time.Duration, current Producer, newID *int64) (got Producer, needID bool, err error) {
	p, t, err := c.lookupLocked(id)
	if err != nil {
		return NoProducer, false, err
	}
	now := c.now()
	if t == nil {
		if *newID == NoProducerID {
			return NoProducer, true, nil
		}
		// In memory until its first record is durable, like Kafka's: the write below
		// makes it epoch 0.
		t = &txn{id: id, m: Meta{State: Empty, ProducerID: *newID, ProducerEpoch: NoEpoch,
			PrevProducerID: NoProducerID, LastProducerEpoch: NoEpoch, Timeout: timeout, Updated: now}}
		*newID = NoProducerID
		p.txns[id] = t
	}
	switch {
	case t.pending != nil:
		return NoProducer, false, fmt.Errorf("%w: a change of %q is being written", ErrConcurrentTransactions, id)
	case !validCurrent(t.m, current):
		return NoProducer, false, fmt.Errorf("%w: producer id %d is not the transactional id's (%d)", ErrProducerFenced, current.ID, t.m.ProducerID)
	}
	switch t.m.State {
	case PrepareCommit, PrepareAbort:
		return NoProducer, false, fmt.Errorf("%w: the transaction is %v", ErrConcurrentTransactions, t.m.State)
	case Ongoing:
		if err := c.fence(ctx, p, t); err != nil {
			return NoProducer, false, err
		}
		return NoProducer, false, fmt.Errorf("%w: the open transaction is being aborted", ErrConcurrentTransactions)
	}
	var next Meta
	if needsRotation(t.m, current) {
		if *newID == NoProducerID {
			return NoProducer, true, nil
		}
		next = rotateTransition(t.m, *newID, current, timeout, now)
		*newID = NoProducerID
	} else if next, err = initTransition(t.m, current, timeout, now); err != nil {
		return NoProducer, false, err
	}
	if err := c.write(ctx, p, t, next); err != nil {
		return NoProducer, false, err
	}
	return Producer{next.ProducerID, next.ProducerEpoch}, false, nil
}
