package txn

// markers.go ends a transaction whose outcome is durable (PrepareCommit, PrepareAbort):
// a marker to each of its partitions through the MarkerWriter, retried with backoff
// until every partition has one (or needs none), then CompleteCommit or CompleteAbort
// made durable, retried likewise. It stops when the partition of __transaction_state
// leaves this coordinator (Unload, a new Load, Close): the transaction stays Prepare* in
// the log, and whoever loads the partition next writes its markers again (a marker
// written twice is a no-op on the partition) and completes it.

import (
	"context"
	"errors"
	"slices"
)

// startMarkers starts ending t's transaction (t is Prepare*). Called with c.mu held.
func (c *Coordinator) startMarkers(p *partition, t *txn) {
	if c.closed {
		return
	}
	producer := Producer{t.m.ProducerID, t.m.ProducerEpoch}
	commit := t.m.State == PrepareCommit
	left := slices.Clone(t.m.Partitions)
	c.wg.Add(1) // under c.mu, not closed: never concurrent with Close's Wait
	go func() {
		defer c.wg.Done()
		c.finishTxn(p, t, producer, commit, left)
	}()
}

// finishTxn writes the markers of t's transaction to the partitions left, then completes it.
func (c *Coordinator) finishTxn(p *partition, t *txn, producer Producer, commit bool, left []TopicPartition) {
	backoff := c.cfg.RetryBackoff
	wait := func() bool {
		ok := c.sleep(p.ctx, backoff)
		backoff = min(2*backoff, c.cfg.RetryBackoffMax)
		return ok
	}
	for attempt := 1; len(left) > 0; attempt++ {
		ctx, cancel := context.WithTimeout(p.ctx, c.cfg.MarkerTimeout)
		errs := c.deps.Markers.WriteMarkers(ctx, producer, commit, p.epoch, left)
		cancel()
		if p.ctx.Err() != nil {
			return
		}
		var retry []TopicPartition
		for i, tp := range left {
			var err error = errNoAnswer
			if i < len(errs) {
				err = errs[i]
			}
			switch classifyMarker(err) {
			case markerStale:
				c.log.Warn("transaction markers refused: a newer coordinator or producer epoch exists; left to the partition's next load",
					"transactional_id", t.id, "producer_id", producer.ID, "epoch", producer.Epoch, "partition", tp.Topic, "index", tp.Partition, "err", err)
				return
			case markerRetry:
				retry = append(retry, tp)
				if len(retry) == 1 && attempt&(attempt-1) == 0 { // attempts 1, 2, 4, 8...
					c.log.Info("transaction markers failed; retrying", "transactional_id", t.id, "attempt", attempt,
						"partitions", len(left), "failed_first", tp.Topic, "index", tp.Partition, "err", err)
				}
			}
		}
		if left = retry; len(left) > 0 && !wait() {
			return
		}
	}
	for {
		c.mu.Lock()
		if !c.current(p, t) {
			c.mu.Unlock()
			return
		}
		err := c.write(p.ctx, p, t, completeTransition(t.m, c.now()))
		ok := c.current(p, t)
		c.mu.Unlock()
		if err == nil || !ok {
			return
		}
		c.log.Warn("completing a transaction failed; retrying", "transactional_id", t.id, "err", err, "retry_in", backoff)
		if !wait() {
			return
		}
	}
}

// errNoAnswer stands for a partition the MarkerWriter's answer left out (retried).
var errNoAnswer = errors.New("txn: no answer for the partition's marker")
