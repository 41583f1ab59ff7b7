package txn

// endtxn.go is EndTxn and the fence (an abort the coordinator decides itself, with the
// producer's epoch bumped: InitProducerId over an open transaction, and a timeout).
//
// The outcome is decided once PrepareCommit or PrepareAbort is durable: the producer is
// answered then, and the markers follow (markers.go), as in Kafka. A retried EndTxn of
// the outcome already decided is answered OK, while the markers are being written as
// well as after (Kafka answers CONCURRENT_TRANSACTIONS until they are written, and the
// client retries until OK: the answer is the same, sooner); one of the other outcome,
// INVALID_TXN_STATE.

import (
	"context"
	"fmt"
	"math"
	"time"
)

// EndTxn commits (commit) or aborts the producer's open transaction.
func (c *Coordinator) EndTxn(ctx context.Context, id string, producer Producer, commit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, t, err := c.producerTxnLocked(id, producer)
	if err != nil {
		return err
	}
	switch t.m.State {
	case PrepareCommit, CompleteCommit, PrepareAbort, CompleteAbort:
		if committed := t.m.State == PrepareCommit || t.m.State == CompleteCommit; committed != commit {
			return fmt.Errorf("%w: %s asked, the transaction is %v", ErrInvalidTxnState, outcome(commit), t.m.State)
		}
		return nil // a retry
	}
	switch {
	case t.pending != nil:
		return fmt.Errorf("%w: a change of %q is being written", ErrConcurrentTransactions, id)
	case t.m.State != Ongoing:
		return fmt.Errorf("%w: %s asked, no transaction is open (%v)", ErrInvalidTxnState, outcome(commit), t.m.State)
	}
	if err := c.write(ctx, p, t, prepareTransition(t.m, commit, c.now())); err != nil {
		return err
	}
	c.startMarkers(p, t)
	return nil
}

func outcome(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// fence aborts t's open transaction with its producer epoch bumped, and starts its
// markers once that is durable. Called with c.mu held, t Ongoing and not pending.
func (c *Coordinator) fence(ctx context.Context, p *partition, t *txn) error {
	epoch := t.m.ProducerEpoch
	if !t.fenceFailed && epoch < math.MaxInt16 {
		// MaxInt16 is never a producer's (its epochs stop below, exhaustedEpoch), so
		// the bump always fits; at MaxInt16 the abort keeps the epoch.
		epoch++
	}
	err := c.write(ctx, p, t, fenceTransition(t.m, epoch, c.now()))
	if err != nil {
		if c.current(p, t) {
			t.m.ProducerEpoch, t.m.LastProducerEpoch, t.fenceFailed = epoch, NoEpoch, true
		}
		return err
	}
	t.fenceFailed = false
	c.startMarkers(p, t)
	return nil
}

// AwaitComplete waits until id's transaction has left PrepareCommit/PrepareAbort (its
// markers written and Complete* durable) or ctx ends, polling with a short doubling
// backoff. The front end calls it after a successful EndTxn before answering: the
// outcome is decided already, but a producer answered at once begins its next
// transaction while the markers are still being written and is refused with
// CONCURRENT_TRANSACTIONS, which clients retry after a backoff of their own (tens of
// milliseconds) — waiting for the markers, which take a WAL sync or two, is faster.
// It reports whether the transaction completed.
func (c *Coordinator) AwaitComplete(ctx context.Context, id string) bool {
	backoff := 500 * time.Microsecond
	for {
		d, err := c.Describe(id)
		if err != nil || (d.State != PrepareCommit && d.State != PrepareAbort) {
			return err == nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, 20*time.Millisecond)
	}
}
